/// A cursor over JSON text in the plain form PostgreSQL prints the values RedDot stores (strings
/// without escapes, integers as digits), for the readers that take that form straight from its
/// bytes and leave any other text to a full JSON parser: the change log's nodes
/// (`OwnLayerChange.Node.decodeLog`), change notifications (`ChangeNotification`) and, in the
/// bench, the stream events it times (`StreamEventCounts`). Each step
/// skips the whitespace before its token and returns nil (or false) where the text is not in
/// that form, without telling why: the full parser reads that text, and says.
package struct PlainJSONCursor {
    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0

    /// A cursor at the start of `bytes`.
    package init(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    /// Whether only whitespace is left.
    package mutating func atEnd() -> Bool {
        skipWhitespace()
        return index == bytes.count
    }

    /// Takes `byte` (a structural character: `[`, `{`, `,`, `:`, …) when it is next.
    package mutating func take(_ byte: UInt8) -> Bool {
        skipWhitespace()
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    /// Takes `null` when it is next.
    package mutating func takeNull() -> Bool {
        skipWhitespace()
        guard bytes.count - index >= 4, bytes[index] == UInt8(ascii: "n"), bytes[index + 1] == UInt8(ascii: "u"),
            bytes[index + 2] == UInt8(ascii: "l"), bytes[index + 3] == UInt8(ascii: "l")
        else { return false }
        index += 4
        return true
    }

    /// Takes `true` or `false` when one is next.
    package mutating func boolean() -> Bool? {
        skipWhitespace()
        for (literal, value) in [("true", true), ("false", false)] where bytes.count - index >= literal.utf8.count {
            if zip(literal.utf8, bytes[index...]).allSatisfy({ $0 == $1 }) {
                index += literal.utf8.count
                return value
            }
        }
        return nil
    }

    /// A string without escapes or control characters.
    package mutating func string() -> String? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        let start = index
        index = endOfPlainRun(bytes, from: start)
        guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }
        index += 1
        return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index - 1]), as: UTF8.self)
    }

    /// An integer of 0 or more within `Int64`, as digits: no sign, no leading zero, no fraction
    /// or exponent.
    package mutating func integer() -> Int64? {
        skipWhitespace()
        let start = index
        var value: Int64 = 0
        while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) {
            let (times, overflowed) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflowedSum) = times.addingReportingOverflow(Int64(bytes[index] - UInt8(ascii: "0")))
            guard !overflowed, !overflowedSum else { return nil }
            value = sum
            index += 1
        }
        guard index > start, index - start == 1 || bytes[start] != UInt8(ascii: "0") else { return nil }
        if index < bytes.count, [UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E")].contains(bytes[index]) { return nil }
        return value
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t"): index += 1
            default: return
            }
        }
    }
}

/// Where the plain run of a JSON string's bytes that starts at `start` ends: at its closing
/// quote, a backslash (an escape) or a control character, whichever comes first (`bytes.count`:
/// none). The one loop over a string's bytes, for ``PlainJSONCursor`` and `JSONParser`.
func endOfPlainRun(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int {
    var index = start
    while index < bytes.count {
        let byte = bytes[index]
        if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 { return index }
        index += 1
    }
    return index
}
