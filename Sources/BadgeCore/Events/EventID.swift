/// An event's id, unique per event and used to skip duplicates: 1–128 visible ASCII
/// characters (`0x21`–`0x7E`).
public struct EventID: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The most characters in an event id.
    public static let maximumLength = 128

    /// The id as text.
    public let rawValue: String

    /// Validates `text` as an event id.
    ///
    /// - Throws: ``BadgeValidationError`` naming the value and the rule.
    public init(validating text: String) throws(BadgeValidationError) {
        try BadgeValidationError.check(
            text, kind: .eventID, maximum: Self.maximumLength, allowed: BadgeValidationError.isVisibleASCII)
        self.rawValue = text
    }

    /// Validates `rawValue`; `nil` if it is not a valid event id.
    public init?(rawValue: String) {
        guard let value = try? EventID(validating: rawValue) else { return nil }
        self = value
    }

    /// The id as text.
    public var description: String { rawValue }
}

extension EventID: Codable {
    /// Decodes a single string and validates it.
    ///
    /// - Throws: `DecodingError.dataCorrupted` with the validation message.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        do {
            self = try EventID(validating: text)
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
