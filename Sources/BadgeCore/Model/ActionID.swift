/// The id a client gives a clear or seen it sends over HTTP (`action_id`), so that sending it
/// again (a retry after a lost answer, a replay of a tap queued offline) applies it once:
/// 1–128 visible ASCII characters (`0x21`–`0x7E`), unique per user.
public struct ActionID: ValidatedText {
    /// The most characters in an action id.
    public static let maximumLength = 128

    /// The id as text.
    public let rawValue: String

    /// Validates `text` as an action id.
    ///
    /// - Throws: ``BadgeValidationError`` naming the value and the rule.
    public init(validating text: String) throws(BadgeValidationError) {
        try BadgeValidationError.check(
            text, kind: .actionID, maximum: Self.maximumLength, allowed: BadgeValidationError.isVisibleASCII)
        self.rawValue = text
    }
}
