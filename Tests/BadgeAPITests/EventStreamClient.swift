import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A minimal Server-Sent Events client over a plain socket, for reading a stream as it arrives
/// (the test client collects whole bodies, which a stream never ends).
final class EventStreamClient: @unchecked Sendable {
    struct Event: Sendable, Equatable {
        var id: String?
        var name: String
        var data: String
    }

    private let socket: Int32
    private var raw: [UInt8] = []
    private var body: [UInt8] = []
    private var headersDone = false
    private(set) var status = 0
    private(set) var headerText = ""
    private var closed = false
    private let queue = DispatchQueue(label: "reddot.test.sse")

    /// Connects to 127.0.0.1:`port` and sends `GET uri` with the headers.
    init(port: Int, uri: String, headers: [String: String]) throws {
        socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard socket >= 0 else { throw APITestError("socket() failed") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(socket)
            throw APITestError("connect() failed")
        }
        var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var request = "GET \(uri) HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
        for (name, value) in headers { request += "\(name): \(value)\r\n" }
        request += "\r\n"
        let bytes = Array(request.utf8)
        guard send(socket, bytes, bytes.count, 0) == bytes.count else {
            close(socket)
            throw APITestError("send() failed")
        }
    }

    deinit { close(socket) }

    /// The next complete event (comments skipped), or nil when `timeout` passes first or the
    /// stream ends.
    func next(timeout: Duration = .seconds(5)) async -> Event? {
        await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: self.blockingNext(timeout: timeout)) }
        }
    }

    /// Reads until the status line and headers are in (or the timeout).
    func waitForHeaders(timeout: Duration = .seconds(5)) async -> Bool {
        await withCheckedContinuation { continuation in
            queue.async {
                let deadline = ContinuousClock.now + timeout
                while !self.headersDone, !self.closed, ContinuousClock.now < deadline { self.readSome() }
                continuation.resume(returning: self.headersDone)
            }
        }
    }

    private func blockingNext(timeout: Duration) -> Event? {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let event = takeEvent() { return event }
            if closed || ContinuousClock.now >= deadline { return nil }
            readSome()
        }
    }

    private func readSome() {
        var buffer = [UInt8](repeating: 0, count: 16_384)
        let count = recv(socket, &buffer, buffer.count, 0)
        if count == 0 { closed = true }
        if count > 0 {
            raw += buffer[0..<count]
            decode()
        }
    }

    /// Splits the head off, then undoes chunked transfer encoding into `body`.
    private func decode() {
        if !headersDone {
            guard let end = find([13, 10, 13, 10], in: raw) else { return }
            headerText = String(decoding: raw[0..<end], as: UTF8.self)
            status = Int(headerText.split(separator: " ").dropFirst().first ?? "") ?? 0
            raw.removeFirst(end + 4)
            headersDone = true
        }
        guard headerText.lowercased().contains("transfer-encoding: chunked") else {
            body += raw
            raw.removeAll()
            return
        }
        while let lineEnd = find([13, 10], in: raw) {
            let sizeText = String(decoding: raw[0..<lineEnd], as: UTF8.self).split(separator: ";").first ?? ""
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) else { return }
            guard raw.count >= lineEnd + 2 + size + 2 else { return }
            body += raw[(lineEnd + 2)..<(lineEnd + 2 + size)]
            raw.removeFirst(lineEnd + 2 + size + 2)
            if size == 0 { closed = true }
        }
    }

    private func takeEvent() -> Event? {
        while let end = find([10, 10], in: body) {
            let block = String(decoding: body[0..<end], as: UTF8.self)
            body.removeFirst(end + 2)
            var event = Event(id: nil, name: "message", data: "")
            var hasField = false
            for line in block.split(separator: "\n") where !line.hasPrefix(":") {
                let parts = line.split(separator: ":", maxSplits: 1)
                let field = String(parts[0])
                let value = parts.count > 1 ? String(parts[1].drop { $0 == " " }) : ""
                switch field {
                case "id": event.id = value; hasField = true
                case "event": event.name = value; hasField = true
                case "data": event.data += value; hasField = true
                default: continue
                }
            }
            if hasField { return event }
        }
        return nil
    }

    private func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            if Array(haystack[start..<(start + needle.count)]) == needle { return start }
        }
        return nil
    }
}
