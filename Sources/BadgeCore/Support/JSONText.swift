/// JSON written by hand into a `String`, for the few hot outputs where Foundation's encoder costs
/// more than the work around it (the change feed's records).
public enum JSONText {
    /// Appends `text` as a JSON string: `"` and `\` escaped, control characters as `\n`, `\r`,
    /// `\t` or `\u00XX`, everything else as is (valid UTF-8 already).
    public static func appendString(_ text: String, to output: inout String) {
        output.append("\"")
        let special: (UInt8) -> Bool = { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }
        guard text.utf8.contains(where: special) else {
            output.append(text)
            output.append("\"")
            return
        }
        let hex = Array("0123456789abcdef".unicodeScalars)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": output.append("\\\"")
            case "\\": output.append("\\\\")
            case "\n": output.append("\\n")
            case "\r": output.append("\\r")
            case "\t": output.append("\\t")
            default:
                if scalar.value < 0x20 {
                    output.append("\\u00")
                    output.unicodeScalars.append(hex[Int(scalar.value >> 4)])
                    output.unicodeScalars.append(hex[Int(scalar.value & 0x0F)])
                } else {
                    output.unicodeScalars.append(scalar)
                }
            }
        }
        output.append("\"")
    }

    /// Appends `text` as a JSON string, or `null`.
    public static func appendString(_ text: String?, orNullTo output: inout String) {
        if let text { appendString(text, to: &output) } else { output.append("null") }
    }
}
