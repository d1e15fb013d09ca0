/// A user's id: 1–128 visible ASCII characters (`0x21`–`0x7E`). `*` alone is reserved as the
/// Kafka key of broadcasts and is rejected.
public struct UserID: RawRepresentable, Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The most characters in a user id.
    public static let maximumLength = 128

    /// The id as text.
    public let rawValue: String

    /// Validates `text` as a user id.
    ///
    /// - Throws: ``BadgeValidationError`` naming the value and the rule.
    public init(validating text: String) throws(BadgeValidationError) {
        try BadgeValidationError.check(
            text, kind: .userID, maximum: Self.maximumLength, allowed: BadgeValidationError.isVisibleASCII)
        if text == "*" { throw .reserved(.userID, value: text) }
        self.rawValue = text
    }

    /// Validates `rawValue`; `nil` if it is not a valid user id.
    public init?(rawValue: String) {
        guard let value = try? UserID(validating: rawValue) else { return nil }
        self = value
    }

    /// The id as text.
    public var description: String { rawValue }

    /// Byte order of the texts.
    public static func < (lhs: UserID, rhs: UserID) -> Bool {
        lhs.rawValue.utf8.lexicographicallyPrecedes(rhs.rawValue.utf8)
    }
}

extension UserID: Codable {
    /// Decodes a single string and validates it.
    ///
    /// - Throws: `DecodingError.dataCorrupted` with the validation message.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        do {
            self = try UserID(validating: text)
        } catch {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: error.description)
        }
    }

    /// Encodes the id as a single string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}
