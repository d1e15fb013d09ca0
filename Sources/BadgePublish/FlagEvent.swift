public import BadgeCore
public import Foundation

/// One event described by command-line flags (`reddot publish --user … --op …`): the fields as
/// given, the rules for which go together, and the JSON object the decoder then checks.
public struct FlagEvent: Sendable {
    /// The direct operations, as flags spell them (`--op`): the names events and rules use.
    public typealias Operation = OperationName

    /// `--id`; nil: a random UUID.
    public var id: String?
    /// `--user`, repeatable.
    public var users: [String] = []
    /// `--all`: a broadcast.
    public var everyone = false
    /// `--op`.
    public var operation: Operation?
    /// `--path`.
    public var path: String?
    /// `--count`.
    public var count: Int64?
    /// `--by`.
    public var by: Int64?
    /// `--icon`.
    public var icon: String?
    /// `--force`.
    public var force = false
    /// `--item`.
    public var item: String?
    /// `--until`.
    public var until: String?
    /// `--type`.
    public var type: String?
    /// `--attr key=value`, repeatable.
    public var attributes: [String] = []
    /// `--occurred-at`.
    public var occurredAt: String?
    /// `--expires-at`.
    public var expiresAt: String?

    /// An event with no field given.
    public init() {}

    /// The flags given, by name (for "--stdin reads whole events; leave out …").
    public var givenFlags: [String] {
        let flags: [(String, Bool)] = [
            ("--id", id != nil), ("--user", !users.isEmpty), ("--all", everyone), ("--op", operation != nil),
            ("--path", path != nil), ("--count", count != nil), ("--by", by != nil), ("--icon", icon != nil),
            ("--force", force), ("--item", item != nil), ("--until", until != nil), ("--type", type != nil),
            ("--attr", !attributes.isEmpty),
            ("--occurred-at", occurredAt != nil), ("--expires-at", expiresAt != nil),
        ]
        return flags.filter(\.1).map(\.0)
    }

    /// Why the flags do not describe one event (a sentence naming the flags), or nil.
    public var problem: String? {
        switch (operation, type) {
        case (nil, nil):
            return "give --op (a badge operation) or --type (a content event) for one event, or --stdin for JSON lines"
        case (.some, .some):
            return "--op and --type exclude each other"
        default:
            break
        }
        if users.isEmpty == !everyone {
            return everyone ? "--user and --all exclude each other" : "give --user U (repeatable) or --all"
        }
        if let operation {
            if let problem = operationProblem(operation) { return problem }
        } else {
            let operationFlags = [
                ("--path", path != nil), ("--count", count != nil), ("--by", by != nil),
                ("--icon", icon != nil), ("--force", force), ("--item", item != nil), ("--until", until != nil),
            ]
            if let given = operationFlags.first(where: { $0.1 }) {
                return "\(given.0) goes with --op, not --type"
            }
        }
        for attribute in attributes where Self.splitAttribute(attribute) == nil {
            return "--attr '\(attribute.prefix(80))' is not key=value"
        }
        return nil
    }

    private func operationProblem(_ operation: Operation) -> String? {
        if path == nil { return "--op \(operation.rawValue) needs --path" }
        if !attributes.isEmpty { return "--attr goes with --type" }
        if count != nil, operation != .set { return "--count goes with --op set" }
        if icon != nil, operation != .set { return "--icon goes with --op set" }
        if by != nil, operation != .incr, operation != .decr { return "--by goes with --op incr or decr" }
        if force, operation != .clear { return "--force goes with --op clear" }
        let takesItem = operation == .add || operation == .remove
        if item != nil, !takesItem { return "--item goes with --op add or remove" }
        if item == nil, takesItem { return "--op \(operation.rawValue) needs --item" }
        if until != nil, operation != .mute { return "--until goes with --op mute" }
        return nil
    }

    /// `key=value` split at the first `=`; nil without one, or with an empty key.
    public static func splitAttribute(_ text: String) -> (key: String, value: String)? {
        guard let equals = text.firstIndex(of: "="), equals != text.startIndex else { return nil }
        return (String(text[..<equals]), String(text[text.index(after: equals)...]))
    }

    /// The event as a JSON object (sorted keys), for the decoder to check.
    public func json() throws -> Data {
        var object: [String: Any] = ["id": id ?? UUID().uuidString.lowercased()]
        if everyone {
            object["audience"] = "all"
        } else if users.count == 1 {
            object["user"] = users[0]
        } else {
            object["users"] = users
        }
        if let operation {
            object["op"] = operation.rawValue
            object["path"] = path
            if let count { object["count"] = count }
            if let by { object["by"] = by }
            if let icon { object["icon"] = icon }
            if force { object["force"] = true }
            if let item { object["item"] = item }
            if let until { object["until"] = until }
        }
        if let type {
            object["type"] = type
            var attributeObject: [String: String] = [:]
            for attribute in attributes {
                if let (key, value) = Self.splitAttribute(attribute) { attributeObject[key] = value }
            }
            if !attributeObject.isEmpty { object["attrs"] = attributeObject }
        }
        if let occurredAt { object["occurred_at"] = occurredAt }
        if let expiresAt { object["expires_at"] = expiresAt }
        return try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    }
}
