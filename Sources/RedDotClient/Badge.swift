import Foundation

/// What one node of a user's badge tree shows, as an app draws it: RJBadgeKit's badge, from the
/// server.
public struct Badge: Sendable, Hashable {
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

/// Why the client could not use what the server sent.
public struct RedDotClientError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, as a sentence.
    public var description: String

    /// An error with `description`.
    public init(_ description: String) {
        self.description = description
    }
}

/// A user's badge tree as the client holds it: every shown node, flat, at one version.
struct BadgeTreeState: Sendable {
    private(set) var version: Int64 = -1
    private(set) var nodes: [String: Badge] = [:]

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
    }

    /// `{"user", "version", "changed"}`: a stream's change event (also GET …/badges/changes).
    struct Change: Decodable {
        var version: Int64
        var changed: [Node]
    }

    /// Replaces the tree with a snapshot; returns the paths whose badge changed (nil: ignored,
    /// not newer than what is held).
    mutating func apply(_ snapshot: Snapshot) -> Set<String>? {
        guard snapshot.version > version else { return nil }
        var fresh: [String: Badge] = [:]
        func visit(_ node: Node) {
            if node.shown { fresh[node.path] = Self.badge(node, version: snapshot.version) }
            node.children?.forEach(visit)
        }
        if let tree = snapshot.tree { visit(tree) }
        let changed = Set(fresh.keys).union(nodes.keys).filter { path in
            switch (nodes[path], fresh[path]) {
            case let (old?, new?): return !old.looksLike(new)
            default: return true
            }
        }
        version = snapshot.version
        nodes = fresh
        return changed
    }

    /// Applies a change; returns the paths whose badge changed (nil: ignored, not newer).
    mutating func apply(_ change: Change) -> Set<String>? {
        guard change.version > version else { return nil }
        var changed: Set<String> = []
        for node in change.changed {
            let old = nodes[node.path]
            if node.shown {
                let new = Self.badge(node, version: change.version)
                if old.map({ !$0.looksLike(new) }) ?? true { changed.insert(node.path) }
                nodes[node.path] = new
            } else if old != nil {
                nodes[node.path] = nil
                changed.insert(node.path)
            }
        }
        version = change.version
        return changed
    }

    private static func badge(_ node: Node, version: Int64) -> Badge {
        Badge(
            path: node.path, shown: node.shown, count: node.count, unseen: node.unseen ?? 0, text: node.text, icon: node.icon,
            version: version)
    }
}
