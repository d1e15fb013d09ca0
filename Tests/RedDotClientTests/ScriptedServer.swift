import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// An HTTP server for the client's tests that answers each request from a script: what a real
/// server never sends (an empty 200, a proxy's HTML, silence), or a refusal on every request.
/// The client's transport is what is tested here, so the server is a few lines of sockets.
final class ScriptedServer: Sendable {
    /// A request as received.
    struct Request: Sendable {
        var method: String
        var target: String
        var headers: [String: String]
        var body: String
    }

    /// What to answer: raw bytes, then keep the connection open for `holdOpen` (a stream that
    /// goes silent) before closing it.
    struct Answer: Sendable {
        var bytes: String
        var holdOpen: Duration = .zero

        static func json(_ status: Int, _ body: String, headers: [String] = []) -> Answer {
            let head = (["HTTP/1.1 \(status) X", "Content-Type: application/json", "Content-Length: \(body.utf8.count)"] + headers)
                .joined(separator: "\r\n")
            return Answer(bytes: head + "\r\n\r\n" + body)
        }

        static let notModified = Answer(bytes: "HTTP/1.1 304 Not Modified\r\nETag: \"3\"\r\n\r\n")
    }

    let port: Int
    private let listener: Int32
    private let log = Mutex<[Request]>([])
    private let stopped = Atomic<Bool>(false)

    /// Starts listening on a free port of 127.0.0.1; `answer` is called for each request.
    init(_ answer: @escaping @Sendable (Request, Int) -> Answer) throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        self.listener = listener
        var one: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        listen(listener, 16)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        let listening = listener
        // The accept thread closes the listener itself, once it no longer accepts: a descriptor
        // closed by `stop()` could be reused at once by another test's socket while this thread
        // is about to call `accept` on the number, and it would then take that test's connections.
        Thread.detachNewThread { [self] in
            defer { close(listening) }
            while !stopped.load(ordering: .relaxed) {
                let connection = accept(listening, nil, nil)
                guard connection >= 0 else { continue }
                _ = fcntl(connection, F_SETFD, FD_CLOEXEC)
                guard !stopped.load(ordering: .relaxed) else {
                    close(connection)
                    break
                }
                Thread.detachNewThread { [self] in serve(connection, answer) }
            }
        }
    }

    var url: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// The requests received so far.
    var requests: [Request] { log.withLock { $0 } }

    /// Stops accepting: wakes the accept thread, which closes the listener.
    func stop() {
        stopped.store(true, ordering: .relaxed)
        shutdown(listener, Int32(SHUT_RDWR))
    }

    private func serve(_ connection: Int32, _ answer: @Sendable (Request, Int) -> Answer) {
        defer { close(connection) }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let text = String(decoding: received, as: UTF8.self)
            if let end = text.range(of: "\r\n\r\n") {
                let lines = text[..<end.lowerBound].components(separatedBy: "\r\n")
                var headers: [String: String] = [:]
                for line in lines.dropFirst() {
                    guard let colon = line.firstIndex(of: ":") else { continue }
                    headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                }
                let length = Int(headers["content-length"] ?? "0") ?? 0
                let body = String(text[end.upperBound...])
                if body.utf8.count >= length {
                    let parts = lines[0].split(separator: " ")
                    let request = Request(
                        method: parts.first.map(String.init) ?? "", target: parts.count > 1 ? String(parts[1]) : "", headers: headers,
                        body: body)
                    let index = log.withLock { log in
                        log.append(request)
                        return log.count - 1
                    }
                    let reply = answer(request, index)
                    let bytes = Array(reply.bytes.utf8)
                    _ = bytes.withUnsafeBytes { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    let (seconds, attoseconds) = reply.holdOpen.components
                    if reply.holdOpen > .zero { Thread.sleep(forTimeInterval: Double(seconds) + Double(attoseconds) / 1e18) }
                    return
                }
            }
            let count = recv(connection, &buffer, buffer.count, 0)
            guard count > 0 else { return }
            received += buffer[0..<count]
        }
    }
}
