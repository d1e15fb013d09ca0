/// The head of an HTTP/1.1 answer: its status and where the answer ends.
public struct HTTPAnswerHead: Sendable, Equatable {
    /// The status code.
    public var status: Int
    /// Bytes up to and including the blank line.
    public var headLength: Int
    /// The whole answer's length: the head and `Content-Length` bytes of body.
    public var total: Int

    /// A head with these values.
    public init(status: Int, headLength: Int, total: Int) {
        self.status = status
        self.headLength = headLength
        self.total = total
    }

    /// What ``parse(_:)`` found.
    public enum Parse: Equatable, Sendable {
        /// The head has not ended yet.
        case incomplete
        /// The head, complete.
        case complete(HTTPAnswerHead)
        /// Not an answer the bench reads; the sentence says why.
        case malformed(String)
    }

    /// Parses the head at the start of `bytes`. Answers need a `Content-Length` (chunked bodies
    /// are not supported), except 204, 304 and 1xx. Bytes only: it runs once per answer in the
    /// client's hot loop.
    public static func parse(_ bytes: [UInt8]) -> Parse {
        guard let blank = headEnd(bytes) else {
            return bytes.count > 65_536 ? .malformed("an answer's head is longer than 64 KiB") : .incomplete
        }
        let prefix = Array("HTTP/1.1 ".utf8)
        guard blank >= 12, bytes.starts(with: prefix), let status = number(bytes[9..<12]) else {
            return .malformed("not an HTTP/1.1 answer: \(String(decoding: bytes.prefix(min(blank, 80)), as: UTF8.self))")
        }
        var length: Int?
        var lineStart = 0
        while let lineEnd = lineEnd(bytes, from: lineStart, before: blank + 2) {
            let line = bytes[lineStart..<lineEnd]
            lineStart = lineEnd + 2
            if hasName(line, "content-length:") {
                guard let value = number(trimmed(line.dropFirst(15))) else {
                    return .malformed("Content-Length '\(String(decoding: line.prefix(40), as: UTF8.self))' is not a length")
                }
                length = value
            } else if hasName(line, "transfer-encoding:") {
                return .malformed("the answer has \(String(decoding: line.prefix(60), as: UTF8.self)); the bench reads only Content-Length bodies")
            }
        }
        if length == nil, status == 204 || status == 304 || (100..<200).contains(status) { length = 0 }
        guard let length else { return .malformed("an answer without Content-Length (status \(status))") }
        let headLength = blank + 4
        return .complete(HTTPAnswerHead(status: status, headLength: headLength, total: headLength + length))
    }

    /// Where `\r\n\r\n` starts, if it is there.
    private static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4)
        where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
            return index
        }
        return nil
    }

    /// Where the `\r\n` that ends the line starting at `start` is, if before `limit`.
    private static func lineEnd(_ bytes: [UInt8], from start: Int, before limit: Int) -> Int? {
        var index = start
        while index + 1 < limit {
            if bytes[index] == 13, bytes[index + 1] == 10 { return index }
            index += 1
        }
        return nil
    }

    /// Whether `line` starts with `name` (lowercase), ignoring ASCII case.
    private static func hasName(_ line: ArraySlice<UInt8>, _ name: StaticString) -> Bool {
        guard line.count >= name.utf8CodeUnitCount else { return false }
        return name.withUTF8Buffer { expected in
            zip(line, expected).allSatisfy { ($0 >= 65 && $0 <= 90 ? $0 | 0x20 : $0) == $1 }
        }
    }

    private static func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var slice = bytes
        while let first = slice.first, first == 32 || first == 9 { slice = slice.dropFirst() }
        while let last = slice.last, last == 32 || last == 9 { slice = slice.dropLast() }
        return slice
    }

    /// A decimal number of 1–18 digits.
    private static func number(_ digits: ArraySlice<UInt8>) -> Int? {
        guard !digits.isEmpty, digits.count <= 18 else { return nil }
        var value = 0
        for digit in digits {
            guard digit >= 48, digit <= 57 else { return nil }
            value = value * 10 + Int(digit - 48)
        }
        return value
    }
}
