/// What one user sees at one visible version, in its parts: their own aggregates (what the rollup
/// computed), the active broadcasts and the broadcasts they dismissed.
///
/// The visible version is the user's own version plus the broadcast version. Each change moves
/// exactly one of the two by one, and the two kinds of change are totally ordered (DESIGN §6a), so
/// a user's visible versions form one path of single steps and a visible version names one point
/// on it.
public struct BadgeLayers: Hashable, Sendable {
    /// The user's own version.
    public var userVersion: Int64
    /// The version of the set of active broadcasts.
    public var broadcastVersion: Int64
    /// The user's own aggregates (broadcasts not merged in).
    public var aggregates: [BadgePath: BadgeAggregate]
    /// The active broadcasts, by id.
    public var broadcasts: [Int64: BroadcastBadge]
    /// The broadcasts the user dismissed, each with the own version from which the dismissal shows.
    public var dismissals: [Int64: Int64]
    /// The broadcasts the user marked seen, each with the own version from which the seen shows.
    public var seens: [Int64: Int64]
    /// The user's muted nodes at the own version.
    public var mutes: [MutedNode]
    /// The aggregation modes the broadcasts are merged under.
    public var modes: AggregationModes

    /// Layers with the given parts.
    public init(
        userVersion: Int64, broadcastVersion: Int64, aggregates: [BadgePath: BadgeAggregate] = [:],
        broadcasts: [Int64: BroadcastBadge] = [:], dismissals: [Int64: Int64] = [:], seens: [Int64: Int64] = [:],
        mutes: [MutedNode] = [], modes: AggregationModes = .none
    ) {
        self.userVersion = userVersion
        self.broadcastVersion = broadcastVersion
        self.aggregates = aggregates
        self.broadcasts = broadcasts
        self.dismissals = dismissals
        self.seens = seens
        self.mutes = mutes
        self.modes = modes
    }

    /// The visible version (saturating).
    public var version: Int64 { userVersion.addingSaturating(broadcastVersion) }

    /// What the user sees: their aggregates with the active broadcasts they have not dismissed
    /// merged in under the modes and mutes, those they saw without unseen (both as of their own
    /// version).
    public var visibleAggregates: [BadgePath: BadgeAggregate] {
        var merged = aggregates
        let shown = broadcasts.values.filter { broadcast in
            guard let from = dismissals[broadcast.id] else { return true }
            return from > userVersion
        }
        let seen = Set(seens.filter { $0.value <= userVersion }.keys)
        BadgeAggregate.merge(Array(shown), seen: seen, into: &merged, modes: modes, muted: Set(mutes.map(\.path)))
        return merged
    }
}

/// One logged version of a user's own layer: the aggregates it changed, each with its value
/// before and after (nil: no aggregate, the node did not show).
public struct OwnLayerChange: Hashable, Sendable {
    /// One aggregate that changed.
    public struct Node: Hashable, Sendable {
        /// The node.
        public var path: BadgePath
        /// Its aggregate before the change (nil: none).
        public var before: BadgeAggregate?
        /// Its aggregate after the change (nil: none).
        public var after: BadgeAggregate?

        /// A node change.
        public init(path: BadgePath, before: BadgeAggregate?, after: BadgeAggregate?) {
            self.path = path
            self.before = before
            self.after = after
        }
    }

    /// The user's own version after the change.
    public var version: Int64
    /// The broadcast version the change was made under.
    public var broadcastVersion: Int64
    /// The aggregates that changed.
    public var nodes: [Node]
    /// The broadcasts the user dismissed in this version (known when read for a stream; a
    /// history keeps dismissals in its layers instead).
    public var dismissed: [Int64]
    /// The broadcasts the user marked seen in this version (as ``dismissed``).
    public var seenBroadcasts: [Int64]
    /// The user's muted nodes after this version, when it changed them (known when read for a
    /// stream); nil when it did not.
    public var mutes: [MutedNode]?

    /// A logged change of a user's own layer.
    public init(
        version: Int64, broadcastVersion: Int64, nodes: [Node], dismissed: [Int64] = [], seenBroadcasts: [Int64] = [],
        mutes: [MutedNode]? = nil
    ) {
        self.version = version
        self.broadcastVersion = broadcastVersion
        self.nodes = nodes
        self.dismissed = dismissed
        self.seenBroadcasts = seenBroadcasts
        self.mutes = mutes
    }
}

/// One logged version of the set of active broadcasts.
public struct BroadcastSetChange: Hashable, Sendable {
    /// The broadcast version after the change.
    public var version: Int64
    /// The broadcasts that became active.
    public var added: [BroadcastBadge]
    /// The broadcasts that stopped being active.
    public var withdrawn: [BroadcastBadge]

    /// A logged change of the set of active broadcasts.
    public init(version: Int64, added: [BroadcastBadge], withdrawn: [BroadcastBadge]) {
        self.version = version
        self.added = added
        self.withdrawn = withdrawn
    }
}

/// A user's current layers and the logged changes that led to them: enough to rebuild what the
/// user saw at any visible version the log still reaches.
public struct BadgeHistory: Sendable {
    /// What the user sees now.
    public var current: BadgeLayers
    /// The broadcast version at which the user's current own version was reached (nil: unknown,
    /// before the log began).
    public var reachedAt: Int64?
    /// Logged changes of the user's own layer, by own version.
    public var ownChanges: [Int64: OwnLayerChange]
    /// Logged changes of the set of active broadcasts, by broadcast version.
    public var broadcastChanges: [Int64: BroadcastSetChange]
    /// The user's muted nodes as of an own version from which `ownChanges` holds every later
    /// version (nil: unknown, the log no longer tells): what undoing the oldest logged change of
    /// the mutes goes back to.
    public var mutesBefore: (version: Int64, mutes: [MutedNode])?

    /// A history.
    public init(
        current: BadgeLayers, reachedAt: Int64?, ownChanges: [OwnLayerChange] = [], broadcastChanges: [BroadcastSetChange] = [],
        mutesBefore: (version: Int64, mutes: [MutedNode])? = (0, [])
    ) {
        self.current = current
        self.reachedAt = reachedAt
        self.mutesBefore = mutesBefore
        self.ownChanges = Dictionary(ownChanges.map { ($0.version, $0) }, uniquingKeysWith: { first, _ in first })
        self.broadcastChanges = Dictionary(broadcastChanges.map { ($0.version, $0) }, uniquingKeysWith: { first, _ in first })
    }

    /// The layers at every visible version from `since` to now, in order (the first at `since`,
    /// the last the current ones); nil when `since` is later than now, negative, older than the
    /// log reaches, or more than `limit` versions back.
    public func layers(since: Int64, limit: Int = .max) -> [BadgeLayers]? {
        var points: [BadgeLayers] = [current]
        guard walkBack(to: since, limit: limit, visit: { points.append($0) }) != nil else { return nil }
        return points.reversed()
    }

    /// The layers at visible version `version`; nil as for ``layers(since:limit:)``.
    public func layers(at version: Int64, limit: Int = .max) -> BadgeLayers? {
        walkBack(to: version, limit: limit, visit: { _ in })
    }

    /// The muted nodes as of the own version before `version`: those of the latest logged
    /// change of them before it, else ``mutesBefore`` when that is as of a version the log
    /// reaches from; nil when unknown.
    private func mutes(before version: Int64) -> [MutedNode]? {
        var earlier = version - 1
        while earlier > 0, let change = ownChanges[earlier] {
            if let mutes = change.mutes { return mutes }
            earlier -= 1
        }
        if earlier == 0 { return [] }
        guard let mutesBefore, mutesBefore.version >= earlier else { return nil }
        return mutesBefore.mutes
    }

    /// Undoes logged changes one version at a time, from now back to `target`, calling `visit`
    /// with each point passed (not the current one); returns the point at `target`.
    private func walkBack(to target: Int64, limit: Int, visit: (BadgeLayers) -> Void) -> BadgeLayers? {
        guard target >= 0, target <= current.version else { return nil }
        var point = current
        var ownReachedAt = reachedAt
        var steps = 0
        while point.version > target {
            guard steps < limit else { return nil }
            steps += 1
            // The last step into `point` moved the own version if that version was reached at
            // the point's broadcast version, else it moved the broadcast version.
            if point.userVersion > 0, ownReachedAt == point.broadcastVersion {
                guard let change = ownChanges[point.userVersion] else { return nil }
                for node in change.nodes {
                    point.aggregates[node.path] = node.before
                }
                let undone = point.userVersion
                if change.mutes != nil {
                    guard let before = mutes(before: undone) else { return nil }
                    point.mutes = before
                }
                point.dismissals = point.dismissals.filter { $0.value < undone }
                point.seens = point.seens.filter { $0.value < undone }
                point.userVersion -= 1
                // The version before was reached at the broadcast version of its own record
                // (unknown once that record is gone: then no step further back is certain).
                ownReachedAt = point.userVersion == 0 ? nil : ownChanges[point.userVersion]?.broadcastVersion
                if point.userVersion > 0, ownReachedAt == nil, point.version > target { return nil }
            } else {
                guard point.broadcastVersion > 0, let change = broadcastChanges[point.broadcastVersion] else { return nil }
                // An own version reached after this broadcast version: the log is not a path.
                if let ownReachedAt, ownReachedAt > point.broadcastVersion { return nil }
                for broadcast in change.added { point.broadcasts[broadcast.id] = nil }
                for broadcast in change.withdrawn { point.broadcasts[broadcast.id] = broadcast }
                point.broadcastVersion -= 1
            }
            visit(point)
        }
        return point
    }
}
