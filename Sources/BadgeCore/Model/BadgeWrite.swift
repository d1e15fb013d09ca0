public import Foundation

/// The net effect of a batch on one node's own state, as the store writes it (see ``BadgeBatch``).
public enum BadgeWrite: Hashable, Sendable {
    /// Replaces the own state. The seen part becomes the smaller of the stored one and
    /// `seenCap` (nil: `count`): a set that follows other operations of a batch carries what
    /// those left seen (0 after a clear, the count of the first set before an increment).
    case set(count: Int64, icon: BadgeIcon?, expiresAt: Date?, seenCap: Int64? = nil)
    /// Relative to the state found when the write is applied: on an absent or expired state the
    /// count becomes `by` (no icon, expiry `expiresAt`); otherwise count += `by`, saturating at
    /// `Int64.max`, the icon kept and the expiry replaced when `expiresAt` is not nil.
    case increment(by: Int64, expiresAt: Date?)
    /// Relative to the state found when the write is applied: on an absent or expired state
    /// nothing; otherwise count −= `by`, and the state is removed when that leaves 0 or less.
    case decrement(by: Int64)
    /// Removes the own state.
    case clear

    /// The own state after this write, applied at `now` to `state`.
    ///
    /// The seen part (``BadgeState/seenCount``) follows: a set keeps what was seen up to its new
    /// count, an increment adds unseen count, a decrement takes from the seen part only what
    /// the new count no longer holds; an absent or expired state has seen nothing.
    public func applied(to state: BadgeState?, now: Date) -> BadgeState? {
        let live = state.flatMap { $0.isExpired(at: now) ? nil : $0 }
        switch self {
        case .set(let count, let icon, let expiresAt, let seenCap):
            let count = max(count, 0)
            let cap = min(max(seenCap ?? count, 0), count)
            return BadgeState(count: count, icon: icon, expiresAt: expiresAt, seenCount: min(live?.seenCount ?? 0, cap))
        case .increment(let by, let expiresAt):
            let by = max(by, 0)
            guard let live else {
                return BadgeState(count: by, icon: nil, expiresAt: expiresAt)
            }
            return BadgeState(
                count: live.count.addingSaturating(by), icon: live.icon,
                expiresAt: expiresAt ?? live.expiresAt, seenCount: live.seenCount)
        case .decrement(let by):
            guard let live else { return nil }
            let left = live.count - min(max(by, 0), live.count)
            guard left > 0 else { return nil }
            return BadgeState(count: left, icon: live.icon, expiresAt: live.expiresAt, seenCount: min(live.seenCount, left))
        case .clear:
            return nil
        }
    }
}
