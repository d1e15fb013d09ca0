public import Foundation

/// A user's mute of one subtree, or the unmute that ended it (DESIGN §2, Mute and snooze).
///
/// A muted node keeps its own count and unseen, counted as its mode says, but gives its
/// ancestors nothing: no number, no unseen and no dot, so a muted chat does not light the tab or
/// the app icon. A snooze is a mute with an end (`until`): from then on the node counts in its
/// ancestors again, and what arrived meanwhile shows there as unseen.
///
/// Mutes and unmutes of one node are kept by their time, not by their arrival: the one with the
/// latest ``occurredAt`` holds (``supersedes(_:)``), so any arrival order ends the same.
public struct BadgeMute: Hashable, Sendable {
    /// True for a mute or snooze, false for an unmute (kept so that an older mute arriving late
    /// changes nothing).
    public var muted: Bool
    /// When a snooze ends; nil for a mute until unmuted (and for an unmute).
    public var until: Date?
    /// When the mute or unmute happened, to the microsecond.
    public var occurredAt: Date

    /// A mute (or, with `muted` false, an unmute) of `occurredAt`, ending at `until`. Times are
    /// kept to the microsecond, as the store keeps them.
    public init(muted: Bool, until: Date?, occurredAt: Date) {
        self.muted = muted
        self.until = muted ? until?.toMicroseconds : nil
        self.occurredAt = occurredAt.toMicroseconds
    }

    /// Whether the node is muted at `now`: a mute without an end, or a snooze whose end is later.
    public func isActive(at now: Date) -> Bool {
        guard muted else { return false }
        guard let until else { return true }
        return until > now
    }

    /// Whether this one holds over `other` of the same node: the later time wins; at one time an
    /// unmute wins over a mute, and of two mutes the one that lasts longer (no end is longest).
    /// The store's upsert uses the same order (`BadgeSQL.storeMutes`).
    public func supersedes(_ other: BadgeMute) -> Bool {
        if occurredAt != other.occurredAt { return occurredAt > other.occurredAt }
        if muted != other.muted { return !muted }
        switch (until, other.until) {
        case (nil, nil): return false
        case (nil, _?): return true
        case (_?, nil): return false
        case (let mine?, let theirs?): return mine > theirs
        }
    }
}
