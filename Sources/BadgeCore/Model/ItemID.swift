/// An item's id (a message, a promotion item): 1–128 visible ASCII characters (`0x21`–`0x7E`).
///
/// Items are counted per node: a node's own count is its counter plus its live items (DESIGN §2).
public struct ItemID: ValidatedText, Comparable {
    /// The most characters in an item id.
    public static let maximumLength = 128

    /// The id as text.
    public let rawValue: String

    /// Validates `text` as an item id.
    ///
    /// - Throws: ``BadgeValidationError`` naming the value and the rule.
    public init(validating text: String) throws(BadgeValidationError) {
        try BadgeValidationError.check(
            text, kind: .itemID, maximum: Self.maximumLength, allowed: BadgeValidationError.isVisibleASCII)
        self.rawValue = text
    }
}
