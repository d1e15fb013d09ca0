/// A user's id: 1–128 visible ASCII characters (`0x21`–`0x7E`). `*` alone is reserved as the
/// Kafka key of broadcasts and is rejected.
public struct UserID: ValidatedText, Comparable {
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
}

