public import Foundation

/// A set of one node as a batch keeps it: its count, icon and expiry, and when it occurred. Of
/// two sets of a node the one that occurred later holds, whatever order they arrive in
/// (``supersedes(_:)``).
public struct BadgeSet: Hashable, Sendable {
    /// The count (≥ 0; 0 is a dot).
    public var count: Int64
    /// The icon, if any.
    public var icon: BadgeIcon?
    /// When the state disappears; nil for never.
    public var expiresAt: Date?
    /// When the set occurred (to the microsecond).
    public var at: Date

    /// A set.
    public init(count: Int64, icon: BadgeIcon?, expiresAt: Date?, at: Date) {
        self.count = max(count, 0)
        self.icon = icon
        self.expiresAt = expiresAt
        self.at = at.toMicroseconds
    }

    /// Whether this set holds over `other`: it occurred later, or at the same microsecond with
    /// the larger count, then icon, then expiry (none is the largest), so that the order they
    /// arrive in never matters. The store orders them the same way (`badges.set`).
    public func supersedes(_ other: BadgeSet) -> Bool {
        if at != other.at { return at > other.at }
        return (count, icon?.rawValue ?? "", expiresAt ?? .distantFuture) > (other.count, other.icon?.rawValue ?? "", other.expiresAt ?? .distantFuture)
    }

    /// Whether this set holds over a stored state's (``BadgeState/setAt``): any set holds over
    /// a state no set left, or left before sets were timed.
    public func supersedes(_ state: BadgeState) -> Bool {
        guard let setAt = state.setAt else { return true }
        return supersedes(BadgeSet(count: state.count, icon: state.icon, expiresAt: state.expiresAt, at: setAt))
    }
}
