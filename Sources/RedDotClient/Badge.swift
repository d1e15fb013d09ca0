public import Foundation

/// What one node of a user's badge tree shows, as an app draws it: RJBadgeKit's badge, from the
/// server.
public struct Badge: Sendable, Hashable, Codable {
    /// The node, `root.chat.c7`.
    public var path: String
    /// Whether it shows at all (a dot, a number or an icon).
    public var shown: Bool
    /// Its number (0: a dot).
    public var count: Int64
    /// What arrived since the user last saw it (the bell's number).
    public var unseen: Int64
    /// The number as displayed (`"7"`, `"99+"`); nil for a dot.
    public var text: String?
    /// The icon name, if any.
    public var icon: String?
    /// The version of the user's tree it was read at.
    public var version: Int64

    /// A badge with the given fields.
    public init(path: String, shown: Bool, count: Int64, unseen: Int64, text: String?, icon: String?, version: Int64) {
        self.path = path
        self.shown = shown
        self.count = count
        self.unseen = unseen
        self.text = text
        self.icon = icon
        self.version = version
    }

    /// A node that shows nothing, at `version`.
    public static func hidden(_ path: String, version: Int64) -> Badge {
        Badge(path: path, shown: false, count: 0, unseen: 0, text: nil, icon: nil, version: version)
    }

    /// Whether `other` looks the same (the version aside).
    func looksLike(_ other: Badge) -> Bool {
        shown == other.shown && count == other.count && unseen == other.unseen && text == other.text && icon == other.icon
    }
}

/// What went wrong between the client and the server, as a sentence, with its kind.
public struct RedDotClientError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kinds of failure, by what the app can do about them.
    public enum Kind: Sendable, Hashable {
        /// The server refused the token (401): get a new one; the client does not retry by itself.
        case unauthorized
        /// The token may not read this user's badges (403).
        case forbidden
        /// The server has no tree for the user (404): an admin token (or a server without auth)
        /// asking for a user with nothing stored yet, or a user token asking for another user.
        /// The client shows an empty tree and tries again later.
        case notFound
        /// The server answered with another error status (`status`).
        case server
        /// The server could not be reached, or the connection broke: the client retries.
        case transport
        /// The server sent something the client cannot read.
        case invalidResponse
        /// The offline cache file could not be read or written.
        case cache
        /// The path given is not a badge path (`root`, then up to 16 labels of 1-64 characters
        /// of `A-Z a-z 0-9 _`, joined by `.`); the description names the rule it broke.
        case invalidPath
    }

    /// The kind of failure.
    public var kind: Kind
    /// The HTTP status, when the server answered with one.
    public var status: Int?
    /// What went wrong, as a sentence.
    public var description: String

    /// An error of `kind` with `description`.
    public init(_ kind: Kind, _ description: String, status: Int? = nil) {
        self.kind = kind
        self.description = description
        self.status = status
    }
}

/// A node the user muted (or snoozed until a time): it keeps its numbers, and gives its
/// ancestors and the app icon nothing (``RedDotClient/mute(_:until:)``).
public struct MutedPath: Sendable, Hashable, Decodable {
    /// The muted node.
    public var path: String
    /// When the snooze ends; nil for a mute until unmuted.
    public var until: Date?

    enum CodingKeys: String, CodingKey { case path, until }

    /// A muted node.
    public init(path: String, until: Date?) {
        self.path = path
        self.until = until
    }

    /// Reads `{"path", "until": RFC 3339 or null}`; an `until` that is not a time is refused.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        path = try container.decode(String.self, forKey: .path)
        guard let text = try container.decodeIfPresent(String.self, forKey: .until) else {
            until = nil
            return
        }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = text.contains(".") ? [.withInternetDateTime, .withFractionalSeconds] : [.withInternetDateTime]
        guard let date = formatter.date(from: text) else {
            throw DecodingError.dataCorruptedError(forKey: .until, in: container, debugDescription: "until is not an RFC 3339 time")
        }
        until = date
    }
}

/// A user's badge tree as the client holds it: every shown node, flat, at one version, and the
/// muted nodes.
struct BadgeTreeState: Sendable {
    private(set) var version: Int64 = -1
    private(set) var nodes: [String: Badge] = [:]
    private(set) var mutes: [MutedPath] = []

    /// The node at `path` (hidden when it does not show).
    func badge(_ path: String) -> Badge {
        nodes[path] ?? .hidden(path, version: max(version, 0))
    }

    /// The JSON a node arrives as (`children` only in trees).
    struct Node: Decodable {
        var path: String
        var shown: Bool
        var count: Int64
        var unseen: Int64?
        var text: String?
        var icon: String?
        var children: [Node]?
    }

    /// `{"user", "version", "tree"}`: a snapshot (a stream's first event, or GET …/badges).
    struct Snapshot: Decodable {
        var version: Int64
        var tree: Node?
        /// The muted nodes (a server before mutes sends none).
        var mutes: [MutedPath]?
    }

    /// `{"user", "version", "changed"}`: a stream's change event (also GET …/badges/changes).
    struct Change: Decodable {
        var version: Int64
        var changed: [Node]
        /// The muted nodes after the change, when they changed.
        var mutes: [MutedPath]?
    }

    /// Replaces the tree with a snapshot when it is newer than the tree held, or whatever its
    /// version when `authoritative` (the first answer after a start from the offline cache);
    /// returns whether it did.
    mutating func apply(_ snapshot: Snapshot, authoritative: Bool = false) -> Bool {
        guard snapshot.version > version || authoritative else { return false }
        version = snapshot.version
        nodes = Self.shownNodes(snapshot.tree, version: snapshot.version)
        mutes = snapshot.mutes ?? []
        return true
    }

    /// Applies a change when it is newer than the tree held; returns whether it did.
    mutating func apply(_ change: Change) -> Bool {
        guard change.version > version else { return false }
        for node in change.changed {
            nodes[node.path] = node.shown ? Self.badge(node, version: change.version) : nil
        }
        if let changed = change.mutes { mutes = changed }
        version = change.version
        return true
    }

    /// Every shown node of `tree` (nested as the server sends it), flat, by path.
    static func shownNodes(_ tree: Node?, version: Int64) -> [String: Badge] {
        var shown: [String: Badge] = [:]
        func visit(_ node: Node) {
            if node.shown { shown[node.path] = badge(node, version: version) }
            node.children?.forEach(visit)
        }
        if let tree { visit(tree) }
        return shown
    }

    /// The tree as it was saved (see ``BadgeCache``).
    init(version: Int64, nodes: [String: Badge]) {
        self.version = version
        self.nodes = nodes
    }

    init() {}

    private static func badge(_ node: Node, version: Int64) -> Badge {
        Badge(
            path: node.path, shown: node.shown, count: node.count, unseen: node.unseen ?? 0, text: node.text, icon: node.icon,
            version: version)
    }
}
