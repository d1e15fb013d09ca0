/// Why a text is not a valid ``UserID``, ``BadgeIcon``, ``EventID``, ``ItemID`` or ``ActionID``.
///
/// Each case names the kind of value; ``description`` quotes the value safely and states the rule.
public enum BadgeValidationError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The kinds of validated identifiers.
    public enum Kind: String, Sendable, Equatable {
        /// A ``UserID``.
        case userID = "user id"
        /// A ``BadgeIcon``.
        case icon = "icon"
        /// An ``EventID``.
        case eventID = "event id"
        /// An ``ItemID``.
        case itemID = "item id"
        /// An ``ActionID``.
        case actionID = "action id"
    }

    /// The value is the empty string.
    case empty(Kind)
    /// The value has more than `maximum` characters.
    case tooLong(Kind, value: String, length: Int, maximum: Int)
    /// The value holds a character its kind does not allow; `position` counts from 1.
    case invalidCharacter(Kind, value: String, character: Unicode.Scalar, position: Int)
    /// The value is reserved (the user id `*` is the broadcast key).
    case reserved(Kind, value: String)

    /// A message naming the value and the rule.
    public var description: String {
        switch self {
        case .empty(let kind):
            return "\(kind.rawValue) is empty; \(Self.rule(kind))"
        case .tooLong(let kind, let value, let length, let maximum):
            return "\(kind.rawValue) \(Quoting.quoted(value)) has \(length) characters; the most is \(maximum)"
        case .invalidCharacter(let kind, let value, let character, let position):
            return "\(kind.rawValue) \(Quoting.quoted(value)) has the character "
                + "\(Quoting.quoted(String(character))) at position \(position); \(Self.rule(kind))"
        case .reserved(let kind, let value):
            return "\(kind.rawValue) \(Quoting.quoted(value)) is reserved (it is the broadcast key)"
        }
    }

    /// The rule of a kind, in words.
    static func rule(_ kind: Kind) -> String {
        switch kind {
        case .userID: return "a user id is 1-128 visible ASCII characters (no spaces), and not '*' alone"
        case .icon: return "an icon is 1-32 characters of a-z, 0-9, _ and -"
        case .eventID: return "an event id is 1-128 visible ASCII characters (no spaces)"
        case .itemID: return "an item id is 1-128 visible ASCII characters (no spaces)"
        case .actionID: return "an action id is 1-128 visible ASCII characters (no spaces)"
        }
    }

    /// Validates `text`: non-empty, at most `maximum` characters, each accepted by `allowed`.
    static func check(
        _ text: String, kind: Kind, maximum: Int, allowed: (Unicode.Scalar) -> Bool
    ) throws(BadgeValidationError) {
        if text.isEmpty { throw .empty(kind) }
        var length = 0
        for scalar in text.unicodeScalars {
            length += 1
            if !allowed(scalar) {
                throw .invalidCharacter(kind, value: text, character: scalar, position: length)
            }
        }
        if length > maximum {
            throw .tooLong(kind, value: text, length: length, maximum: maximum)
        }
    }

    /// Visible ASCII, `0x21`–`0x7E`.
    static func isVisibleASCII(_ scalar: Unicode.Scalar) -> Bool {
        (0x21...0x7E).contains(scalar.value)
    }
}
