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

    /// The answer for the node at `path`, down to `depth` levels below it (`nil`: all), built
    /// from a version and aggregates as ``BadgeStore/readAggregates(for:within:depth:on:)``
    /// reads them: the one place where a read becomes a tree.
    public init(
        user: UserID, version: Int64, aggregates: [BadgePath: BadgeAggregate], at path: BadgePath, depth: Int?,
        display: BadgeDisplay
    ) {
        self.init(user: user, version: version, tree: BadgeNode.build(aggregates: aggregates, at: path, depth: depth, display: display))
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
