/// JSON written by hand into bytes, for the few hot outputs where Foundation's encoder costs
/// more than the work around it (the change feed's records, one per version of every user).
public enum JSONText {
    /// Appends `text` as a JSON string: `"` and `\` escaped, control characters as `\n`, `\r`,
    /// `\t` or `\u00XX`, everything else as is (valid UTF-8 already).
    public static func appendString(_ text: String, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        let special: (UInt8) -> Bool = { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }
        guard text.utf8.contains(where: special) else {
            output.append(contentsOf: text.utf8)
            output.append(UInt8(ascii: "\""))
            return
        }
        let hex = Array("0123456789abcdef".utf8)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): output.append(contentsOf: #"\""#.utf8)
            case UInt8(ascii: "\\"): output.append(contentsOf: #"\\"#.utf8)
            case UInt8(ascii: "\n"): output.append(contentsOf: #"\n"#.utf8)
            case UInt8(ascii: "\r"): output.append(contentsOf: #"\r"#.utf8)
            case UInt8(ascii: "\t"): output.append(contentsOf: #"\t"#.utf8)
            case 0..<0x20:
                output.append(contentsOf: #"\u00"#.utf8)
                output.append(hex[Int(byte >> 4)])
                output.append(hex[Int(byte & 0x0F)])
            default:
                // Bytes of a multi-byte character are never below 0x80: copied as they are.
                output.append(byte)
            }
        }
        output.append(UInt8(ascii: "\""))
    }

    /// Appends `text` as a JSON string, or `null`.
    public static func appendString(_ text: String?, orNullTo output: inout [UInt8]) {
        if let text { appendString(text, to: &output) } else { output.append(contentsOf: "null".utf8) }
    }

    /// Appends `value` in decimal (every `Int64`, `Int64.min` included).
    public static func appendInteger(_ value: Int64, to output: inout [UInt8]) {
        if value < 0 { output.append(UInt8(ascii: "-")) }
        // The magnitude as unsigned: `-Int64.min` does not fit an `Int64`.
        var magnitude = value.magnitude
        var digits: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            repeat {
                buffer[count] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
                count += 1
            } while magnitude > 0
            for index in stride(from: count - 1, through: 0, by: -1) { output.append(buffer[index]) }
        }
    }

    /// Appends `text` as a JSON string to a `String`.
    public static func appendString(_ text: String, to output: inout String) {
        var bytes: [UInt8] = []
        appendString(text, to: &bytes)
        output += String(decoding: bytes, as: UTF8.self)
    }
}
