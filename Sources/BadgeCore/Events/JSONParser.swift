import Foundation

/// Why a text is not JSON, and the byte offset where the parser gave up.
struct JSONParseError: Error, Equatable, CustomStringConvertible {
    /// The byte offset, from the start of the input, of the first byte that could not be read.
    let offset: Int
    /// What was wrong there.
    let problem: String
    /// The key, when an object repeats it (the parser refuses duplicate keys).
    var duplicateKey: String? = nil

    var description: String { "\(problem) at byte \(offset)" }
}

/// A strict RFC 8259 parser over UTF-8 bytes, producing ``JSONValue`` with the same values
/// Foundation's `JSONDecoder` gives for `JSONValue` (integers exact, `5.0` and `1e2` integers,
/// `1.5` and `1e30` numbers); the one JSON reader of events, and of the event id a dead letter
/// names (``leadingStringMember(_:in:)``).
///
/// Unlike Foundation it rejects trailing commas, does not guess UTF-16 or UTF-32 from zero
/// bytes, and refuses an object that repeats a key, at any depth (RFC 8259 leaves duplicate keys
/// open; Foundation keeps the first). Keys are compared after unescaping, as Swift strings, so
/// `"id"` and `"\u0069d"` are the same key. One leading UTF-8 byte order mark is skipped, as
/// Foundation does. The input must be valid UTF-8 (the caller checks); containers nest at most
/// ``maximumDepth`` deep.
struct JSONParser {
    /// The deepest nesting of arrays and objects accepted (Foundation's limit).
    static let maximumDepth = 512

    /// Parses one JSON text: a value with only white space around it.
    static func parse(_ bytes: some Collection<UInt8>) throws(JSONParseError) -> JSONValue {
        try withBuffer(bytes, parseResult).get()
    }

    /// The string value of the top-level member `name`, read from the start of `bytes` up to the
    /// first byte that is not JSON: the event id a dead letter names for a record that failed a
    /// check. Nil when that member is not read before the first error, is not a string, or is
    /// written with an escape (in its key or value), and nil when the text repeats an object key
    /// before its first error (a record refused for a duplicate key names no id). Safe on any bytes.
    static func leadingStringMember(_ name: String, in bytes: some Collection<UInt8>) -> String? {
        withBuffer(bytes) { buffer in
            var parser = JSONParser(buffer)
            parser.plainTopLevelMembers = [:]
            do throws(JSONParseError) {
                _ = try parser.document()
            } catch {
                if error.duplicateKey != nil { return nil }
            }
            guard case .string(let text)? = parser.plainTopLevelMembers?[name] else { return nil }
            return text
        }
    }

    /// Runs `body` on the bytes as one contiguous buffer (copying them only when they are not).
    private static func withBuffer<Result>(
        _ bytes: some Collection<UInt8>, _ body: (UnsafeBufferPointer<UInt8>) -> Result
    ) -> Result {
        bytes.withContiguousStorageIfAvailable(body) ?? Array(bytes).withUnsafeBufferPointer(body)
    }

    /// Parses one JSON text held in `buffer`.
    static func parse(_ buffer: UnsafeBufferPointer<UInt8>) throws(JSONParseError) -> JSONValue {
        var parser = JSONParser(buffer)
        return try parser.document()
    }

    private static func parseResult(_ buffer: UnsafeBufferPointer<UInt8>) -> Result<JSONValue, JSONParseError> {
        do throws(JSONParseError) {
            return .success(try parse(buffer))
        } catch {
            return .failure(error)
        }
    }

    private let bytes: UnsafeBufferPointer<UInt8>
    private var index: Int
    /// For ``leadingStringMember(_:in:)``: the members of the top-level object read so far whose
    /// key and value hold no escape; nil (not recorded) for ``parse(_:)``.
    private var plainTopLevelMembers: [String: JSONValue]?

    private init(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
        self.index = 0
    }

    private func fail(_ problem: String) -> JSONParseError {
        JSONParseError(offset: index, problem: problem)
    }

    /// The byte at the cursor, or nil at the end.
    private var current: UInt8? {
        index < bytes.count ? bytes[index] : nil
    }

    private mutating func document() throws(JSONParseError) -> JSONValue {
        if bytes.count >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF {
            index = 3
        }
        let value = try value(depth: 0)
        skipWhitespace()
        if index != bytes.count {
            throw fail("unexpected text after the value")
        }
        return value
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t"):
                index += 1
            default:
                return
            }
        }
    }

    /// A value after optional white space; `depth` counts the containers around it.
    private mutating func value(depth: Int) throws(JSONParseError) -> JSONValue {
        skipWhitespace()
        guard let byte = current else { throw fail("a value is missing") }
        switch byte {
        case UInt8(ascii: "{"):
            return try object(depth: depth + 1)
        case UInt8(ascii: "["):
            return try array(depth: depth + 1)
        case UInt8(ascii: "\""):
            return .string(try string())
        case UInt8(ascii: "t"):
            try literal("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try literal("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try literal("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return try number()
        default:
            throw fail("unexpected character")
        }
    }

    private mutating func literal(_ word: StaticString) throws(JSONParseError) {
        let length = word.utf8CodeUnitCount
        guard bytes.count - index >= length else { throw fail("unknown literal") }
        let text = word.utf8Start
        for offset in 0..<length where bytes[index + offset] != text[offset] {
            throw fail("unknown literal")
        }
        index += length
    }

    private mutating func object(depth: Int) throws(JSONParseError) -> JSONValue {
        if depth > Self.maximumDepth { throw fail("nested too deeply") }
        index += 1
        var members: [String: JSONValue] = [:]
        skipWhitespace()
        if current == UInt8(ascii: "}") {
            index += 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard current == UInt8(ascii: "\"") else { throw fail("an object key must be a string") }
            let start = index
            let (key, member) = try member(depth: depth)
            guard members.updateValue(member, forKey: key) == nil else {
                throw JSONParseError(offset: start, problem: "a repeated object key", duplicateKey: key)
            }
            if depth == 1, plainTopLevelMembers != nil,
                !UnsafeBufferPointer(rebasing: bytes[start..<index]).contains(UInt8(ascii: "\\"))
            {
                plainTopLevelMembers?[key] = member
            }
            skipWhitespace()
            switch current {
            case UInt8(ascii: ","):
                index += 1
            case UInt8(ascii: "}"):
                index += 1
                return .object(members)
            default:
                throw fail("a ',' or '}' is missing in an object")
            }
        }
    }

    /// One `"key": value` member; the cursor is on the key's opening quote.
    private mutating func member(depth: Int) throws(JSONParseError) -> (key: String, value: JSONValue) {
        let key = try string()
        skipWhitespace()
        guard current == UInt8(ascii: ":") else { throw fail("a ':' is missing after an object key") }
        index += 1
        return (key, try value(depth: depth))
    }

    private mutating func array(depth: Int) throws(JSONParseError) -> JSONValue {
        if depth > Self.maximumDepth { throw fail("nested too deeply") }
        index += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if current == UInt8(ascii: "]") {
            index += 1
            return .array(elements)
        }
        while true {
            elements.append(try value(depth: depth))
            skipWhitespace()
            switch current {
            case UInt8(ascii: ","):
                index += 1
            case UInt8(ascii: "]"):
                index += 1
                return .array(elements)
            default:
                throw fail("a ',' or ']' is missing in an array")
            }
        }
    }

    /// A string; the cursor is on its opening quote.
    private mutating func string() throws(JSONParseError) -> String {
        index += 1
        let start = index
        index = endOfPlainRun(bytes, from: start)
        guard index < bytes.count else { throw fail("a string is not closed") }
        switch bytes[index] {
        case UInt8(ascii: "\""):
            index += 1
            return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index - 1]), as: UTF8.self)
        case UInt8(ascii: "\\"):
            return try escapedString(from: start)
        default:
            throw fail("a control character in a string")
        }
    }

    /// The rest of a string that holds an escape; the cursor is on the first backslash.
    private mutating func escapedString(from start: Int) throws(JSONParseError) -> String {
        var utf8: [UInt8] = []
        utf8.reserveCapacity(index - start + 16)
        utf8.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<index]))
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return String(decoding: utf8, as: UTF8.self)
            case UInt8(ascii: "\\"):
                index += 1
                try escape(into: &utf8)
            case 0..<0x20:
                throw fail("a control character in a string")
            default:
                utf8.append(byte)
                index += 1
            }
        }
        throw fail("a string is not closed")
    }

    /// One escape after its backslash, appended as UTF-8.
    private mutating func escape(into utf8: inout [UInt8]) throws(JSONParseError) {
        guard let byte = current else { throw fail("a string is not closed") }
        index += 1
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"):
            utf8.append(byte)
        case UInt8(ascii: "b"): utf8.append(0x08)
        case UInt8(ascii: "f"): utf8.append(0x0C)
        case UInt8(ascii: "n"): utf8.append(0x0A)
        case UInt8(ascii: "r"): utf8.append(0x0D)
        case UInt8(ascii: "t"): utf8.append(0x09)
        case UInt8(ascii: "u"):
            let unit = try hexUnit()
            var scalarValue = UInt32(unit)
            if (0xD800..<0xDC00).contains(unit) {
                guard bytes.count - index >= 2, bytes[index] == UInt8(ascii: "\\"),
                    bytes[index + 1] == UInt8(ascii: "u")
                else { throw fail("a lone high surrogate") }
                index += 2
                let low = try hexUnit()
                guard (0xDC00..<0xE000).contains(low) else { throw fail("a high surrogate without a low one") }
                let high = UInt32(unit - 0xD800) << 10
                scalarValue = 0x10000 + (high | UInt32(low - 0xDC00))
            } else if (0xDC00..<0xE000).contains(unit) {
                throw fail("a lone low surrogate")
            }
            Self.appendUTF8(scalarValue, to: &utf8)
        default:
            index -= 1
            throw fail("an unknown escape")
        }
    }

    /// Appends the UTF-8 encoding of a scalar value (never a surrogate).
    private static func appendUTF8(_ scalar: UInt32, to utf8: inout [UInt8]) {
        switch scalar {
        case 0..<0x80:
            utf8.append(UInt8(scalar))
        case 0x80..<0x800:
            utf8.append(0xC0 | UInt8(scalar >> 6))
            utf8.append(0x80 | UInt8(scalar & 0x3F))
        case 0x800..<0x10000:
            utf8.append(0xE0 | UInt8(scalar >> 12))
            utf8.append(0x80 | UInt8((scalar >> 6) & 0x3F))
            utf8.append(0x80 | UInt8(scalar & 0x3F))
        default:
            utf8.append(0xF0 | UInt8(scalar >> 18))
            utf8.append(0x80 | UInt8((scalar >> 12) & 0x3F))
            utf8.append(0x80 | UInt8((scalar >> 6) & 0x3F))
            utf8.append(0x80 | UInt8(scalar & 0x3F))
        }
    }

    /// Four hex digits of a `\u` escape.
    private mutating func hexUnit() throws(JSONParseError) -> UInt16 {
        guard bytes.count - index >= 4 else { throw fail("a \\u escape needs four hex digits") }
        var unit: UInt16 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw fail("a \\u escape needs four hex digits")
            }
            unit = unit << 4 | UInt16(digit)
            index += 1
        }
        return unit
    }

    private func isDigit(_ position: Int) -> Bool {
        position < bytes.count && (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position])
    }

    private mutating func skipDigits() {
        while isDigit(index) { index += 1 }
    }

    /// A number. Integer text that fits `Int64` is exact; other numbers are read as `Double` and
    /// become integers when that is whole and fits `Int64` (`5.0`, `1e2`, `1e-400`) — Foundation's
    /// rule. Infinities are
    /// rejected; integer text beyond `Int64` stays a `Double`.
    private mutating func number() throws(JSONParseError) -> JSONValue {
        let start = index
        let negative = bytes[index] == UInt8(ascii: "-")
        if negative { index += 1 }
        guard isDigit(index) else { throw fail("a number needs a digit") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            skipDigits()
        }
        var isInteger = true
        if current == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            guard isDigit(index) else { throw fail("a fraction needs a digit") }
            skipDigits()
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
            guard isDigit(index) else { throw fail("an exponent needs a digit") }
            skipDigits()
        }
        if isInteger, let integer = exactInteger(from: negative ? start + 1 : start, negative: negative) {
            return .integer(integer)
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        guard let double = Double(text), double.isFinite else { throw fail("a number too large") }
        if !isInteger, let integer = Int64(exactly: double) {
            if double.magnitude < Self.exactDoubleLimit {
                return .integer(integer)
            }
            // Rare: a whole number of 2^53 or more written with a fraction or an exponent.
            // Foundation then rereads the text as a Decimal; ask it, so that the value agrees.
            if let foundationInteger = try? JSONDecoder().decode(Int64.self, from: Data(text.utf8)) {
                return .integer(foundationInteger)
            }
        }
        return .number(double)
    }

    /// 2^53: below it every whole `Double` is exactly the integer the text meant.
    private static let exactDoubleLimit: Double = 9_007_199_254_740_992

    /// The digits from `start` to the cursor as an `Int64`, or nil if they overflow.
    private func exactInteger(from start: Int, negative: Bool) -> Int64? {
        // Accumulate downwards so that Int64.min fits.
        var value: Int64 = 0
        for position in start..<index {
            let digit = Int64(bytes[position] - UInt8(ascii: "0"))
            let (shifted, overflowShift) = value.multipliedReportingOverflow(by: 10)
            if overflowShift { return nil }
            let (next, overflowAdd) = shifted.subtractingReportingOverflow(digit)
            if overflowAdd { return nil }
            value = next
        }
        if negative { return value }
        return value == Int64.min ? nil : -value
    }
}
