public import BadgeCore

/// A user's tree as answered by `reddot badges show` and the API: `{"mutes", "tree", "user",
/// "version"}`.
public struct UserBadgeTree: Sendable, Hashable, Codable {
    /// Whose tree.
    public var user: UserID
    /// The user's version; it grows with every visible change.
    public var version: Int64
    /// The requested node; `nil` (JSON `null`) for a subtree with nothing shown.
    public var tree: BadgeNode?
    /// The nodes the user muted (or snoozed) at that version that concern the requested node:
    /// within it, or above it. Each counts in place but gives its ancestors nothing.
    public var mutes: [MutedNode]

    /// Creates an answer.
    public init(user: UserID, version: Int64, tree: BadgeNode?, mutes: [MutedNode] = []) {
        self.user = user
        self.version = version
        self.tree = tree
        self.mutes = mutes
    }

    /// The answer for the node at `path`, down to `depth` levels below it (`nil`: all), built
    /// from a version and aggregates as ``BadgeStore/readAggregates(for:within:depth:on:)``
    /// reads them: the one place where a read becomes a tree.
    public init(
        user: UserID, version: Int64, aggregates: [BadgePath: BadgeAggregate], at path: BadgePath, depth: Int?,
        display: BadgeDisplay, mutes: [MutedNode] = []
    ) {
        self.init(
            user: user, version: version, tree: BadgeNode.build(aggregates: aggregates, at: path, depth: depth, display: display),
            mutes: mutes)
    }

    enum CodingKeys: String, CodingKey { case user, version, tree, mutes }

    /// Reads an answer; one without `mutes` (from a server before mutes) has none.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        user = try container.decode(UserID.self, forKey: .user)
        version = try container.decode(Int64.self, forKey: .version)
        tree = try container.decodeIfPresent(BadgeNode.self, forKey: .tree)
        mutes = try container.decodeIfPresent([MutedNode].self, forKey: .mutes) ?? []
    }

    /// Encodes `tree` as an explicit `null` when nothing is shown.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(user, forKey: .user)
        try container.encode(version, forKey: .version)
        try container.encode(tree, forKey: .tree)
        try container.encode(mutes, forKey: .mutes)
    }
}
