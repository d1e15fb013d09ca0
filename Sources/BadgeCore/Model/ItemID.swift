/// An item's id (a message, a promotion item): 1–128 visible ASCII characters (`0x21`–`0x7E`).
///
/// Items are counted per node: a node's own count is its counter plus its live items (DESIGN §2).
public struct ItemID: RawRepresentable, Hashable, Sendable, Comparable, CustomStringConvertible {
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

    /// Validates `rawValue`; `nil` if it is not a valid item id.
    public init?(rawValue: String) {
        guard let value = try? ItemID(validating: rawValue) else { return nil }
        self = value
    }

    /// The id as text.
    public var description: String { rawValue }

    /// Byte order of the texts.
    public static func < (lhs: ItemID, rhs: ItemID) -> Bool {
        lhs.rawValue.utf8.lexicographicallyPrecedes(rhs.rawValue.utf8)
    }
}
