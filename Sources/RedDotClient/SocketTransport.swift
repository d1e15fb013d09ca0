#if canImport(Glibc)
import Foundation
import FoundationNetworking
import Glibc

/// Plain `http://` requests on Linux over a socket of their own, one connection each, read on a
/// thread of their own.
///
/// FoundationNetworking's `URLSession` keeps the socket's write readiness registered while it
/// waits for an answer, and so spins a core for as long as a request is open (a stream, a
/// long-poll); this transport waits in `recv` instead. `https://` still goes through
/// `URLSession`.
enum SocketTransport {
    /// Whether `request` can go this way.
    static func handles(_ request: URLRequest) -> Bool {
        request.url?.scheme?.lowercased() == "http" && request.url?.host != nil
    }

    /// Starts `request` on `connection`; its head and body chunks arrive on the stream. Ending
    /// the iteration, or cancelling the connection, closes it; `onEnd` runs when it is closed.
    static func start(
        _ request: URLRequest, on connection: Connection, connectTimeout: Duration = .seconds(10), onEnd: @escaping @Sendable () -> Void
    ) -> AsyncThrowingStream<HTTPTransport.Part, any Error> {
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: HTTPTransport.Part.self, bufferingPolicy: .unbounded)
        continuation.onTermination = { _ in connection.cancel() }
        let thread = Thread {
            defer { onEnd() }
            do {
                try connection.run(request, connectTimeout: connectTimeout) { continuation.yield($0) }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        thread.name = "RedDotClient.http"
        thread.start()
        return stream
    }

    /// One connection: its socket, which ``cancel()`` shuts down from any thread to end a wait.
    final class Connection: @unchecked Sendable {
        // `@unchecked Sendable`: `socket` and `cancelled` are only touched under `lock`.
        private let lock = NSLock()
        private var socket: Int32 = -1
        private var cancelled = false

        func cancel() {
            lock.lock()
            defer { lock.unlock() }
            cancelled = true
            if socket >= 0 { _ = shutdown(socket, Int32(SHUT_RDWR)) }
        }

        func run(_ request: URLRequest, connectTimeout: Duration, deliver: (HTTPTransport.Part) -> Void) throws {
            guard let url = request.url, let host = url.host else { throw RedDotClientError(.transport, "the request has no host") }
            let port = url.port ?? 80
            guard (1...65_535).contains(port) else { throw RedDotClientError(.transport, "the port \(port) is not 1…65535") }
            let fd = try connect(host: host, port: port, timeout: connectTimeout)
            defer {
                lock.lock()
                socket = -1
                lock.unlock()
                close(fd)
            }
            try send(fd, Self.requestBytes(request, host: host, port: url.port))
            var parser = HTTPResponseParser()
            var chunk = [UInt8](repeating: 0, count: 16 * 1024)
            var headers: [String: String] = [:]
            while true {
                let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if count < 0 {
                    if errno == EINTR { continue }
                    throw failure("reading the answer failed")
                }
                let outputs: [HTTPResponseParser.Output]
                do {
                    outputs = count == 0 ? try parser.finish() : try parser.feed(chunk[0..<count])
                } catch {
                    if isCancelled { throw CancellationError() }
                    throw RedDotClientError(.invalidResponse, error.description)
                }
                for output in outputs {
                    switch output {
                    case .head(let status, let fields):
                        for field in fields { headers[field.name] = field.value }
                        guard let response = HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers) else {
                            throw RedDotClientError(.invalidResponse, "the server's answer head cannot be read")
                        }
                        deliver(.head(response))
                    case .body(let bytes):
                        deliver(.body(Data(bytes)))
                    case .end:
                        return
                    }
                }
                if let fault = parser.fault { throw RedDotClientError(.invalidResponse, fault.description) }
                if count == 0 { return }
            }
        }

        private var isCancelled: Bool {
            lock.lock()
            defer { lock.unlock() }
            return cancelled
        }

        private func failure(_ what: String) -> any Error {
            if isCancelled { return CancellationError() }
            return RedDotClientError(.transport, "\(what): \(String(cString: strerror(errno)))")
        }

        /// A connected socket to `host`:`port` (each address in turn), or an error.
        private func connect(host: String, port: Int, timeout: Duration) throws -> Int32 {
            var hints = addrinfo()
            hints.ai_family = AF_UNSPEC
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
            var list: UnsafeMutablePointer<addrinfo>?
            let resolved = getaddrinfo(host, String(port), &hints, &list)
            guard resolved == 0, let first = list else {
                throw RedDotClientError(.transport, "cannot resolve \(host): \(String(cString: gai_strerror(resolved)))")
            }
            defer { freeaddrinfo(first) }
            var lastError = "no address"
            var candidate: UnsafeMutablePointer<addrinfo>? = first
            while let address = candidate {
                candidate = address.pointee.ai_next
                let fd = Glibc.socket(address.pointee.ai_family, address.pointee.ai_socktype | Int32(SOCK_CLOEXEC.rawValue), 0)
                guard fd >= 0 else { continue }
                lock.lock()
                if cancelled {
                    lock.unlock()
                    close(fd)
                    throw CancellationError()
                }
                socket = fd
                lock.unlock()
                if connectWithin(fd, address.pointee.ai_addr, address.pointee.ai_addrlen, timeout: timeout) {
                    var one: Int32 = 1
                    _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                    return fd
                }
                lastError = String(cString: strerror(errno))
                lock.lock()
                socket = -1
                lock.unlock()
                close(fd)
            }
            if isCancelled { throw CancellationError() }
            throw RedDotClientError(.transport, "cannot connect to \(host) port \(port): \(lastError)")
        }

        private func connectWithin(_ fd: Int32, _ address: UnsafePointer<sockaddr>?, _ length: socklen_t, timeout: Duration) -> Bool {
            let flags = fcntl(fd, F_GETFL)
            _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
            defer { _ = fcntl(fd, F_SETFL, flags) }
            if Glibc.connect(fd, address, length) == 0 { return true }
            guard errno == EINPROGRESS else { return false }
            var poller = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            let milliseconds = Int32(clamping: timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
            guard poll(&poller, 1, milliseconds) == 1 else {
                errno = ETIMEDOUT
                return false
            }
            var error: Int32 = 0
            var size = socklen_t(MemoryLayout<Int32>.size)
            _ = getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size)
            errno = error
            return error == 0
        }

        private func send(_ fd: Int32, _ bytes: [UInt8]) throws {
            var sent = 0
            while sent < bytes.count {
                let count = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if count < 0 {
                    if errno == EINTR { continue }
                    throw failure("sending the request failed")
                }
                sent += count
            }
        }

        /// The request as HTTP/1.1 bytes, `Connection: close`.
        static func requestBytes(_ request: URLRequest, host: String, port: Int?) -> [UInt8] {
            let url = request.url
            var target = url.flatMap { URLComponents(url: $0, resolvingAgainstBaseURL: false)?.percentEncodedPath } ?? "/"
            if target.isEmpty { target = "/" }
            if let query = url?.query(percentEncoded: true) { target += "?" + query }
            let hostField = host.contains(":") ? "[\(host)]" : host
            var head = "\(request.httpMethod ?? "GET") \(target) HTTP/1.1\r\nHost: \(hostField)\(port.map { ":\($0)" } ?? "")\r\n"
            head += "Connection: close\r\nUser-Agent: RedDotClient\r\n"
            for (name, value) in request.allHTTPHeaderFields ?? [:] where !["host", "connection", "content-length"].contains(name.lowercased()) {
                // A field with a line break in it would split the request: left out.
                guard !name.contains(where: \.isNewline), !value.contains(where: \.isNewline) else { continue }
                head += "\(name): \(value)\r\n"
            }
            let body = request.httpBody ?? Data()
            if !body.isEmpty || request.httpMethod == "POST" { head += "Content-Length: \(body.count)\r\n" }
            head += "\r\n"
            return Array(head.utf8) + Array(body)
        }
    }
}
#endif
