import Foundation

/// Decodes and validates one event record (DESIGN §3), giving a reason for every rejection.
///
/// Fields: `id` (required); `op` (`set`, `incr`, `decr`, `clear`, `add`, `remove`) or `type` (a
/// rule name), not both; exactly one of `user`, `users` (1…1000 ids) and `audience` (`"all"`).
/// Direct operations take `path` and, by op, `count` (set, 0…``BadgeOperation/maximumCount``,
/// default 0), `icon` (set), `by` (incr and decr, 1…``BadgeOperation/maximumCount``, default 1),
/// `force` (clear, default false) or `item` (add and remove, required, an ``ItemID``); a field of
/// another op, or `attrs`, is rejected. Item operations are per user: with `audience` they are
/// rejected as `invalid_field`. Content events take `attrs`, an object of
/// strings, integers or booleans (the latter two stringified), and no `path`. Optional
/// `occurred_at` and `expires_at` are RFC 3339 timestamps. A null field counts as absent; unknown
/// fields are ignored. A key repeated in any object of the record makes it `malformed_json`.
public struct EventDecoder: Sendable {
    /// The largest record accepted, in bytes (64 KiB).
    public static let maximumRecordSize = 65_536
    /// The most ids in `users`.
    public static let maximumUsers = 1_000

    /// A decoder.
    public init() {}

    /// Decodes one record. Never throws and never traps, whatever the bytes.
    public func decode(_ bytes: some Collection<UInt8>) -> Result<BadgeEvent, EventRejection> {
        do throws(EventRejection) {
            return .success(try decodeEvent(bytes))
        } catch {
            return .failure(error)
        }
    }

    func decodeEvent(_ bytes: some Collection<UInt8>) throws(EventRejection) -> BadgeEvent {
        let size = bytes.count
        if size > Self.maximumRecordSize {
            throw EventRejection(
                reason: .tooLarge, message: "record is \(size) bytes; the most is \(Self.maximumRecordSize)")
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw EventRejection(reason: .invalidEncoding, message: "record is not valid UTF-8")
        }
        let value: JSONValue
        do {
            value = try JSONParser.parse(text.utf8)
        } catch {
            if let key = error.duplicateKey {
                throw EventRejection(
                    reason: .malformedJSON,
                    message: "record repeats the key \(Quoting.quoted(key)) in one object; every key must be unique")
            }
            // Valid JSON never has a trailing comma, so checking only after a failure keeps the
            // message the pre-scan gave.
            if Self.hasTrailingComma(text.utf8) {
                throw EventRejection(reason: .malformedJSON, message: "record is not valid JSON (a trailing comma)")
            }
            throw EventRejection(reason: .malformedJSON, message: "record is not valid JSON")
        }
        guard case .object(let object) = value else {
            throw EventRejection(reason: .malformedJSON, message: "record is \(value.kindName), not a JSON object")
        }
        return try EventFields(object).event()
    }

    /// Whether a `,` is followed (after white space) by `}` or `]` outside strings: JSON forbids
    /// it; used to name that mistake in the rejection message.
    static func hasTrailingComma(_ bytes: String.UTF8View) -> Bool {
        var inString = false
        var escaped = false
        var afterComma = false
        for byte in bytes {
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
                continue
            }
            switch byte {
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"):
                continue
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                if afterComma { return true }
            case UInt8(ascii: "\""):
                inString = true
            default:
                break
            }
            afterComma = byte == UInt8(ascii: ",")
        }
        return false
    }
}

/// The fields of one event object, read with the rejection rules of ``EventDecoder``.
struct EventFields: OperationFieldSource {
    let object: [String: JSONValue]

    init(_ object: [String: JSONValue]) {
        self.object = object
    }

    /// A field's value; null counts as absent.
    subscript(_ name: String) -> JSONValue? {
        guard let value = object[name], value != .null else { return nil }
        return value
    }

    func has(_ name: String) -> Bool { self[name] != nil }

    static func invalid(_ message: String) -> EventRejection {
        EventRejection(reason: .invalidField, message: message)
    }

    static func missing(_ message: String) -> EventRejection {
        EventRejection(reason: .missingField, message: message)
    }

    func text(_ name: String) throws(EventRejection) -> String? {
        guard let value = self[name] else { return nil }
        guard case .string(let text) = value else {
            throw Self.invalid("field '\(name)' must be a string, not \(value.kindName) (\(value.preview))")
        }
        return text
    }

    func requiredString(_ name: String) throws(EventRejection) -> String {
        guard let text = try text(name) else { throw Self.missing("field '\(name)' is missing") }
        return text
    }

    func integer(_ name: String, in range: ClosedRange<Int64>) throws(EventRejection) -> Int64? {
        guard let value = self[name] else { return nil }
        if case .integer(let number) = value, range.contains(number) { return number }
        let rule = "it must be an integer from \(range.lowerBound) to \(range.upperBound)"  // only for the message
        switch value {
        case .integer(let number):
            throw Self.invalid("field '\(name)' is \(number); \(rule)")
        case .number:
            throw Self.invalid("field '\(name)' is \(value.preview); \(rule)")
        default:
            throw Self.invalid("field '\(name)' must be a number, not \(value.kindName) (\(value.preview)); \(rule)")
        }
    }

    func flag(_ name: String) throws(EventRejection) -> Bool? {
        guard let value = self[name] else { return nil }
        guard case .bool(let flag) = value else {
            throw Self.invalid("field '\(name)' must be true or false, not \(value.kindName) (\(value.preview))")
        }
        return flag
    }

    func timestamp(_ name: String) throws(EventRejection) -> Date? {
        guard let text = try text(name) else { return nil }
        guard let date = RFC3339.parse(text) else {
            throw Self.invalid(
                "field '\(name)' is \(Quoting.quoted(text)); it must be an RFC 3339 timestamp from 1970 to 9999 "
                    + "(UTC), such as '2025-03-01T12:00:00Z' or '2025-03-01T14:00:00.5+02:00'")
        }
        return date
    }

    func problem(field name: String, _ rest: String) -> EventRejection {
        Self.invalid("field '\(name)'\(rest)")
    }

    func unknownOp(_ op: String) -> EventRejection {
        EventRejection(
            reason: .unknownOp, message: "field 'op' is \(Quoting.quoted(op)); it must be \(OperationGrammar.opList)")
    }

    /// Rejects fields that belong to another kind of event or another op.
    func reject(_ names: [String], because reason: String) throws(EventRejection) {
        for name in names where has(name) {
            throw Self.invalid("field '\(name)' \(reason)")
        }
    }

    func event() throws(EventRejection) -> BadgeEvent {
        let idText = try requiredString("id")
        let id: EventID
        do {
            id = try EventID(validating: idText)
        } catch {
            throw Self.invalid("field 'id': \(error.description)")
        }
        let body = try body()
        let audience = try audience()
        if audience == .everyone, case .operation(_, let operation) = body,
            let problem = Audience.broadcastProblem(operation)
        {
            throw Self.invalid(problem)
        }
        return BadgeEvent(
            id: id, audience: audience, occurredAt: try timestamp("occurred_at"),
            expiresAt: try timestamp("expires_at"), body: body)
    }

    func body() throws(EventRejection) -> BadgeEvent.Body {
        switch (has("op"), has("type")) {
        case (true, true):
            throw Self.invalid("fields 'op' and 'type' exclude each other; give 'op' for a direct operation "
                + "or 'type' for a content event")
        case (false, false):
            throw Self.missing("field 'op' or 'type' is missing")
        case (false, true):
            return try content()
        case (true, false):
            return try operation()
        }
    }

    func content() throws(EventRejection) -> BadgeEvent.Body {
        let type = try requiredString("type")
        if let problem = RuleSet.typeProblem(type) {
            throw Self.invalid("field 'type': \(problem)")
        }
        try reject(["path"] + OperationGrammar.fieldNames, because: "applies only to direct operations ('op')")
        var attributes: [String: String] = [:]
        if let value = self["attrs"] {
            guard case .object(let object) = value else {
                throw Self.invalid("field 'attrs' must be an object, not \(value.kindName) (\(value.preview))")
            }
            for (name, attribute) in object {
                switch attribute {
                case .string(let text): attributes[name] = text
                case .integer(let number): attributes[name] = String(number)
                case .bool(let flag): attributes[name] = flag ? "true" : "false"
                default:
                    throw Self.invalid(
                        "attribute \(Quoting.quoted(name)) in 'attrs' must be a string, an integer or a boolean, "
                            + "not \(attribute.kindName) (\(attribute.preview))")
                }
            }
        }
        return .content(type: type, attributes: attributes)
    }

    func operation() throws(EventRejection) -> BadgeEvent.Body {
        let op = try requiredString("op")
        try reject(["attrs"], because: "applies only to content events ('type')")
        let operation = try OperationGrammar.operation(op, from: self)
        let pathText = try requiredString("path")
        let path: BadgePath
        do {
            path = try BadgePath(validating: pathText)
        } catch {
            throw EventRejection(reason: .invalidPath, message: error.description)
        }
        if let problem = operation.pathProblem(path) { throw EventRejection(reason: .invalidPath, message: problem) }
        return .operation(path: path, operation: operation)
    }

    func audience() throws(EventRejection) -> Audience {
        let given = ["user", "users", "audience"].filter { has($0) }
        if given.isEmpty {
            throw Self.missing("one of the fields 'user', 'users' and 'audience' is required")
        }
        if given.count > 1 {
            throw Self.invalid(
                "fields \(given.map { "'\($0)'" }.joined(separator: " and ")) exclude each other; give exactly one")
        }
        switch given[0] {
        case "user":
            return .users([try user(try requiredString("user"), field: "user")])
        case "users":
            guard case .array(let values)? = self["users"] else {
                let value = self["users"] ?? .null
                throw Self.invalid("field 'users' must be an array of user ids, not \(value.kindName) (\(value.preview))")
            }
            if values.isEmpty {
                throw Self.invalid("field 'users' is empty; it must hold at least one user id")
            }
            if values.count > EventDecoder.maximumUsers {
                throw EventRejection(
                    reason: .tooManyUsers,
                    message: "field 'users' holds \(values.count) ids; the most is \(EventDecoder.maximumUsers)")
            }
            var seen: Set<UserID> = []
            var users: [UserID] = []
            for (index, value) in values.enumerated() {
                guard case .string(let text) = value else {
                    throw Self.invalid(
                        "field 'users' item \(index + 1) must be a string, not \(value.kindName) (\(value.preview))")
                }
                let user = try user(text, field: "users")
                if seen.insert(user).inserted { users.append(user) }
            }
            return .users(users)
        default:
            let audience = try requiredString("audience")
            guard audience == "all" else {
                throw Self.invalid("field 'audience' is \(Quoting.quoted(audience)); the only audience is 'all'")
            }
            return .everyone
        }
    }

    func user(_ text: String, field: String) throws(EventRejection) -> UserID {
        do {
            return try UserID(validating: text)
        } catch {
            throw EventRejection(reason: .invalidUser, message: "field '\(field)': \(error.description)")
        }
    }
}
