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
    /// Adds broadcasts to one user's aggregates, as if each were own state of its own: its count
    /// goes to its node and to every ancestor (saturating), and to their unseen numbers unless
    /// the user saw it (`seen`), each of them is shown, and its icon shows at its node when the
    /// user's own state there has no icon (the latest broadcast's icon when several have one).
    ///
    /// - Parameters:
    ///   - seen: the ids of the broadcasts the user marked seen.
    ///   - aggregates: the user's aggregates, possibly only those within `path` and down to
    ///     `maximumDepth` (as the store reads them).
    ///   - path: nodes above it are left out.
    ///   - maximumDepth: nodes deeper than this ``BadgePath/depth`` are left out (nil: none).
    public static func merge(
        _ broadcasts: [BroadcastBadge], seen: Set<Int64> = [], into aggregates: inout [BadgePath: BadgeAggregate],
        within path: BadgePath = .root, maximumDepth: Int? = nil
    ) {
        guard !broadcasts.isEmpty else { return }
        let ownIcons = aggregates.mapValues(\.icon)
        for broadcast in broadcasts.sorted(by: { $0.id < $1.id }) where broadcast.path.isWithin(path) {
            for node in broadcast.path.ancestors + [broadcast.path] where node.depth >= path.depth {
                if let maximumDepth, node.depth > maximumDepth { continue }
                var aggregate = aggregates[node] ?? BadgeAggregate(count: 0)
                aggregate.count = aggregate.count.addingSaturating(broadcast.count)
                // A broadcast counts as unseen until the user sees or clears it.
                if !seen.contains(broadcast.id) { aggregate.unseen = aggregate.unseen.addingSaturating(broadcast.count) }
                if node == broadcast.path, (ownIcons[node] ?? nil) == nil, let icon = broadcast.icon {
                    aggregate.icon = icon
                }
                aggregates[node] = aggregate
            }
        }
    }
}
