import Foundation

/// A record of the change feed (`deploy/schema/change.schema.json`) as its consumers in RedDot
/// (`reddot push`, `reddot webhooks`) read it: what a user record says of each changed node and
/// of the root, and a broadcasts record whole. Records come from Kafka: anything may arrive.
public enum ChangeRecord: Sendable, Hashable {
    case user(User)
    case broadcasts(version: Int64, json: String)

    /// One version of a user's own badges.
    public struct User: Sendable, Hashable {
        public var user: String
        public var version: Int64
        public var ownVersion: Int64
        public var changed: [Node]
        public var root: BadgeAggregate
        public var at: String
    }

    /// A changed node, after the change.
    public struct Node: Sendable, Hashable {
        public var path: BadgePath
        public var shown: Bool
        public var count: Int64
        public var unseen: Int64
    }

    /// The record in `payload`, or a sentence saying why it is not one.
    public static func decode(_ payload: [UInt8]) -> Result<ChangeRecord, Unreadable> {
        let wire: Wire
        do {
            wire = try JSONDecoder().decode(Wire.self, from: Data(payload))
        } catch {
            return .failure(Unreadable("not a change record: \(error)"))
        }
        switch wire.type {
        case "broadcasts":
            guard let version = wire.version, version >= 1 else { return .failure(Unreadable("a broadcasts record without a version of 1 or more")) }
            return .success(.broadcasts(version: version, json: String(decoding: payload, as: UTF8.self)))
        case "user":
            guard let user = wire.user, !user.isEmpty, let version = wire.version, let ownVersion = wire.ownVersion, ownVersion >= 1,
                let root = wire.root, let changed = wire.changed
            else { return .failure(Unreadable("a user record without user, version, own_version, changed or root")) }
            guard root.count >= 0, root.unseen >= 0, changed.allSatisfy({ $0.count >= 0 && $0.unseen >= 0 }) else {
                return .failure(Unreadable("a user record with a negative count"))
            }
            var nodes: [Node] = []
            for node in changed {
                guard let path = try? BadgePath(validating: node.path) else { return .failure(Unreadable("a changed node with an invalid path")) }
                nodes.append(Node(path: path, shown: node.shown, count: node.count, unseen: node.unseen))
            }
            return .success(
                .user(
                    User(
                        user: user, version: version, ownVersion: ownVersion, changed: nodes,
                        root: BadgeAggregate(count: root.count, unseen: root.unseen), at: wire.at ?? "")))
        default:
            return .failure(Unreadable("an unknown record type"))
        }
    }

    /// Why a feed record cannot be read.
    public struct Unreadable: Error, Sendable, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    private struct Wire: Decodable {
        struct WireNode: Decodable {
            var path: String
            var shown: Bool
            var count: Int64
            var unseen: Int64
        }
        struct Root: Decodable {
            var count: Int64
            var unseen: Int64
        }
        var type: String
        var user: String?
        var version: Int64?
        var ownVersion: Int64?
        var changed: [WireNode]?
        var root: Root?
        var at: String?

        enum CodingKeys: String, CodingKey {
            case type, user, version, changed, root, at
            case ownVersion = "own_version"
        }
    }
}
