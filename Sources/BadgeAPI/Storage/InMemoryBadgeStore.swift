public import BadgeCore
public import BadgeStore
import Foundation
import Synchronization

/// Users' badges in memory, under the rules of BadgeCore's reference model (``BadgeTree``): the
/// query service without a database, for route tests and demonstrations.
///
/// It keeps the store's contract for what the API sees: a user's version grows by one with
/// every write that changes what the user sees (as the store's recompute does), a user exists
/// once anything was written for them, and every change wakes the change hub it was given.
/// Broadcasts are not modelled: every user's broadcast version is 0.
public final class InMemoryBadgeStore: BadgeAPIStore, Sendable {
    private struct UserBadges {
        var tree = BadgeTree()
        var version: Int64 = 0
        /// The aggregates at each of the latest versions (the change log of this store).
        var history: [Int64: [BadgePath: BadgeAggregate]] = [0: [:]]
        /// The ids of the actions applied (kept for good here).
        var actions: Set<ActionID> = []
    }

    /// How many versions of each user ``history(for:since:stepwise:limit:deadline:)`` reaches back.
    public static let historyVersions: Int64 = 1_000

    private let users = Mutex<[UserID: UserBadges]>([:])
    /// Webhook subscriptions by id (no deliveries: nothing here follows a feed).
    private let hooks = Mutex<[String: WebhookSubscription]>([:])
    /// Push devices by user and id (nothing here pushes).
    private let devices = Mutex<[UserID: [String: PushDevice]]>([:])
    /// Told of every change, as PostgreSQL's notifications tell the production hub.
    private let hub: ChangeHub?
    /// How ``tree(for:at:depth:)`` displays counts.
    public let display: BadgeDisplay

    /// An empty store that feeds `hub` (a hub made without a database) with its changes.
    public init(hub: ChangeHub? = nil, display: BadgeDisplay = BadgeDisplay()) {
        self.hub = hub
        self.display = display
    }

    /// Applies `mutations` in order and makes them visible at once (the store's
    /// `apply(_:recomputeNow: true)`; `recomputeNow` is accepted for the same call shape).
    ///
    /// - Returns: the new version of every user whose visible tree changed.
    @discardableResult
    public func apply(_ mutations: [BadgeMutation], recomputeNow: Bool = true) -> [UserID: Int64] {
        let now = Date()
        let changed = users.withLock { users -> [UserID: Int64] in
            var before: [UserID: ([BadgePath: BadgeAggregate], [MutedNode])] = [:]
            for mutation in mutations where before[mutation.user] == nil {
                let badges = users[mutation.user] ?? UserBadges()
                users[mutation.user] = badges
                before[mutation.user] = (badges.tree.aggregates(now: now), badges.tree.mutedNodes(at: now))
            }
            for mutation in BadgeBatch.timed(mutations, readAt: now) {
                users[mutation.user]?.tree.apply(mutation, now: now)
            }
            var versions: [UserID: Int64] = [:]
            for (user, (aggregates, mutes)) in before {
                guard var badges = users[user] else { continue }
                let after = badges.tree.aggregates(now: now)
                guard after != aggregates || badges.tree.mutedNodes(at: now) != mutes else { continue }
                badges.version += 1
                badges.history[badges.version] = after
                badges.history[badges.version - Self.historyVersions] = nil
                users[user] = badges
                versions[user] = badges.version
            }
            return versions
        }
        for user in changed.keys { hub?.userChanged(user) }
        return changed
    }

    /// One user's tree (or the subtree at `path`, down to `depth`) in the answer shape; the call
    /// shape of `BadgeStore`'s, though it never suspends nor throws.
    public func tree(for user: UserID, at path: BadgePath = .root, depth: Int? = nil) async throws -> UserBadgeTree {
        let (version, aggregates, mutes) = read(user, within: path, depth: depth)
        return UserBadgeTree(user: user, version: version, aggregates: aggregates, at: path, depth: depth, display: display, mutes: mutes)
    }

    /// The aggregates within `path` down to `depth` levels below it, and the muted nodes that
    /// concern it, as the store's read statement selects them.
    private func read(
        _ user: UserID, within path: BadgePath, depth: Int?
    ) -> (version: Int64, aggregates: [BadgePath: BadgeAggregate], mutes: [MutedNode]) {
        let badges = users.withLock { $0[user] } ?? UserBadges()
        let deepest = path.depth + min(max(depth ?? BadgePath.maximumDepth, 0), BadgePath.maximumDepth)
        let now = Date()
        let aggregates = badges.tree.aggregates(now: now).filter { $0.key.isWithin(path) && $0.key.depth <= deepest }
        return (badges.version, aggregates, badges.tree.mutedNodes(at: now).filter { $0.concerns(path) })
    }

    /// Answers at once; `deadline` is never reached. No broadcasts.
    public func readView(
        for user: UserID, within path: BadgePath, depth: Int?, floor: ReadFloor, deadline: ContinuousClock.Instant
    ) async throws -> UserView {
        let (version, aggregates, mutes) = read(user, within: path, depth: depth)
        return UserView(
            path: path, depth: depth, userVersion: version, broadcastVersion: 0, aggregates: aggregates, broadcasts: [:], dismissed: [],
            mutes: mutes)
    }

    /// No broadcasts: version 0, none active.
    public func broadcastSet(deadline: ContinuousClock.Instant) async throws -> BroadcastSet {
        BroadcastSet(version: 0, active: [:])
    }

    /// No broadcasts: no changes.
    public func broadcastChanges(after: Int64, through: Int64, deadline: ContinuousClock.Instant) async throws -> [BroadcastSetChange] {
        []
    }

    /// Nil: this store keeps no change log of nodes, so streams over it read the tree.
    public func ownChanges(for user: UserID, after: Int64, limit: Int, deadline: ContinuousClock.Instant) async throws -> [OwnLayerChange]? {
        nil
    }

    /// The aggregates recorded at each version from `since` (the latest ``historyVersions``
    /// versions are kept).
    public func history(
        for user: UserID, since: Int64, stepwise: Bool, limit: Int, floor: ReadFloor, deadline: ContinuousClock.Instant
    ) async throws -> [HistoryPoint]? {
        let badges = users.withLock { $0[user] } ?? UserBadges()
        guard since >= 0, since <= badges.version, badges.version - since <= Int64(clamping: limit) else { return nil }
        var answer: [HistoryPoint] = []
        for version in since...badges.version where stepwise || version == since || version == badges.version {
            guard let aggregates = badges.history[version] else { return nil }
            answer.append(HistoryPoint(version: version, aggregates: aggregates))
        }
        return answer
    }

    /// Whether anything was ever applied for `user`.
    public func userExists(_ user: UserID, deadline: ContinuousClock.Instant) async throws -> Bool {
        users.withLock { $0[user] != nil }
    }

    /// Applies the clear or the seen (see ``apply(_:recomputeNow:)``); with `seenVersion`, only
    /// when it is not later than the user's version (for route tests: it then acts on
    /// everything, where the store acts on what showed in that version); with `actionID`, only
    /// once per id. The checks and the action are separate steps here, one transaction in the
    /// store.
    public func act(
        _ operation: BadgeOperation, at path: BadgePath, for user: UserID, seenVersion: Int64?, actionID: ActionID?,
        deadline: ContinuousClock.Instant
    ) async throws -> ActionOutcome {
        if let actionID, users.withLock({ $0[user]?.actions.contains(actionID) ?? false }) { return .repeated }
        if let seenVersion {
            let current = users.withLock { $0[user]?.version ?? 0 }
            guard seenVersion <= current else { return .changedSince(current: current) }
        }
        let outcome = ActionOutcome.applied(apply([BadgeMutation(user: user, path: path, operation: operation)])[user])
        if let actionID { _ = users.withLock { $0[user, default: UserBadges()].actions.insert(actionID) } }
        return outcome
    }

    /// The user's id and version (for route tests: the store exports every table).
    public func exportUser(_ user: UserID, deadline: ContinuousClock.Instant) async throws -> String {
        struct Export: Encodable {
            var user: String
            var tables: [String: [[String: Int64]]]
            var deadLetters: [Int] = []
            enum CodingKeys: String, CodingKey { case user, tables, deadLetters = "dead_letters" }
        }
        let version = users.withLock { $0[user]?.version ?? 0 }
        let export = Export(user: user.rawValue, tables: ["user_version": [["version": version]]])
        return String(decoding: try JSONEncoder().encode(export), as: UTF8.self)
    }

    /// Forgets the user.
    public func eraseUser(_ user: UserID, deadline: ContinuousClock.Instant) async throws -> UserData.Erasure {
        let removed = users.withLock { $0.removeValue(forKey: user) != nil }
        return UserData.Erasure(user: user.rawValue, rows: removed ? ["user_version": 1] : [:], deadLetters: 0, settled: true)
    }

    public func webhooks(deadline: ContinuousClock.Instant) async throws -> [WebhookSubscription] {
        hooks.withLock { $0.values.sorted { $0.id < $1.id } }
    }

    public func putWebhook(_ subscription: WebhookSubscription, deadline: ContinuousClock.Instant) async throws -> Bool {
        hooks.withLock { $0.updateValue(subscription, forKey: subscription.id) == nil }
    }

    public func removeWebhook(_ id: String, deadline: ContinuousClock.Instant) async throws -> Bool {
        hooks.withLock { $0.removeValue(forKey: id) != nil }
    }

    public func registerDevice(_ device: PushDevice, for user: UserID, deadline: ContinuousClock.Instant) async throws -> Bool {
        devices.withLock { $0[user, default: [:]].updateValue(device, forKey: device.id) == nil }
    }

    public func removeDevice(_ id: String, of user: UserID, deadline: ContinuousClock.Instant) async throws -> Bool {
        devices.withLock { $0[user]?.removeValue(forKey: id) != nil }
    }

    /// Nothing is ever dead here.
    public func replayWebhook(_ id: String, deadline: ContinuousClock.Instant) async throws -> Int { 0 }

    /// Always ready.
    public func readinessProblems(deadline: ContinuousClock.Instant) async -> [String] { [] }
}
