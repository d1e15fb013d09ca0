/// An event's id, unique per event and used to skip duplicates: 1–128 visible ASCII
/// characters (`0x21`–`0x7E`).
public struct EventID: ValidatedText {
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
}

