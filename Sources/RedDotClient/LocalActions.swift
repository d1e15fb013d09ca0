import Foundation

/// A clear, seen, mute or unmute the app asked for, shown at once and kept over the server's
/// tree until the tree the client holds includes it (read-your-writes). Until the server answers it, it is
/// kept in the offline cache too, with its id (`action_id`): a tap made offline is sent when
/// the server can be reached, also after the app restarted, and the server applies it once
/// however often it arrives.
///
/// What it takes away is fixed when it is made, from what the app showed: the counts and
/// unseen numbers of that moment. Applied to a newer tree, it takes away only those amounts,
/// so something that arrived after the tap stays, as it does on the server (the API's
/// `seen_version` rule).
struct PendingAction: Sendable {
    enum Kind: Sendable, Hashable {
        case clear(force: Bool)
        case seen
        case mute(until: Date?)
        case unmute

        /// Its name in the API's route and the offline cache.
        var name: String {
            switch self {
            case .clear: "clear"
            case .seen: "seen"
            case .mute: "mute"
            case .unmute: "unmute"
            }
        }
    }

    /// Where the action is on its way to the server.
    enum Delivery: Sendable, Hashable {
        /// A request carries it now.
        case sending
        /// It waits for the server to be reachable (the last attempt could not reach it).
        case queued
    }

    /// What one node loses: an amount of its count and of its unseen number, and whether it
    /// hides once nothing is left under it (a clear; a seen hides nothing).
    struct Loss: Sendable, Codable {
        var count: Int64
        var unseen: Int64
        var hides: Bool
    }

    /// The client's number of the action in this run.
    var id: UInt64
    let kind: Kind
    let path: String
    /// The version the app showed when it acted (sent as `seen_version`).
    let seenVersion: Int64
    /// The id the server knows the action by (`action_id`), the same in every attempt.
    let actionID: String
    let losses: [String: Loss]
    var delivery = Delivery.sending
    /// The server's answer: its version and the subtree at `path` as it is there.
    var answer: (version: Int64, nodes: [String: Badge])?

    init(id: UInt64, kind: Kind, path: String, shown: [String: Badge], version: Int64, actionID: String = UUID().uuidString) {
        self.id = id
        self.kind = kind
        self.path = path
        self.seenVersion = version
        self.actionID = actionID
        var losses: [String: Loss] = [:]
        let target = shown[path]
        // A node that does not show takes nothing from its ancestors.
        let ancestors = target == nil ? [] : Self.ancestors(of: path)
        switch kind {
        case .clear(force: true):
            for (node, badge) in shown where Self.isWithin(node, path) {
                losses[node] = Loss(count: badge.count, unseen: badge.unseen, hides: true)
            }
            for node in ancestors {
                losses[node] = Loss(count: target?.count ?? 0, unseen: target?.unseen ?? 0, hides: true)
            }
        case .clear(force: false):
            // The node's own part: its total less its children's.
            let children = shown.values.filter { Self.parent(of: $0.path) == path }
            let ownCount = Self.less(target?.count ?? 0, children.reduce(0) { Self.plus($0, $1.count) })
            let ownUnseen = Self.less(target?.unseen ?? 0, children.reduce(0) { Self.plus($0, $1.unseen) })
            losses[path] = Loss(count: ownCount, unseen: ownUnseen, hides: true)
            for node in ancestors { losses[node] = Loss(count: ownCount, unseen: ownUnseen, hides: true) }
        case .seen:
            for (node, badge) in shown where Self.isWithin(node, path) {
                losses[node] = Loss(count: 0, unseen: badge.unseen, hides: false)
            }
            for node in ancestors { losses[node] = Loss(count: 0, unseen: target?.unseen ?? 0, hides: false) }
        case .mute:
            // The node keeps its numbers; its ancestors stop counting them (a guess under a
            // mode other than sum, until the server answers).
            for node in ancestors { losses[node] = Loss(count: target?.count ?? 0, unseen: target?.unseen ?? 0, hides: true) }
        case .unmute:
            // What the ancestors get back shows with the server's answer.
            break
        }
        self.losses = losses
    }

    /// The action as the offline cache keeps it (without its answer).
    struct Stored: Codable {
        var actionID: String
        var kind: String
        var force: Bool
        var path: String
        var seenVersion: Int64
        var losses: [String: Loss]
        /// When a queued snooze ends (a mute only; absent in caches written before mutes queued).
        var until: Date?

        enum CodingKeys: String, CodingKey {
            case kind, force, path, losses, until
            case actionID = "action_id"
            case seenVersion = "seen_version"
        }
    }

    var stored: Stored {
        let force = if case .clear(force: true) = kind { true } else { false }
        let until: Date? = if case .mute(let until) = kind { until } else { nil }
        return Stored(
            actionID: actionID, kind: kind.name, force: force, path: path, seenVersion: seenVersion, losses: losses, until: until)
    }

    /// An action read back from the offline cache, queued; nil when it is not one this client
    /// writes.
    init?(_ stored: Stored, id: UInt64) {
        switch stored.kind {
        case "clear": kind = .clear(force: stored.force)
        case "seen": kind = .seen
        case "mute": kind = .mute(until: stored.until)
        case "unmute": kind = .unmute
        default: return nil
        }
        guard RedDotClient.pathProblem(stored.path) == nil, !stored.actionID.isEmpty else { return nil }
        self.id = id
        path = stored.path
        seenVersion = stored.seenVersion
        actionID = stored.actionID
        losses = stored.losses
        delivery = .queued
    }

    /// `nodes` (the shown ones) with this action applied.
    func apply(to nodes: [String: Badge]) -> [String: Badge] {
        var result = nodes
        if let answer {
            // The subtree as the server answered it; above it, the losses as guessed.
            for node in result.keys where Self.isWithin(node, path) { result[node] = nil }
            for (node, badge) in answer.nodes { result[node] = badge }
        }
        // Deepest first, so that a parent knows whether a child still shows.
        for (node, loss) in losses.sorted(by: { $0.key.count > $1.key.count }) {
            if answer != nil, Self.isWithin(node, path) { continue }
            guard var badge = result[node] else { continue }
            badge.count = Self.less(badge.count, loss.count)
            badge.unseen = Self.less(badge.unseen, loss.unseen)
            badge.text = Self.text(badge.count, was: badge.text)
            let childShows = result.keys.contains { Self.parent(of: $0) == node }
            // An ancestor with an icon shows by its own state (an icon is a node's own, never
            // its children's: DESIGN §2), which no action below it takes away.
            let ownIcon = badge.icon != nil && !Self.isWithin(node, path)
            if loss.hides, badge.count == 0, !childShows, !ownIcon {
                result[node] = nil
            } else {
                result[node] = badge
            }
        }
        return result
    }

    /// The number as shown for `count`, keeping the server's cap (`"99+"`) when `previous` had one.
    static func text(_ count: Int64, was previous: String?) -> String? {
        guard count > 0 else { return nil }
        if let previous, previous.hasSuffix("+"), let cap = Int64(previous.dropLast()), count > cap { return previous }
        return String(count)
    }

    // The numbers come from the server (or the cache file): no sum or difference may trap.

    /// `a - b`, at least 0, without overflow.
    static func less(_ a: Int64, _ b: Int64) -> Int64 {
        let (difference, overflow) = a.subtractingReportingOverflow(b)
        if overflow { return b < 0 ? .max : 0 }
        return max(0, difference)
    }

    /// `a + b`, saturating.
    static func plus(_ a: Int64, _ b: Int64) -> Int64 {
        let (sum, overflow) = a.addingReportingOverflow(b)
        if overflow { return b < 0 ? .min : .max }
        return sum
    }

    static func isWithin(_ node: String, _ path: String) -> Bool {
        node == path || (node.hasPrefix(path) && node.dropFirst(path.count).first == ".")
    }

    static func parent(of path: String) -> String? {
        path.lastIndex(of: ".").map { String(path[..<$0]) }
    }

    static func ancestors(of path: String) -> [String] {
        var result: [String] = []
        var current = path
        while let parent = parent(of: current) {
            result.append(parent)
            current = parent
        }
        return result
    }
}
