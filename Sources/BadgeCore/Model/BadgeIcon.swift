/// A badge icon: a short label such as `new` or `hot`, 1–32 characters of `[a-z0-9_-]`.
public struct BadgeIcon: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
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

    /// Validates `rawValue`; `nil` if it is not a valid icon.
    public init?(rawValue: String) {
        guard let value = try? BadgeIcon(validating: rawValue) else { return nil }
        self = value
    }

    /// The icon as text.
    public var description: String { rawValue }
}

extension BadgeIcon: Codable {
    /// Decodes a single string and validates it.
    ///
    /// - Throws: `DecodingError.dataCorrupted` with the validation message.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        do {
            self = try BadgeIcon(validating: text)
        } catch {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: error.description)
        }
    }

    /// Encodes the icon as a single string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}
