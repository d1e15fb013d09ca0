/// Helpers that put untrusted text into error messages safely.
package enum Quoting {
    /// The most Unicode scalars of untrusted text quoted in a message; longer text is cut with `…`.
    package static let maximumQuotedScalars = 80

    /// `text` in single quotes, cut to ``maximumQuotedScalars`` scalars, with quotes, backslashes,
    /// control characters and bidirectional overrides escaped so that a message stays on one line
    /// and reads as it looks.
    package static func quoted(_ text: some StringProtocol) -> String {
        var result = "'"
        var count = 0
        for scalar in text.unicodeScalars {
            if count == maximumQuotedScalars {
                result += "…"
                break
            }
            result += escaped(scalar)
            count += 1
        }
        result += "'"
        return result
    }

    /// One scalar as it appears inside a quoted message.
    package static func escaped(_ scalar: Unicode.Scalar) -> String {
        switch scalar {
        case "'": return "\\'"
        case "\\": return "\\\\"
        case "\n": return "\\n"
        case "\r": return "\\r"
        case "\t": return "\\t"
        default:
            if isUnsafe(scalar) {
                return "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            }
            return String(scalar)
        }
    }

    /// Control characters, bidirectional controls, zero-width and other invisible format characters.
    package static func isUnsafe(_ scalar: Unicode.Scalar) -> Bool {
        let value = scalar.value
        if value < 0x20 || (0x7F...0x9F).contains(value) { return true }
        switch scalar.properties.generalCategory {
        case .format, .lineSeparator, .paragraphSeparator, .privateUse, .surrogate, .unassigned:
            return true
        default:
            return false
        }
    }
}
