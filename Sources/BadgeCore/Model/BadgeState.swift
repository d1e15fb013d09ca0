public import Foundation

/// A node's own state. A node without state is absent: not shown, and contributing nothing to
/// its ancestors. An expired state counts as absent.
public struct BadgeState: Hashable, Sendable {
    /// The own count, ≥ 0; 0 is a dot.
    public var count: Int64
    /// The own icon, if any; icons are not inherited by ancestors.
    public var icon: BadgeIcon?
    /// When the state disappears; `nil` for never.
    public var expiresAt: Date?
    /// How much of ``count`` the user has seen (0…count): the rest is `unseen`.
    public var seenCount: Int64

    /// A state with the given count, icon, expiry and seen part.
    public init(count: Int64, icon: BadgeIcon? = nil, expiresAt: Date? = nil, seenCount: Int64 = 0) {
        self.count = count
        self.icon = icon
        self.expiresAt = expiresAt
        self.seenCount = seenCount
    }

    /// What the user has not seen of the count.
    public var unseen: Int64 { max(count - min(max(seenCount, 0), count), 0) }

    /// Whether the state has expired at `now` (`expiresAt <= now`).
    public func isExpired(at now: Date) -> Bool {
        guard let expiresAt else { return false }
        return expiresAt <= now
    }
}
