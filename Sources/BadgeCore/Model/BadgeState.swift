public import Foundation

/// A node's own counter state. A node without state is absent: not shown, and contributing
/// nothing to its ancestors. An expired state counts as absent.
///
/// The state holds what the node's latest set left (``count``, the icon and the expiry, and
/// ``setAt``, the time of that set); the increments and decrements of the node are kept apart,
/// each with its time (``BadgeTree/increments``), so that sets, clears and seens apply to them by
/// time, whatever order they arrive in.
public struct BadgeState: Hashable, Sendable {
    /// The count the latest set left (or a fold of old increments added), ≥ 0; the node's
    /// increments and decrements that occurred after it apply to it (``folded(_:)``).
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
    /// When the set that left the state occurred (nil: no set, or one stored before sets were
    /// timed): a set that occurred at or before it changes nothing, and neither does an increment
    /// or a decrement; a clear takes the state only when it occurred at or after it.
    public var setAt: Date?
    /// When the operation that gave ``expiresAt`` occurred (its set, or the latest increment that
    /// gave one; nil: none did, or before expiries were timed): an increment's expiry applies
    /// only when the increment occurred later, whatever order they arrive in.
    public var expiresFrom: Date?

    /// A state with the given count, icon, expiry and seen part.
    public init(
        count: Int64, icon: BadgeIcon? = nil, expiresAt: Date? = nil, seenCount: Int64 = 0, keepsDot: Bool = true, shownIn: Int64 = 0,
        setAt: Date? = nil, expiresFrom: Date? = nil
    ) {
        self.count = count
        self.icon = icon
        self.expiresAt = expiresAt
        self.seenCount = seenCount
        self.keepsDot = keepsDot
        self.shownIn = shownIn
        self.setAt = setAt
        self.expiresFrom = expiresFrom
    }

    /// The state an increment makes on an absent node, and a clear leaves when later increments
    /// stay: count 0, no icon, nothing seen, shown only through its increments.
    public static func carrier(expiresAt: Date?, shownIn: Int64 = 0, setAt: Date? = nil, expiresFrom: Date? = nil) -> BadgeState {
        BadgeState(count: 0, expiresAt: expiresAt, keepsDot: false, shownIn: shownIn, setAt: setAt, expiresFrom: expiresAt == nil ? nil : expiresFrom)
    }

    /// Takes the expiry `expiresAt` that an increment at `time` gives, unless the current one was
    /// given later (at one time, the later expiry holds).
    mutating func takeExpiry(_ expiresAt: Date, givenAt time: Date) {
        if let from = expiresFrom, (from, self.expiresAt ?? .distantFuture) >= (time, expiresAt) { return }
        self.expiresAt = expiresAt
        expiresFrom = time
    }

    /// What the user has not seen of the count.
    public var unseen: Int64 { max(count - min(max(seenCount, 0), count), 0) }

    /// Whether the state has expired at `now` (`expiresAt <= now`).
    public func isExpired(at now: Date) -> Bool {
        guard let expiresAt else { return false }
        return expiresAt <= now
    }

    /// The counter with the node's increments and decrements (`amount` below 0), in the order
    /// they occurred, each seen or not: each increment adds its amount (to `unseen` too when not
    /// seen); a decrement by k that meets a count of k or less leaves nothing (count and unseen 0,
    /// no dot: a decrement never leaves a stuck dot, and what follows starts from 0), else it
    /// takes k from the count and, when not seen, from the unseen part first (a seen decrement
    /// keeps the unseen part within the count). The store computes the same (`badge_fold`).
    /// `icon` is false once a decrement left nothing: the state's icon goes with it.
    public func folded(
        _ contributions: some Sequence<(amount: Int64, seen: Bool)>
    ) -> (count: Int64, unseen: Int64, dot: Bool, icon: Bool) {
        var count = max(self.count, 0)
        var unseen = self.unseen
        var dot = keepsDot
        var icon = true
        for (amount, seen) in contributions {
            guard amount < 0 else {
                count.addSaturating(amount)
                if !seen { unseen.addSaturating(amount) }
                continue
            }
            let taken = amount == .min ? Int64.max : -amount
            if count <= taken {
                (count, unseen, dot, icon) = (0, 0, false, false)
            } else {
                count -= taken
                unseen = seen ? min(unseen, count) : max(unseen - taken, 0)
            }
        }
        return (count, unseen, dot, icon)
    }
}
