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
    ///
    /// The two forms the store writes are read from their bytes (``scanned(_:)``); any other text
    /// goes through `JSONSerialization` (``parsed(_:)``), which takes every JSON spelling of them.
    /// Every query service reads every version's notification: through `JSONSerialization`
    /// alone that was about 2.4% of the services' CPU at 10,000 events/s over 100,000 users
    /// (`perf`, BENCHMARKS.md).
    public init?(payload: String) {
        guard let notification = Self.scanned(payload) ?? Self.parsed(payload) else { return nil }
        self = notification
    }

    /// `init(payload:)` through `JSONSerialization`, for any text.
    package static func parsed(_ payload: String) -> ChangeNotification? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any] else { return nil }
        if let name = object["user"] as? String, let user = try? UserID(validating: name) {
            return .user(user, version: Self.integer(object["version"]))
        } else if let version = object["broadcast_version"] {
            return .broadcasts(version: Self.integer(version))
        } else {
            return nil
        }
    }

    /// A payload in one of the two forms the store writes, read from its bytes:
    /// `{"user" : "u1", "version" : 3}` or `{"broadcast_version" : 7}`, with any whitespace
    /// between tokens, a user id without escapes, a version of plain digits within `Int64`. Nil
    /// for anything else, which ``parsed(_:)`` then reads or refuses: so where this reads a
    /// notification, it is `parsed`'s.
    package static func scanned(_ payload: String) -> ChangeNotification? {
        var payload = payload
        return payload.withUTF8 { bytes -> ChangeNotification? in
            var cursor = PlainJSONCursor(bytes)
            guard cursor.take(UInt8(ascii: "{")), let key = cursor.string(), cursor.take(UInt8(ascii: ":")) else { return nil }
            switch key {
            case "user":
                guard let name = cursor.string(), let user = try? UserID(validating: name), cursor.take(UInt8(ascii: ",")),
                    cursor.string() == "version", cursor.take(UInt8(ascii: ":")), let version = cursor.integer(),
                    cursor.take(UInt8(ascii: "}")), cursor.atEnd()
                else { return nil }
                return .user(user, version: version)
            case "broadcast_version":
                guard let version = cursor.integer(), cursor.take(UInt8(ascii: "}")), cursor.atEnd() else { return nil }
                return .broadcasts(version: version)
            default:
                return nil
            }
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
