public import BadgeCore
import Foundation

/// What a `NOTIFY` on ``BadgeStore/changeChannel`` says, in one place: the store's statements
/// write it (``userPayloadSQL(user:version:)``, ``broadcastPayloadSQL(version:)``) and the query
/// service reads it (``init(payload:)``).
public enum ChangeNotification: Hashable, Sendable {
    /// A user's own version moved, to `version`: `{"user": "u1", "version": 3}`.
    case user(UserID, version: Int64?)
    /// The broadcast version moved, to `version` when the payload says:
    /// `{"broadcast_version": 7}`.
    case broadcasts(version: Int64?)

    /// The SQL expression of a user's payload, from the SQL expressions of the user and version.
    static func userPayloadSQL(user: String, version: String) -> String {
        "json_build_object('user', \(user), 'version', \(version))::text"
    }

    /// The SQL expression of a broadcast payload, from the SQL expression of the version.
    static func broadcastPayloadSQL(version: String) -> String {
        "json_build_object('broadcast_version', \(version))::text"
    }

    /// Reads a payload; nil for anything else (a payload another program or build sent on the
    /// channel: the reader then knows only that something changed).
    public init?(payload: String) {
        guard let object = try? JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any] else { return nil }
        if let name = object["user"] as? String, let user = try? UserID(validating: name) {
            self = .user(user, version: Self.integer(object["version"]))
        } else if let version = object["broadcast_version"] {
            self = .broadcasts(version: Self.integer(version))
        } else {
            return nil
        }
    }

    /// A JSON number as JSONSerialization gives it, when it is an exact 64-bit integer.
    private static func integer(_ value: Any?) -> Int64? {
        switch value {
        case let number as Int: return Int64(number)
        case let number as Int64: return number
        case let number as NSNumber:
            let double = number.doubleValue
            return double.rounded() == double ? Int64(exactly: double) : nil
        default: return nil
        }
    }
}
