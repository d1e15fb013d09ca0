/// The set of active broadcasts at one broadcast version.
public struct BroadcastSet: Hashable, Sendable {
    /// The broadcast version.
    public var version: Int64
    /// The active broadcasts, by id.
    public var active: [Int64: BroadcastBadge]

    /// A set at `version`.
    public init(version: Int64, active: [Int64: BroadcastBadge]) {
        self.version = version
        self.active = active
    }

    /// The set after `change`, which must be the next version; nil otherwise (a version was
    /// missed: read the set again).
    public func applying(_ change: BroadcastSetChange) -> BroadcastSet? {
        guard change.version == version + 1 else { return nil }
        var next = self
        next.version = change.version
        for broadcast in change.added { next.active[broadcast.id] = broadcast }
        for broadcast in change.withdrawn { next.active[broadcast.id] = nil }
        return next
    }
}

/// What one user sees of one subtree, in its parts: their own aggregates within it (down to a
/// depth, and along the chains of the active broadcasts within it), the active broadcasts within
/// it and the ones they dismissed, their muted nodes and the aggregation modes, at an own version
/// and a broadcast version. A broadcast change moves only the broadcast part, so a view read once can
/// follow broadcast versions without reading again (``rebased(on:)``): a dismissal or a seen,
/// the only per-user parts of broadcasts, always comes with a new own version.
public struct UserView: Hashable, Sendable {
    /// The subtree's root.
    public var path: BadgePath
    /// Levels below `path` (nil: all).
    public var depth: Int?
    /// The user's own version.
    public var userVersion: Int64
    /// The broadcast version of `broadcasts`.
    public var broadcastVersion: Int64
    /// The user's own aggregates within the subtree, down to the depth, and those deeper on the
    /// chains of `broadcasts` (a broadcast's node and its ancestors: merging it needs them).
    public var aggregates: [BadgePath: BadgeAggregate]
    /// The active broadcasts within the subtree, by id.
    public var broadcasts: [Int64: BroadcastBadge]
    /// The broadcasts the user dismissed (as of `userVersion`).
    public var dismissed: Set<Int64>
    /// The broadcasts the user marked seen (as of `userVersion`): they show, without unseen.
    public var seenBroadcasts: Set<Int64>
    /// The user's muted nodes that concern the subtree (``MutedNode/concerns(_:)``), by path.
    public var mutes: [MutedNode]
    /// The aggregation modes the broadcasts are merged under (those stored when the view was read).
    public var modes: AggregationModes

    /// A view with the given parts.
    public init(
        path: BadgePath, depth: Int?, userVersion: Int64, broadcastVersion: Int64, aggregates: [BadgePath: BadgeAggregate],
        broadcasts: [Int64: BroadcastBadge], dismissed: Set<Int64>, seenBroadcasts: Set<Int64> = [], mutes: [MutedNode] = [],
        modes: AggregationModes = .none
    ) {
        self.path = path
        self.depth = depth
        self.userVersion = userVersion
        self.broadcastVersion = broadcastVersion
        self.aggregates = aggregates
        self.broadcasts = broadcasts
        self.dismissed = dismissed
        self.seenBroadcasts = seenBroadcasts
        self.mutes = mutes
        self.modes = modes
    }

    /// The visible version: the own version plus the broadcast version (saturating).
    public var version: Int64 { userVersion.addingSaturating(broadcastVersion) }

    /// The deepest ``BadgePath/depth`` the view shows.
    public var deepest: Int { path.depth + min(max(depth ?? BadgePath.maximumDepth, 0), BadgePath.maximumDepth) }

    /// The aggregates the user sees: their own with the broadcasts they have not dismissed
    /// merged in under their modes and mutes (those they saw without unseen), within the subtree
    /// and depth.
    public var visibleAggregates: [BadgePath: BadgeAggregate] {
        var merged = aggregates
        let shown = broadcasts.values.filter { !dismissed.contains($0.id) }
        BadgeAggregate.merge(
            Array(shown), seen: seenBroadcasts, into: &merged, within: path, maximumDepth: deepest, modes: modes,
            muted: Set(mutes.map(\.path)))
        return merged
    }

    /// Whether the view keeps `node`'s aggregate: within the depth, or on the chain of one of its
    /// broadcasts.
    func keeps(_ node: BadgePath) -> Bool {
        node.depth <= deepest || broadcasts.values.contains { $0.path.isWithin(node) }
    }

    /// The view one own version later: `change` (the user's next logged version) applied to the
    /// aggregates within the subtree and depth, with the broadcasts it dismissed, at the
    /// broadcast version the change was made under (this view's, or `set`'s when the change was
    /// made under that newer one: a broadcast change the view has not followed yet). Nil when
    /// the change is not the next own version, or was made under a broadcast version this view
    /// cannot take (older than its own, or newer and not `set`'s): read the view again. So a
    /// view only moves along the versions the user's tree passed through, as a read would.
    public func applying(_ change: OwnLayerChange, broadcasts set: BroadcastSet?) -> UserView? {
        guard userVersion < Int64.max, change.version == userVersion + 1 else { return nil }
        var view = self
        if change.broadcastVersion != broadcastVersion {
            guard change.broadcastVersion > broadcastVersion, let set, set.version == change.broadcastVersion,
                let rebased = rebased(on: set)
            else { return nil }
            view = rebased
        }
        for node in change.nodes where node.path.isWithin(path) && view.keeps(node.path) {
            view.aggregates[node.path] = node.after
        }
        view.dismissed.formUnion(change.dismissed)
        view.seenBroadcasts.formUnion(change.seenBroadcasts)
        if let mutes = change.mutes { view.mutes = mutes.filter { $0.concerns(path) }.sorted { $0.path < $1.path } }
        view.userVersion = change.version
        return view
    }

    /// The same view at the broadcast version of `set` (its active broadcasts within the
    /// subtree); nil when `set` is older than this view's (keep this view), or when it adds a
    /// broadcast deeper than the view's depth, whose chain the view did not read (read the view
    /// again).
    public func rebased(on set: BroadcastSet) -> UserView? {
        guard set.version >= broadcastVersion else { return nil }
        var view = self
        view.broadcastVersion = set.version
        view.broadcasts = set.active.filter { $0.value.path.isWithin(path) }
        for (id, broadcast) in view.broadcasts where broadcasts[id] == nil && broadcast.path.depth > deepest {
            return nil
        }
        view.aggregates = view.aggregates.filter { view.keeps($0.key) }
        return view
    }
}
