import Foundation

/// A text value that is valid by construction (``UserID``, ``EventID``, ``ItemID``,
/// ``BadgeIcon``): made only through ``init(validating:)``, and read from JSON the same way.
///
/// The conforming types declare their rule in `init(validating:)`; this gives them the rest:
/// `init?(rawValue:)`, `description`, and `Codable` as a single validated string.
public protocol ValidatedText: RawRepresentable<String>, Hashable, Sendable, CustomStringConvertible, Codable {
    /// Validates `text`.
    ///
    /// - Throws: ``BadgeValidationError`` naming the value and the rule.
    init(validating text: String) throws(BadgeValidationError)
}

extension ValidatedText {
    /// Validates `rawValue`; `nil` if it is not valid.
    public init?(rawValue: String) {
        guard let value = try? Self(validating: rawValue) else { return nil }
        self = value
    }

    /// The text.
    public var description: String { rawValue }

    /// Decodes a single string and validates it.
    ///
    /// - Throws: `DecodingError.dataCorrupted` with the validation message.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        do {
            self = try Self(validating: text)
        } catch {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: error.description)
        }
    }

    /// Encodes the text as a single string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

extension ValidatedText where Self: Comparable {
    /// Byte order of the texts.
    public static func < (lhs: Self, rhs: Self) -> Bool {
        utf8Precedes(lhs.rawValue, rhs.rawValue)
    }
}

/// Whether `lhs` comes before `rhs` in the byte order of their UTF-8 (PostgreSQL's `C`
/// collation): one `memcmp` of contiguous bytes, not a comparison per element (sorting a batch's
/// users is on ingest's hot path).
func utf8Precedes(_ lhs: String, _ rhs: String) -> Bool {
    var lhs = lhs
    var rhs = rhs
    return lhs.withUTF8 { left in
        rhs.withUTF8 { right in
            let common = min(left.count, right.count)
            if common > 0, let l = left.baseAddress, let r = right.baseAddress {
                let order = memcmp(l, r, common)
                if order != 0 { return order < 0 }
            }
            return left.count < right.count
        }
    }
}
