/// Why an event record was rejected: the value of the dead-letter `reason` header and of the
/// rejected-records table (DESIGN §3).
public enum RejectionReason: String, Sendable, CaseIterable, Codable {
    /// The record is larger than ``EventDecoder/maximumRecordSize`` bytes.
    case tooLarge = "too_large"
    /// The record is not UTF-8.
    case invalidEncoding = "invalid_encoding"
    /// The record is not a JSON object, or one of its objects repeats a key.
    case malformedJSON = "malformed_json"
    /// A required field is missing.
    case missingField = "missing_field"
    /// A field has the wrong type, range or format, or fields conflict.
    case invalidField = "invalid_field"
    /// `op` is not `set`, `incr` or `clear`.
    case unknownOp = "unknown_op"
    /// No rule maps the event's `type`.
    case unknownType = "unknown_type"
    /// The path (given, or made by a rule from attributes) is not a valid badge path.
    case invalidPath = "invalid_path"
    /// A user id is not valid.
    case invalidUser = "invalid_user"
    /// `users` holds more than ``EventDecoder/maximumUsers`` ids.
    case tooManyUsers = "too_many_users"
    /// The rule's path template needs an attribute the event does not have.
    case missingAttribute = "missing_attribute"
}

/// A rejected event: the reason and a message naming the field and the offending value.
public struct EventRejection: Error, Hashable, Sendable, CustomStringConvertible {
    /// The machine-readable reason.
    public var reason: RejectionReason
    /// A message a producer can act on.
    public var message: String

    /// A rejection with the given reason and message.
    public init(reason: RejectionReason, message: String) {
        self.reason = reason
        self.message = message
    }

    /// `reason: message`.
    public var description: String { "\(reason.rawValue): \(message)" }
}
