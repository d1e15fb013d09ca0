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

/// A node muted at a version, as answers list it: the path, and when its snooze ends (nil: a
/// mute until unmuted).
public struct MutedNode: Hashable, Sendable, Codable {
    /// The muted node.
    public var path: BadgePath
    /// When the snooze ends; nil for none.
    public var until: Date?

    /// A muted node.
    public init(path: BadgePath, until: Date?) {
        self.path = path
        self.until = until
    }

    enum CodingKeys: String, CodingKey { case path, until }

    /// Reads `{"path": …, "until": RFC 3339 time or null}`.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        path = try container.decode(BadgePath.self, forKey: .path)
        guard let text = try container.decodeIfPresent(String.self, forKey: .until) else {
            until = nil
            return
        }
        guard let date = Date(rfc3339: text) else {
            throw DecodingError.dataCorruptedError(forKey: .until, in: container, debugDescription: "until is not an RFC 3339 time")
        }
        until = date
    }

    /// Writes `{"path": …, "until": RFC 3339 time or null}`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(path, forKey: .path)
        try container.encode(until?.rfc3339, forKey: .until)
    }

    /// Whether the mute concerns the subtree at `path`: it is within it, or mutes it from above.
    public func concerns(_ path: BadgePath) -> Bool {
        self.path.isWithin(path) || path.isWithin(self.path)
    }

    /// The muted nodes of a version, read from the change log's JSON (`badge_change.mutes`): an
    /// array of `[path, until]`, until in microseconds since 1970 or null. Safe on any text.
    ///
    /// - Throws: ``ChangeLogFormatError`` for anything else.
    public static func decodeLog(_ text: String) throws(ChangeLogFormatError) -> [MutedNode] {
        var nodes: [MutedNode] = []
        for entry in try ChangeLogFormatError.array(text, of: "mutes") {
            guard case .array(let parts) = entry, parts.count == 2, case .string(let name) = parts[0],
                let path = try? BadgePath(validating: name)
            else { throw ChangeLogFormatError("a logged mute is not [path, until]") }
            switch parts[1] {
            case .null:
                nodes.append(MutedNode(path: path, until: nil))
            case .integer(let microseconds):
                nodes.append(MutedNode(path: path, until: Date(timeIntervalSince1970: Double(microseconds) / 1_000_000)))
            default:
                throw ChangeLogFormatError("the logged end of the mute of \(Quoting.quoted(name)) is not a time")
            }
        }
        return nodes
    }
}
