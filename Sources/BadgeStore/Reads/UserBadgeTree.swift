public import BadgeCore

/// A user's tree as answered by `reddot badges show` and the API: `{"user", "version", "tree"}`.
public struct UserBadgeTree: Sendable, Hashable, Codable {
    /// Whose tree.
    public var user: UserID
    /// The user's version; it grows with every visible change.
    public var version: Int64
    /// The requested node; `nil` (JSON `null`) for a subtree with nothing shown.
    public var tree: BadgeNode?

    /// Creates an answer.
    public init(user: UserID, version: Int64, tree: BadgeNode?) {
        self.user = user
        self.version = version
        self.tree = tree
    }

    enum CodingKeys: String, CodingKey { case user, version, tree }

    /// Encodes `tree` as an explicit `null` when nothing is shown.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(user, forKey: .user)
        try container.encode(version, forKey: .version)
        try container.encode(tree, forKey: .tree)
    }
}
