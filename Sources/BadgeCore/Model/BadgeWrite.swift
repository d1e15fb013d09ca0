public import Foundation

/// The net effect of a batch round on one node's counter, as the store writes it (see
/// ``BadgeBatch``; the round's increments are kept apart, with their times).
public enum BadgeWrite: Hashable, Sendable {
    /// Replaces the counter: the node's increments go, and the state becomes this one. The seen
    /// part becomes the smaller of the stored one and `seenCap` (nil: `count`): a set that
    /// follows other operations of a batch carries what those left seen (0 after a clear).
    case set(count: Int64, icon: BadgeIcon?, expiresAt: Date?, seenCap: Int64? = nil)
    /// Relative to what is found when the write is applied: on an absent or expired state
    /// nothing (an expired state goes, with its increments); otherwise the count with the
    /// increments goes down by `by`, the latest increments first, then the set count, and the
    /// state goes when that leaves 0 or less.
    case decrement(by: Int64)
    /// Removes the counter: the increments that occurred up to `through` (all of them when nil)
    /// go, and the state goes too, unless later increments stay: then it becomes a
    /// ``BadgeState/carrier(expiresAt:)`` without expiry. An expired state goes with all its
    /// increments.
    case clear(through: Date?)
}
