/// Turns the bytes of an HTTP/1.1 response, in chunks of any size, into its head and its body
/// (`Content-Length`, chunked, or read to the connection's end), with limits: what a
/// hostile or broken server sends is an error, never a trap or an unbounded buffer.
///
/// The client's own transport for plain `http://` on Linux uses it (see `SocketTransport`).
public struct HTTPResponseParser: Sendable {
    /// What the parser found.
    public enum Output: Sendable, Hashable {
        /// The status and the header fields (names as sent).
        case head(status: Int, headers: [HeaderField])
        /// Bytes of the body (chunked framing removed).
        case body([UInt8])
        /// The body is complete.
        case end
    }

    /// One header field.
    public struct HeaderField: Sendable, Hashable {
        /// The field's name as sent.
        public var name: String
        /// The value, without the blanks around it.
        public var value: String
    }

    /// Why a response cannot be read.
    public struct Failure: Error, Sendable, Hashable, CustomStringConvertible {
        /// What is wrong, as a sentence.
        public var description: String
    }

    private enum Body: Sendable {
        case length(Int)
        case chunkSize
        case chunkData(Int)
        case chunkDataEnd
        case trailers
        case untilClose
        case done
    }

    /// The most bytes the status line and the header fields may take.
    public let maximumHeadBytes: Int
    private var buffer: [UInt8] = []
    private var body: Body?
    private var headBytes = 0

    /// A parser for one response (not the answer to a `HEAD` request, which has no body).
    public init(maximumHeadBytes: Int = 64 * 1024) {
        self.maximumHeadBytes = max(256, maximumHeadBytes)
    }

    /// Whether the body is complete.
    public var isComplete: Bool {
        if case .done = body { return true }
        return false
    }

    /// Parses the next bytes; returns what they completed, in order. What came before a fault
    /// is returned; the fault is thrown by the next call (of this or ``finish()``), so the
    /// outputs do not depend on how the bytes were cut into chunks.
    ///
    /// - Throws: ``Failure`` for a response that is not HTTP/1.x, a header section over
    ///   ``maximumHeadBytes``, a malformed or overflowing length, or bytes after the end.
    public mutating func feed(_ bytes: some Sequence<UInt8>) throws(Failure) -> [Output] {
        if let failure { throw failure }
        buffer.append(contentsOf: bytes)
        var outputs: [Output] = []
        do {
            try parse(into: &outputs)
        } catch {
            failure = error
        }
        return outputs
    }

    private var failure: Failure?

    /// The fault found by the last ``feed(_:)``, which the next call throws.
    public var fault: Failure? { failure }

    private mutating func parse(into outputs: inout [Output]) throws(Failure) {
        while true {
            guard let body else {
                switch try parseHead() {
                case .needMore:
                    return
                case .interim:
                    continue
                case .head(let head):
                    outputs.append(head)
                    if isComplete { outputs.append(.end) }
                    continue
                }
            }
            switch body {
            case .done:
                guard buffer.isEmpty else { throw Failure(description: "the server sent bytes after the end of the response") }
                return
            case .untilClose:
                if !buffer.isEmpty { outputs.append(.body(buffer)) }
                buffer.removeAll()
                return
            case .length(let left):
                guard !buffer.isEmpty else { return }
                let taken = min(left, buffer.count)
                outputs.append(.body(Array(buffer.prefix(taken))))
                buffer.removeFirst(taken)
                if taken == left {
                    self.body = .done
                    outputs.append(.end)
                } else {
                    self.body = .length(left - taken)
                }
            case .chunkSize:
                guard let line = try takeLine(limit: 1024, what: "a chunk size line") else { return }
                let digits = line.prefix { $0 != UInt8(ascii: ";") }.filter { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\t") }
                guard let size = Self.hexadecimal(digits) else {
                    throw Failure(description: "the server sent a chunk size that is not a hexadecimal number below 2^62")
                }
                self.body = size == 0 ? .trailers : .chunkData(size)
            case .chunkData(let left):
                guard !buffer.isEmpty else { return }
                let taken = min(left, buffer.count)
                outputs.append(.body(Array(buffer.prefix(taken))))
                buffer.removeFirst(taken)
                self.body = taken == left ? .chunkDataEnd : .chunkData(left - taken)
            case .chunkDataEnd:
                // CR LF (or a bare LF); anything else means the chunk was longer than its size.
                guard let first = buffer.first else { return }
                if first == UInt8(ascii: "\n") {
                    buffer.removeFirst()
                } else if first == UInt8(ascii: "\r") {
                    guard buffer.count >= 2 else { return }
                    guard buffer[1] == UInt8(ascii: "\n") else { throw Failure(description: "the server sent a chunk longer than its size") }
                    buffer.removeFirst(2)
                } else {
                    throw Failure(description: "the server sent a chunk longer than its size")
                }
                self.body = .chunkSize
            case .trailers:
                guard let line = try takeLine(limit: maximumHeadBytes, what: "a trailer field") else { return }
                if line.isEmpty {
                    self.body = .done
                    outputs.append(.end)
                }
            }
        }
    }

    /// The connection ended: completes a body read to the connection's end.
    ///
    /// - Throws: ``Failure`` when the response was cut short.
    public mutating func finish() throws(Failure) -> [Output] {
        if let failure { throw failure }
        switch body {
        case .done: return []
        case .untilClose:
            body = .done
            return [.end]
        default:
            throw Failure(description: "the connection closed before the end of the response")
        }
    }

    private enum Head {
        case needMore
        case interim
        case head(Output)
    }

    private mutating func parseHead() throws(Failure) -> Head {
        guard let end = Self.endOfHead(buffer) else {
            // (+ 3: the blank line of a head of the most bytes may still be on its way.)
            guard buffer.count <= maximumHeadBytes + 3 else {
                throw Failure(description: "the server's response head is longer than \(maximumHeadBytes) bytes")
            }
            return .needMore
        }
        guard end <= maximumHeadBytes else { throw Failure(description: "the server's response head is longer than \(maximumHeadBytes) bytes") }
        let lines = Self.split(buffer[..<end])
        buffer.removeFirst(min(buffer.count, end + 4))
        guard let statusLine = lines.first else { throw Failure(description: "the server sent an empty response head") }
        let parts = statusLine.split(separator: UInt8(ascii: " "), maxSplits: 2, omittingEmptySubsequences: true)
        guard parts.count >= 2, parts[0].starts(with: Array("HTTP/1.".utf8)), parts[1].count == 3,
            parts[1].allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) })
        else {
            throw Failure(description: "the server's answer is not HTTP/1.x: \(Self.printable(statusLine.prefix(60)))")
        }
        let status = parts[1].reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
        var headers: [HeaderField] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex else {
                throw Failure(description: "the server sent a header line without a name and a colon")
            }
            let name = String(decoding: line[..<colon], as: UTF8.self)
            let value = String(decoding: Self.trimmingBlanks(line[line.index(after: colon)...]), as: UTF8.self)
            headers.append(HeaderField(name: name, value: value))
        }
        if (100...199).contains(status) { return .interim }  // the real answer follows
        func field(_ name: String) -> [String] { headers.filter { $0.name.lowercased() == name }.map(\.value) }
        if status == 204 || status == 304 {
            body = .done
        } else if field("transfer-encoding").joined(separator: ",").lowercased().contains("chunked") {
            body = .chunkSize
        } else if let length = field("content-length").first {
            guard let count = Int(length), count >= 0, field("content-length").allSatisfy({ $0 == length }) else {
                throw Failure(description: "the server sent a Content-Length that is not one number: \(Self.printable(Array(length.utf8).prefix(40)))")
            }
            body = count == 0 ? .done : .length(count)
        } else {
            body = .untilClose
        }
        return .head(.head(status: status, headers: headers))
    }

    private mutating func takeLine(limit: Int, what: String) throws(Failure) -> [UInt8]? {
        guard let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) else {
            guard buffer.count <= limit + 1 else { throw Failure(description: "the server sent \(what) longer than \(limit) bytes") }
            return nil
        }
        var line = Array(buffer[..<newline])
        buffer.removeFirst(newline + 1)
        if line.last == UInt8(ascii: "\r") { line.removeLast() }
        guard line.count <= limit else { throw Failure(description: "the server sent \(what) longer than \(limit) bytes") }
        return line
    }

    private static func endOfHead(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4)
        where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
            return index
        }
        return nil
    }

    /// A field value without the spaces and tabs around it, trimmed as bytes (a blank followed
    /// by a combining mark would be one `Character` that is not a blank).
    private static func trimmingBlanks(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        let blank: (UInt8) -> Bool = { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
        guard let first = bytes.firstIndex(where: { !blank($0) }), let last = bytes.lastIndex(where: { !blank($0) }) else {
            return bytes[bytes.endIndex...]
        }
        return bytes[first...last]
    }

    private static func split(_ bytes: ArraySlice<UInt8>) -> [ArraySlice<UInt8>] {
        var lines: [ArraySlice<UInt8>] = []
        var start = bytes.startIndex
        var index = bytes.startIndex
        while index < bytes.endIndex {
            if bytes[index] == 13, bytes.index(after: index) < bytes.endIndex, bytes[bytes.index(after: index)] == 10 {
                lines.append(bytes[start..<index])
                index += 2
                start = index
            } else {
                index += 1
            }
        }
        lines.append(bytes[start..<bytes.endIndex])
        return lines
    }

    /// `bytes` for a message: printable ASCII as it is, anything else as `?`.
    static func printable(_ bytes: ArraySlice<UInt8>) -> String {
        String(decoding: bytes.map { (0x20...0x7E).contains($0) ? $0 : UInt8(ascii: "?") }, as: UTF8.self)
    }

    /// A hexadecimal number of 1 to 15 digits (below 2^60), or nil.
    static func hexadecimal(_ digits: [UInt8]) -> Int? {
        guard !digits.isEmpty, digits.count <= 15 else { return nil }
        var value = 0
        for digit in digits {
            let nibble: Int
            switch digit {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = Int(digit - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = Int(digit - UInt8(ascii: "a")) + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): nibble = Int(digit - UInt8(ascii: "A")) + 10
            default: return nil
            }
            value = value << 4 | nibble
        }
        return value
    }
}
