public import Foundation

/// An in-memory model of one user's badges: the own state of each node, and the aggregates
/// derived from it (DESIGN §2).
///
/// It is the reference model of the rules: the store computes the same aggregates in SQL, and
/// the property tests compare the two.
public struct BadgeTree: Sendable, Equatable {
    /// The own state of each node that has one (expired states stay until overwritten or cleared,
    /// but count as absent).
    public private(set) var states: [BadgePath: BadgeState]

    /// An empty tree.
    public init() {
        self.states = [:]
    }

    /// A tree holding the given own states.
    public init(states: [BadgePath: BadgeState]) {
        self.states = states
    }

    /// Applies one operation to the node at `path`.
    ///
    /// - Parameters:
    ///   - expiresAt: the expiry of what a set or increment shows (see ``BadgeMutation``).
    ///   - now: the instant the operation takes effect; a state expired at `now` counts as absent.
    public mutating func apply(_ operation: BadgeOperation, at path: BadgePath, expiresAt: Date? = nil, now: Date) {
        if case .clear(force: true) = operation {
            removeSubtree(at: path)
            return
        }
        states[path] = operation.applied(to: states[path], expiresAt: expiresAt, now: now)
    }

    /// Applies one write of a coalesced batch to the node at `path`.
    public mutating func apply(_ write: BadgeWrite, at path: BadgePath, now: Date) {
        states[path] = write.applied(to: states[path], now: now)
    }

    /// Removes the own state of `path` and of every descendant (a forced clear).
    public mutating func removeSubtree(at path: BadgePath) {
        states = states.filter { !$0.key.isWithin(path) }
    }

    /// The aggregate of every shown node, ancestors included; expired own states are ignored.
    ///
    /// A node's count is its own count plus its children's (saturating at `Int64.max`); it is
    /// shown when it has an own state or a shown child; its icon is its own.
    public func aggregates(now: Date) -> [BadgePath: BadgeAggregate] {
        var result: [BadgePath: BadgeAggregate] = [:]
        for (path, state) in states where !state.isExpired(at: now) {
            let count = max(state.count, 0)
            result[path, default: BadgeAggregate(count: 0)].count.addSaturating(count)
            result[path]?.icon = state.icon
            var ancestor = path.parent
            while let current = ancestor {
                result[current, default: BadgeAggregate(count: 0)].count.addSaturating(count)
                ancestor = current.parent
            }
        }
        return result
    }

    /// The node at `path` as answers show it, or nil when nothing is shown there (`root` always
    /// answers; see ``BadgeNode/build(aggregates:at:depth:display:)``).
    public func node(
        at path: BadgePath, depth: Int? = nil, now: Date, display: BadgeDisplay = BadgeDisplay()
    ) -> BadgeNode? {
        BadgeNode.build(aggregates: aggregates(now: now), at: path, depth: depth, display: display)
    }
}

extension Int64 {
    /// Adds a non-negative number, stopping at `Int64.max`.
    mutating func addSaturating(_ other: Int64) {
        self = addingSaturating(other)
    }
}
