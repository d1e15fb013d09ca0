/// PostgreSQL's hex form of `bytea` (`\x0aff`), for binding in text format and reading results.
enum ByteaHex {
    private static let digits = Array("0123456789abcdef".utf8)

    /// `\x` and two lower-case hex digits per byte.
    static func encode(_ bytes: [UInt8]) -> String {
        var text = [UInt8]()
        text.reserveCapacity(2 + 2 * bytes.count)
        text.append(UInt8(ascii: "\\"))
        text.append(UInt8(ascii: "x"))
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// The bytes of a `\x…` text; nil if it is not one.
    static func decode(_ text: String) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count >= 2, utf8.count % 2 == 0, utf8[0] == UInt8(ascii: "\\"), utf8[1] == UInt8(ascii: "x") else {
            return nil
        }
        var bytes = [UInt8]()
        bytes.reserveCapacity(utf8.count / 2 - 1)
        var index = 2
        while index < utf8.count {
            guard let high = value(utf8[index]), let low = value(utf8[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    private static func value(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return digit - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
