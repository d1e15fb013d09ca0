public import Foundation

/// An operation on one node's own state (DESIGN §2).
///
/// Counts are meant to stay within `0...maximumCount` (and `by` within `1...maximumCount`); the
/// event decoder and the rules enforce that. Applied to a ``BadgeTree`` or coalesced in a
/// ``BadgeBatch``, a negative count is taken as 0 and a negative `by` as 0, so that the
/// arithmetic stays monotone and saturating.
public enum BadgeOperation: Hashable, Sendable {
    /// Shows the node with an absolute count (0 is a dot) as of the mutation's time: the
    /// increments and decrements that occurred up to it go, later ones apply to it, the icon
    /// becomes `icon` (nil when not given) and the expiry the mutation's. Of two sets the
    /// later-timed holds, and a clear takes a set only when the set occurred at or before it
    /// (see ``BadgeTree``), whatever order they arrive in.
    case set(count: Int64, icon: BadgeIcon?)
    /// Adds `by` to the node's count, as an increment that occurred at the mutation's time
    /// (saturating at `Int64.max`); the icon is kept. On a node without (unexpired) state the
    /// count becomes `by` with no icon. An increment that occurred at or before a clear of the
    /// node counts for nothing, whichever arrives first (see ``BadgeTree``).
    case increment(by: Int64)
    /// Lowers the count by `by`, as a negative increment at the mutation's time: it takes from
    /// what occurred before it, whatever order they arrive in. When it meets a count of `by` or
    /// less, nothing of the counter shows (its number, dot and icon go, unless items hold the
    /// node) and what follows starts from 0: a decrement never makes a dot.
    case decrement(by: Int64)
    /// Removes the node's counter (what sets left, and the increments and items that occurred
    /// up to the clear); with `force`, the same for the node and its whole subtree. Clearing
    /// what is not set is a no-op.
    case clear(force: Bool)
    /// Adds a live item to the node: it counts once however often it is added, never after a
    /// remove of the same item (whatever the order they arrive in), and not when it occurred at
    /// or before a clear of the node (see ``BadgeTree``).
    case addItem(ItemID)
    /// Removes an item from the node for good: an add of the same item arriving later does not
    /// bring it back. Removing an item that is not there changes nothing visible.
    case removeItem(ItemID)
    /// Marks the node and its whole subtree seen: their counters' counts and their items that
    /// occurred up to then stop counting as `unseen`; nothing is cleared.
    case seen
    /// Mutes the node's subtree for its user: the node keeps its own count and unseen but gives
    /// its ancestors nothing (no number, no unseen, no dot) until `until` (a snooze; nil: until
    /// unmuted). Mutes and unmutes of a node apply by their time, whatever order they arrive in
    /// (see ``BadgeMute``). Not at `root`.
    case mute(until: Date?)
    /// Ends a mute or snooze of the node (by time, as ``mute(until:)``).
    case unmute

    /// The largest `count` of a set and `by` of an increment accepted from events and rules.
    public static let maximumCount: Int64 = 1_000_000_000

    /// Whether the numbers are within the limits accepted from events: `set` count in
    /// `0...maximumCount`, `increment` and `decrement` by in `1...maximumCount`.
    public var isWithinLimits: Bool {
        switch self {
        case .set(let count, _): return OperationGrammar.countRange.contains(count)
        case .increment(let by), .decrement(let by): return OperationGrammar.byRange.contains(by)
        case .clear, .addItem, .removeItem, .seen, .mute, .unmute: return true
        }
    }

    /// Whether the operation acts on items (`add`, `remove`) rather than on the counter.
    public var isItemOperation: Bool {
        switch self {
        case .addItem, .removeItem: return true
        case .set, .increment, .decrement, .clear, .seen, .mute, .unmute: return false
        }
    }

    /// Whether the operation mutes or unmutes rather than changing counts.
    public var isMuteOperation: Bool {
        switch self {
        case .mute, .unmute: return true
        case .set, .increment, .decrement, .clear, .addItem, .removeItem, .seen: return false
        }
    }

    /// Why the operation cannot apply at `path`, or nil: `root` cannot be muted (its count is
    /// the app-icon total; mute the subtrees below it).
    public func pathProblem(_ path: BadgePath) -> String? {
        guard isMuteOperation, path == .root else { return nil }
        return "path 'root' cannot be muted or unmuted; mute a subtree below it, such as 'root.chat'"
    }
}

extension Int64 {
    /// `self + other` for non-negative numbers, stopping at `Int64.max` instead of overflowing.
    func addingSaturating(_ other: Int64) -> Int64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? (other > 0 ? .max : .min) : sum
    }
}
