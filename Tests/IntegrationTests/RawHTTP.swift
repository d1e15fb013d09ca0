import Dispatch
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// One hostile request.
struct Probe: Sendable {
    let name: String
    let request: [UInt8]
    /// Stop reading after the response head (streams).
    var headOnly = false
    var timeout: Duration = .seconds(10)

    init(_ name: String, _ request: [UInt8], headOnly: Bool = false, timeout: Duration = .seconds(10)) {
        self.name = name
        self.request = request
        self.headOnly = headOnly
        self.timeout = timeout
    }
}

/// What came back on a raw connection.
struct RawResponse: Sendable, CustomStringConvertible {
    /// The status of every response read (pipelined answers included).
    var statuses: [Int] = []
    /// Everything read, as text (invalid UTF-8 replaced), at most 64 KiB kept.
    var text = ""
    /// Why nothing (or not everything) was read: a reset, a refused connection, a timeout.
    var error: String?

    var status: Int? { statuses.first }

    func header(_ name: String) -> String? {
        guard let end = text.range(of: "\r\n\r\n") else { return nil }
        for line in text[..<end.lowerBound].split(separator: "\r\n").dropFirst() {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == name.lowercased() { return parts[1].trimmingCharacters(in: .whitespaces) }
        }
        return nil
    }

    var description: String {
        "status \(statuses.map(String.init).joined(separator: ",")) error \(error ?? "-"): \(text.prefix(400))"
    }
}

/// HTTP/1.1 over blocking sockets to 127.0.0.1, run on Dispatch threads (never the cooperative
/// pool): nothing is validated, so anything can be sent.
enum RawHTTP {
    /// `GET target` with `Connection: close`, and a bearer token if given.
    static func get(_ target: String, token: String?) -> [UInt8] {
        request(target: Array(target.utf8), headers: token.map { [("Authorization", "Bearer \($0)")] } ?? [])
    }

    /// A request with `Host` and `Connection: close`; `Content-Length` when there is a body.
    static func request(method: String = "GET", target: [UInt8], headers: [(String, String)], body: [UInt8]? = nil) -> [UInt8] {
        var bytes = Array("\(method) ".utf8) + target + Array(" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n".utf8)
        for (name, value) in headers { bytes += Array("\(name): \(value)\r\n".utf8) }
        if let body { bytes += Array("Content-Length: \(body.count)\r\n".utf8) }
        bytes += Array("\r\n".utf8)
        if let body { bytes += body }
        return bytes
    }

    struct SocketError: Error, CustomStringConvertible {
        var description: String
    }

    static func connect(port: Int, timeout: Duration = .seconds(5)) throws -> Int32 {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard socket >= 0 else { throw SocketError(description: "socket(): \(String(cString: strerror(errno)))") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        // Send and receive time-outs, so that nothing blocks forever.
        let seconds = timeout.components.seconds
        var limit = timeval(tv_sec: Int(seconds), tv_usec: 0)
        setsockopt(socket, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            let message = String(cString: strerror(errno))
            close(socket)
            throw SocketError(description: "connect(): \(message)")
        }
        return socket
    }

    /// Sends all of `bytes`; nil, or the error that stopped it (the server may close early).
    static func sendAll(_ socket: Int32, _ bytes: [UInt8]) -> String? {
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count < 0 {
                if errno == EINTR { continue }
                return "send(): \(String(cString: strerror(errno))) after \(sent) of \(bytes.count) bytes"
            }
            sent += count
        }
        return nil
    }

    /// Reads until the peer closes, `deadline` passes, or (with `headOnly`) a response head is
    /// complete. Returns the bytes and why it stopped, if not by a close.
    static func read(_ socket: Int32, until deadline: ContinuousClock.Instant, headOnly: Bool) -> ([UInt8], String?) {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            if headOnly, received.count >= 4, received.firstRange(of: [13, 10, 13, 10]) != nil { return (received, nil) }
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else { return (received, "timed out") }
            var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            let milliseconds = Int32(min(remaining.nanoseconds / 1_000_000 + 1, 60_000))
            let ready = poll(&descriptor, 1, milliseconds)
            if ready < 0 {
                if errno == EINTR { continue }
                return (received, "poll(): \(String(cString: strerror(errno)))")
            }
            if ready == 0 { continue }
            let count = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
            if count == 0 { return (received, nil) }
            if count < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                return (received, "recv(): \(String(cString: strerror(errno)))")
            }
            // Keep at most 1 MiB: a body beyond that only matters for its status line.
            if received.count < 1 << 20 { received += buffer[0..<count] }
        }
    }

    /// The statuses of the responses in `bytes` (a response may follow another on one connection).
    static func statuses(in bytes: [UInt8]) -> [Int] {
        let text = String(decoding: bytes, as: UTF8.self)
        return text.matches(of: #/HTTP/1\.[01] (\d{3})/#).compactMap { Int($0.output.1) }
    }

    /// One exchange on a new connection; errors become part of the answer, never a throw.
    static func exchange(port: Int, _ request: [UInt8], headOnly: Bool, timeout: Duration) async -> RawResponse {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(returning: exchangeBlocking(port: port, request, headOnly: headOnly, timeout: timeout))
            }
        }
    }

    static func exchangeBlocking(port: Int, _ request: [UInt8], headOnly: Bool, timeout: Duration) -> RawResponse {
        var answer = RawResponse()
        let deadline = ContinuousClock.now + timeout
        let socket: Int32
        do {
            socket = try connect(port: port, timeout: timeout)
        } catch {
            answer.error = "\(error)"
            return answer
        }
        defer { close(socket) }
        let sendError = sendAll(socket, request)
        let (bytes, readError) = read(socket, until: deadline, headOnly: headOnly)
        answer.statuses = statuses(in: bytes)
        answer.text = String(decoding: bytes.prefix(65_536), as: UTF8.self)
        answer.error = [sendError, readError].compactMap { $0 }.joined(separator: "; ").nilIfEmpty
        return answer
    }

    /// Sends `head`, then one space every `byteEvery` until an answer comes or `duration` passes.
    static func drip(port: Int, head: [UInt8], byteEvery interval: Duration, for duration: Duration) async -> RawResponse {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                var answer = RawResponse()
                guard let socket = try? connect(port: port) else {
                    answer.error = "connect() failed"
                    continuation.resume(returning: answer)
                    return
                }
                defer { close(socket) }
                _ = sendAll(socket, head)
                let deadline = ContinuousClock.now + duration
                var bytes: [UInt8] = []
                while ContinuousClock.now < deadline {
                    let (read, _) = RawHTTP.read(socket, until: ContinuousClock.now + interval, headOnly: true)
                    bytes += read
                    if !statuses(in: bytes).isEmpty { break }
                    if let error = sendAll(socket, [0x20]) {
                        answer.error = error
                        break
                    }
                }
                answer.statuses = statuses(in: bytes)
                answer.text = String(decoding: bytes, as: UTF8.self)
                continuation.resume(returning: answer)
            }
        }
    }

    /// Connections held open by the test; `close()` closes them all (once).
    final class HeldConnections: @unchecked Sendable {
        private let lock = NSLock()
        private var sockets: [Int32]
        /// The status each answered with (streams: their response head); unanswered ones are absent.
        let statuses: [Int]

        init(sockets: [Int32], statuses: [Int]) {
            self.sockets = sockets
            self.statuses = statuses
        }

        func close() {
            let all = lock.withLock {
                defer { sockets = [] }
                return sockets
            }
            for socket in all { Glibc.close(socket) }
        }

        /// Waits until the server has closed every connection (reading what it sent), or
        /// `timeout` passes: how many are still open, and the statuses the server sent.
        func waitUntilClosed(timeout: Duration) async -> (open: Int, statuses: [Int]) {
            let sockets = lock.withLock { self.sockets }
            return await withCheckedContinuation { continuation in
                DispatchQueue.global().async {
                    let deadline = ContinuousClock.now + timeout
                    var open = Set(sockets)
                    var received: [Int32: [UInt8]] = [:]
                    var buffer = [UInt8](repeating: 0, count: 4_096)
                    while !open.isEmpty, ContinuousClock.now < deadline {
                        var descriptors = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
                        let ready = poll(&descriptors, nfds_t(descriptors.count), 200)
                        guard ready > 0 else { continue }
                        for descriptor in descriptors where descriptor.revents != 0 {
                            let count = buffer.withUnsafeMutableBytes { recv(descriptor.fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                            if count > 0 {
                                received[descriptor.fd, default: []] += buffer[0..<count]
                            } else if count == 0 || (errno != EAGAIN && errno != EINTR) {
                                open.remove(descriptor.fd)
                            }
                        }
                    }
                    let statuses = received.values.flatMap { RawHTTP.statuses(in: $0) }
                    continuation.resume(returning: (open.count, statuses))
                }
            }
        }

        /// Reads what the server sends on every connection until each has sent `marker` or
        /// `timeout` passes; returns how many sent it.
        func countReceiving(_ marker: String, timeout: Duration) async -> Int {
            let sockets = lock.withLock { self.sockets }
            let needle = Array(marker.utf8)
            return await withCheckedContinuation { continuation in
                DispatchQueue.global().async {
                    let deadline = ContinuousClock.now + timeout
                    var waiting = Set(sockets)
                    var received: [Int32: [UInt8]] = [:]
                    var buffer = [UInt8](repeating: 0, count: 16_384)
                    while !waiting.isEmpty, ContinuousClock.now < deadline {
                        var descriptors = waiting.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
                        guard poll(&descriptors, nfds_t(descriptors.count), 200) > 0 else { continue }
                        for descriptor in descriptors where descriptor.revents != 0 {
                            let count = buffer.withUnsafeMutableBytes { recv(descriptor.fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                            guard count > 0 else {
                                if count == 0 || (errno != EAGAIN && errno != EINTR) { waiting.remove(descriptor.fd) }
                                continue
                            }
                            received[descriptor.fd, default: []] += buffer[0..<count]
                            if let bytes = received[descriptor.fd], Self.contains(bytes, needle) { waiting.remove(descriptor.fd) }
                        }
                    }
                    continuation.resume(returning: received.values.filter { Self.contains($0, needle) }.count)
                }
            }
        }

        private static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
            guard !needle.isEmpty, haystack.count >= needle.count else { return needle.isEmpty }
            return (0...(haystack.count - needle.count)).contains { start in haystack[start..<(start + needle.count)].elementsEqual(needle) }
        }

        deinit { close() }
    }

    /// Opens `count` connections that each send `request` and read its response head: streams
    /// held open. Fails if a connection cannot be made.
    static func openStreams(port: Int, request: [UInt8], count: Int) async throws -> HeldConnections {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                var sockets: [Int32] = []
                do {
                    for _ in 0..<count {
                        let socket = try connect(port: port, timeout: .seconds(10))
                        sockets.append(socket)
                        if let error = sendAll(socket, request) { throw SocketError(description: error) }
                    }
                } catch {
                    for socket in sockets { close(socket) }
                    continuation.resume(throwing: error)
                    return
                }
                // All requests are in flight; now collect each response head.
                let deadline = ContinuousClock.now + .seconds(30)
                let statuses = sockets.compactMap { socket in
                    RawHTTP.statuses(in: RawHTTP.read(socket, until: deadline, headOnly: true).0).first
                }
                continuation.resume(returning: HeldConnections(sockets: sockets, statuses: statuses))
            }
        }
    }

    /// Opens connections that each send their bytes (perhaps none) and then nothing more.
    static func openStalled(port: Int, sends: [([UInt8], Int)], connectTimeout: Duration = .seconds(5)) async throws -> HeldConnections {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                var sockets: [Int32] = []
                do {
                    for (bytes, count) in sends {
                        for _ in 0..<count {
                            let socket = try connect(port: port, timeout: connectTimeout)
                            sockets.append(socket)
                            if !bytes.isEmpty, let error = sendAll(socket, bytes) { throw SocketError(description: error) }
                        }
                    }
                } catch {
                    for socket in sockets { close(socket) }
                    continuation.resume(throwing: error)
                    return
                }
                continuation.resume(returning: HeldConnections(sockets: sockets, statuses: []))
            }
        }
    }
}

extension String {
    fileprivate var nilIfEmpty: String? { isEmpty ? nil : self }
}

extension Duration {
    fileprivate var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
