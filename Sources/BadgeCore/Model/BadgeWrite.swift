public import Foundation

/// The net effect of a batch on one node's own state, as the store writes it (see ``BadgeBatch``).
public enum BadgeWrite: Hashable, Sendable {
    /// Replaces the own state.
    case set(count: Int64, icon: BadgeIcon?, expiresAt: Date?)
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
    public func applied(to state: BadgeState?, now: Date) -> BadgeState? {
        switch self {
        case .set(let count, let icon, let expiresAt):
            return BadgeState(count: max(count, 0), icon: icon, expiresAt: expiresAt)
        case .increment(let by, let expiresAt):
            let by = max(by, 0)
            guard let state, !state.isExpired(at: now) else {
                return BadgeState(count: by, icon: nil, expiresAt: expiresAt)
            }
            return BadgeState(
                count: state.count.addingSaturating(by), icon: state.icon,
                expiresAt: expiresAt ?? state.expiresAt)
        case .decrement(let by):
            guard let state, !state.isExpired(at: now) else { return nil }
            let left = state.count - min(max(by, 0), state.count)
            guard left > 0 else { return nil }
            return BadgeState(count: left, icon: state.icon, expiresAt: state.expiresAt)
        case .clear:
            return nil
        }
    }
}
