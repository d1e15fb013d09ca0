public import Foundation

/// A broadcast badge ("audience": "all") as a user sees it: stored once, shown in every user's
/// tree until that user dismisses it (DESIGN §2).
public struct BroadcastBadge: Hashable, Sendable {
    /// The stored broadcast's id; later broadcasts have larger ids.
    public var id: Int64
    /// Where it shows.
    public var path: BadgePath
    /// Its count (0: a dot).
    public var count: Int64
    /// Its icon, shown where the user's own state has none.
    public var icon: BadgeIcon?

    /// A broadcast with the given fields.
    public init(id: Int64, path: BadgePath, count: Int64, icon: BadgeIcon? = nil) {
        self.id = id
        self.path = path
        self.count = max(count, 0)
        self.icon = icon
    }
}

extension BroadcastBadge {
    /// Whether a user's clear or seen of `path` reaches, for that user, a broadcast at
    /// `broadcastPath` that was stored at `storedAt` and first shown in broadcast version
    /// `shownIn`: a clear then dismisses it, a seen marks it seen (DESIGN §2, broadcasts under
    /// the time and version rules of the user's own badges):
    ///
    /// - it is at `path`, or, for a forced clear or a seen (`subtree`), within it;
    /// - when the action carries its time (`occurred_at`, `actedAt`), it was stored at or before
    ///   it (an action applies to what occurred up to its time; a broadcast counts from when it
    ///   is stored, by the database's clock); without one, every broadcast stored when it applies;
    /// - for an action at a version the client rendered, it showed in that version: `shownIn` at
    ///   or below `shownThrough`, the broadcast version the rendered version certainly
    ///   included (the rendered version less the user's own version now: less when the user's
    ///   own tree moved since, which takes less, never more).
    public static func isReached(
        at broadcastPath: BadgePath, storedAt: Date, shownIn: Int64,
        byActionAt path: BadgePath, subtree: Bool, actedAt: Date?, shownThrough: Int64?
    ) -> Bool {
        guard broadcastPath == path || (subtree && broadcastPath.isWithin(path)) else { return false }
        if let actedAt, storedAt > actedAt { return false }
        if let shownThrough, shownIn > shownThrough { return false }
        return true
    }
}

extension BadgeAggregate {
    /// Adds broadcasts to one user's aggregates as if each were own state of its node, counted
    /// under the user's modes and mutes (DESIGN §2, Broadcasts): the result equals
    /// ``AggregationModes/aggregate(own:muted:)`` of the user's own counts with the broadcasts'
    /// added to them. A broadcast's count goes to its node as its mode counts an own count, and
    /// up from there as each node passes to its parent (`dot` and `exclude` pass only a dot,
    /// `children` counts a child that was not shown before, a muted node passes nothing), and
    /// to the unseen numbers unless the user saw it (`seen`); its icon shows at its node when the
    /// user's own state there has no icon (the latest broadcast's icon when several have one).
    ///
    /// Each step needs the node's aggregate before the broadcast, so `aggregates` must hold every
    /// node of each broadcast's chain (its node and its ancestors within `path`) that shows,
    /// also those deeper than `maximumDepth` (``UserView`` reads them).
    ///
    /// - Parameters:
    ///   - seen: the ids of the broadcasts the user marked seen.
    ///   - aggregates: the user's own aggregates within `path`, down to `maximumDepth` and along
    ///     the broadcasts' chains.
    ///   - path: nodes above it are left out.
    ///   - maximumDepth: nodes deeper than this ``BadgePath/depth`` are left out of the result
    ///     (nil: none).
    ///   - modes: the user's aggregation modes.
    ///   - muted: the user's muted nodes (at least those on the broadcasts' chains).
    public static func merge(
        _ broadcasts: [BroadcastBadge], seen: Set<Int64> = [], into aggregates: inout [BadgePath: BadgeAggregate],
        within path: BadgePath = .root, maximumDepth: Int? = nil, modes: AggregationModes = .none, muted: Set<BadgePath> = []
    ) {
        defer {
            if let maximumDepth { aggregates = aggregates.filter { $0.key.depth <= maximumDepth } }
        }
        guard !broadcasts.isEmpty else { return }
        let ownIcons = aggregates.mapValues(\.icon)
        for broadcast in broadcasts.sorted(by: { $0.id < $1.id }) where broadcast.path.isWithin(path) {
            var node = broadcast.path
            var before = aggregates[node]
            var after = before ?? BadgeAggregate(count: 0)
            switch modes.mode(of: node) {
            case .sum, .exclude:
                after.count.addSaturating(broadcast.count)
                // A broadcast counts as unseen until the user sees or clears it.
                if !seen.contains(broadcast.id) { after.unseen.addSaturating(broadcast.count) }
            case .children, .dot:
                break
            }
            if (ownIcons[node] ?? nil) == nil, let icon = broadcast.icon { after.icon = icon }
            aggregates[node] = after
            while !muted.contains(node), let parent = node.parent, parent.depth >= path.depth {
                let parentBefore = aggregates[parent]
                var parentAfter = parentBefore ?? BadgeAggregate(count: 0)
                let childMode = modes.mode(of: node)
                switch modes.mode(of: parent) {
                case .dot:
                    break
                case .children:
                    guard childMode != .exclude else { break }
                    if before == nil { parentAfter.count.addSaturating(1) }
                    if (before?.unseen ?? 0) == 0, after.unseen > 0 { parentAfter.unseen.addSaturating(1) }
                case .sum, .exclude:
                    guard childMode == .sum || childMode == .children else { break }
                    // A broadcast only adds: the child's numbers grew or stayed.
                    parentAfter.count.addSaturating(max(after.count - (before?.count ?? 0), 0))
                    parentAfter.unseen.addSaturating(max(after.unseen - (before?.unseen ?? 0), 0))
                }
                // A parent that showed and did not change changes nothing above it.
                if parentBefore == parentAfter { break }
                aggregates[parent] = parentAfter
                (node, before, after) = (parent, parentBefore, parentAfter)
            }
        }
    }
}
