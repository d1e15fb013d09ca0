/// A badge icon: a short label such as `new` or `hot`, 1–32 characters of `[a-z0-9_-]`.
public struct BadgeIcon: ValidatedText {
    /// The most characters in an icon.
    public static let maximumLength = 32

    /// The icon as text.
    public let rawValue: String

    /// Validates `text` as an icon.
    ///
    /// - Throws: ``BadgeValidationError`` naming the value and the rule.
    public init(validating text: String) throws(BadgeValidationError) {
        try BadgeValidationError.check(text, kind: .icon, maximum: Self.maximumLength) { scalar in
            switch scalar {
            case "a"..."z", "0"..."9", "_", "-": return true
            default: return false
            }
        }
        self.rawValue = text
    }
}

