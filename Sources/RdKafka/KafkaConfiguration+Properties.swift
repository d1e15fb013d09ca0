import Foundation

extension KafkaConfiguration {
    /// Reads a kcat-style properties file (`-F`): `key=value` lines, any line ending; blank lines
    /// and `#` comments skipped; spaces around key and value trimmed.
    ///
    /// - Throws: `KafkaError` `.configuration` when the file cannot be read or a line is not
    ///   `key=value`; the message names the file and line, never a value (values may be secrets).
    public static func readProperties(path: String) throws(KafkaError) -> [(key: String, value: String)] {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw KafkaError.configuration("cannot read the Kafka properties file \(path)")
        }
        var properties: [(key: String, value: String)] = []
        // Any line ending: "\r\n" is one Character, so splitting on "\n" alone would run a CRLF
        // file's lines together into one value.
        for (index, rawLine) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            let line = rawLine.trimmingCharacters(in: .whitespacesAndNewlines)
            if line.isEmpty || line.hasPrefix("#") { continue }
            guard let equals = line.firstIndex(of: "="), equals != line.startIndex else {
                throw KafkaError.configuration("\(path) line \(index + 1) is not key=value")
            }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces)
            let value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            properties.append((key, value))
        }
        return properties
    }

    /// Why `name` is not a Kafka name of this `kind` (topics and `group.instance.id` share the
    /// rule: 1–249 of `[A-Za-z0-9._-]`, not `.` or `..`), or nil.
    public static func nameProblem(_ name: String, kind: String) -> String? {
        if name.isEmpty || name == "." || name == ".." || name.utf8.count > 249 {
            return "\(kind) '\(name.prefix(80))' is not a valid Kafka \(kind) (1-249 characters, not '.' or '..')"
        }
        for scalar in name.unicodeScalars {
            switch scalar {
            case "a"..."z", "A"..."Z", "0"..."9", ".", "_", "-": continue
            default:
                return "\(kind) '\(name.prefix(80))' has the character '\(scalar)'; "
                    + "a Kafka \(kind) is made of a-z, A-Z, 0-9, '.', '_' and '-'"
            }
        }
        return nil
    }
}
