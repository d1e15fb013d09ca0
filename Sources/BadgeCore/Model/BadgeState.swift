public import Foundation

/// A node's own counter state. A node without state is absent: not shown, and contributing
/// nothing to its ancestors. An expired state counts as absent.
///
/// The state holds what sets and decrements leave (``count``), the icon and the expiry; the
/// increments of the node are kept apart, each with its time (``BadgeTree/increments``), so that
/// clears and seens apply to them by time, whatever order they arrive in.
public struct BadgeState: Hashable, Sendable {
    /// The count sets and decrements left, ≥ 0; the node's increments add to it.
    public var count: Int64
    /// The own icon, if any; icons are not inherited by ancestors.
    public var icon: BadgeIcon?
    /// When the state disappears; `nil` for never.
    public var expiresAt: Date?
    /// How much of ``count`` the user has seen (0…count): the rest is `unseen`.
    public var seenCount: Int64
    /// Whether the node shows a dot even when its count (increments included) is 0: true for a
    /// set; false for a state that only carries increments (made by an increment, or left by a
    /// clear that kept later increments), which shows only while they add up to more than 0.
    public var keepsDot: Bool
    /// The first version of the user's tree the state can show in (see
    /// ``BadgeTree/nextVersion``); 0 for a state from before versions were kept.
    public var shownIn: Int64

    /// A state with the given count, icon, expiry and seen part.
    public init(
        count: Int64, icon: BadgeIcon? = nil, expiresAt: Date? = nil, seenCount: Int64 = 0, keepsDot: Bool = true, shownIn: Int64 = 0
    ) {
        self.count = count
        self.icon = icon
        self.expiresAt = expiresAt
        self.seenCount = seenCount
        self.keepsDot = keepsDot
        self.shownIn = shownIn
    }

    /// The state an increment makes on an absent node, and a clear leaves when later increments
    /// stay: count 0, no icon, nothing seen, shown only through its increments.
    public static func carrier(expiresAt: Date?, shownIn: Int64 = 0) -> BadgeState {
        BadgeState(count: 0, expiresAt: expiresAt, keepsDot: false, shownIn: shownIn)
    }

    /// What the user has not seen of the count.
    public var unseen: Int64 { max(count - min(max(seenCount, 0), count), 0) }

    /// Whether the state has expired at `now` (`expiresAt <= now`).
    public func isExpired(at now: Date) -> Bool {
        guard let expiresAt else { return false }
        return expiresAt <= now
    }
}
