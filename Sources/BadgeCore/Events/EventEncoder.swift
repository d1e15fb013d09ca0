import Foundation

/// Encodes an event as the compact JSON record that ``EventDecoder`` reads back to an equal
/// event (the producers' format of DESIGN §3). Used by `reddot publish` and by tests.
///
/// Keys come in a fixed order; attributes are sorted by name; timestamps are UTC RFC 3339 with up
/// to microsecond precision, so a date with a finer fraction comes back rounded to the microsecond.
public struct EventEncoder: Sendable {
    /// An encoder.
    public init() {}

    /// The record's bytes: UTF-8 JSON without spaces.
    public func encode(_ event: BadgeEvent) -> [UInt8] {
        var fields: [(String, String)] = [("id", Self.string(event.id.rawValue))]
        switch event.body {
        case .operation(let path, let operation):
            fields.append(("op", Self.string(OperationGrammar.Op(operation).rawValue)))
            switch operation {
            case .set(let count, let icon):
                fields.append(("count", String(count)))
                if let icon { fields.append(("icon", Self.string(icon.rawValue))) }
            case .increment(let by), .decrement(let by):
                fields.append(("by", String(by)))
            case .clear(let force):
                if force { fields.append(("force", "true")) }
            case .addItem(let item), .removeItem(let item):
                fields.append(("item", Self.string(item.rawValue)))
            case .mute(let until):
                if let until { fields.append(("until", Self.string(RFC3339.format(until)))) }
            case .seen, .unmute:
                break
            }
            fields.append(("path", Self.string(path.rawValue)))
        case .content(let type, let attributes):
            fields.append(("type", Self.string(type)))
            if !attributes.isEmpty {
                let members = attributes.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
                    .map { Self.string($0.key) + ":" + Self.string($0.value) }
                fields.append(("attrs", "{" + members.joined(separator: ",") + "}"))
            }
        }
        switch event.audience {
        case .users(let users) where users.count == 1:
            fields.append(("user", Self.string(users[0].rawValue)))
        case .users(let users):
            fields.append(("users", "[" + users.map { Self.string($0.rawValue) }.joined(separator: ",") + "]"))
        case .everyone:
            fields.append(("audience", Self.string("all")))
        }
        if let occurredAt = event.occurredAt {
            fields.append(("occurred_at", Self.string(RFC3339.format(occurredAt))))
        }
        if let expiresAt = event.expiresAt {
            fields.append(("expires_at", Self.string(RFC3339.format(expiresAt))))
        }
        let json = "{" + fields.map { Self.string($0.0) + ":" + $0.1 }.joined(separator: ",") + "}"
        return Array(json.utf8)
    }

    /// A JSON string literal: quotes, backslashes and control characters escaped.
    static func string(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            default:
                if scalar.value < 0x20 {
                    let hex = String(scalar.value, radix: 16)
                    result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    result.unicodeScalars.append(scalar)
                }
            }
        }
        return result + "\""
    }
}
