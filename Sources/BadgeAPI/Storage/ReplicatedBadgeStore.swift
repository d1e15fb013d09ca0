public import BadgeCore
public import BadgeStore
import LibPQ
public import Logging
import Metrics

/// Reads from a read replica (a hot standby), writes to the primary, and never answers a
/// client with a tree older than one it has seen (DESIGN §6, "Read replicas").
///
/// - Tree reads, long-polls, delta polls, stream reads and the change log go to the replica.
/// - Actions (clear, seen, mute, unmute) go to the primary, and so does the read after one
///   (``ReadFloor/latest``).
/// - A read that must reach a version (``ReadFloor/version(_:)``: the client's `If-None-Match`,
///   `since` or `Last-Event-ID`, or a version this server wrote for the user) and finds the
///   replica below it is answered from the primary; so is a delta poll or stream resume whose
///   version the replica has not replayed yet (its log answers nil), and a user the replica does
///   not know yet.
/// - A replica that fails (unreachable, a statement cancelled by replay) is read around: the
///   primary answers, and `reddot_api_replica_fallbacks_total{reason="error"}` counts it.
public struct ReplicatedBadgeStore: BadgeAPIStore {
    /// Where writes, and reads the replica cannot answer, go.
    public let primary: any BadgeAPIStore
    /// Where reads go.
    public let replica: any BadgeAPIStore
    private let logger: Logger
    private let replicaReads = Counter(label: "reddot_api_replica_reads_total")
    private let behind = Counter(label: "reddot_api_replica_fallbacks_total", dimensions: [("reason", "behind")])
    private let failed = Counter(label: "reddot_api_replica_fallbacks_total", dimensions: [("reason", "error")])
    private let latest = Counter(label: "reddot_api_replica_fallbacks_total", dimensions: [("reason", "latest")])

    /// A store reading from `replica` and writing to `primary`.
    public init(primary: any BadgeAPIStore, replica: any BadgeAPIStore, logger: Logger) {
        self.primary = primary
        self.replica = replica
        self.logger = logger
    }

    /// True: the replica replays the primary's writes some time after they commit.
    public var readsMayLag: Bool { true }

    public func readView(
        for user: UserID, within path: BadgePath, depth: Int?, floor: ReadFloor, deadline: ContinuousClock.Instant
    ) async throws -> UserView {
        if floor == .latest {
            latest.increment()
            return try await primary.readView(for: user, within: path, depth: depth, floor: .latest, deadline: deadline)
        }
        let view = try await fromReplica(deadline) { deadline in
            try await replica.readView(for: user, within: path, depth: depth, floor: floor, deadline: deadline)
        }
        if let view, view.version >= floor.minimumVersion ?? 0 { return view }
        if view != nil { behind.increment() }
        return try await primary.readView(for: user, within: path, depth: depth, floor: floor, deadline: deadline)
    }

    public func broadcastSet(deadline: ContinuousClock.Instant) async throws -> BroadcastSet {
        if let set = try await fromReplica(deadline, { deadline in try await replica.broadcastSet(deadline: deadline) }) { return set }
        return try await primary.broadcastSet(deadline: deadline)
    }

    /// The replica's log, when it holds version `through` (the hub asks for what it was told of).
    public func broadcastChanges(after: Int64, through: Int64, deadline: ContinuousClock.Instant) async throws -> [BroadcastSetChange] {
        let changes = try await fromReplica(deadline) { deadline in
            try await replica.broadcastChanges(after: after, through: through, deadline: deadline)
        }
        if let changes, changes.last?.version ?? after >= through { return changes }
        if changes != nil { behind.increment() }
        return try await primary.broadcastChanges(after: after, through: through, deadline: deadline)
    }

    /// The replica's log: a version it has not replayed yet is taken in when it has (its
    /// notification is released then, ``ReplicaListener``, and wakes the stream again).
    public func ownChanges(for user: UserID, after: Int64, limit: Int, deadline: ContinuousClock.Instant) async throws -> [OwnLayerChange]? {
        if let changes = try await fromReplica(deadline, { deadline in
            try await replica.ownChanges(for: user, after: after, limit: limit, deadline: deadline)
        }) {
            return changes
        }
        return try await primary.ownChanges(for: user, after: after, limit: limit, deadline: deadline)
    }

    /// The replica's log for all of `reads` (as ``ownChanges(for:after:limit:deadline:)``), or
    /// the primary's when the replica fails.
    public func ownChanges(of reads: [LogRead], limit: Int, deadline: ContinuousClock.Instant) async throws -> [[OwnLayerChange]?] {
        if let changes = try await fromReplica(deadline, { deadline in
            try await replica.ownChanges(of: reads, limit: limit, deadline: deadline)
        }) {
            return changes
        }
        return try await primary.ownChanges(of: reads, limit: limit, deadline: deadline)
    }

    /// The replica's history, unless it answers nil (`since` may be a version it has not
    /// replayed yet) or ends below `floor`: then the primary's.
    public func history(
        for user: UserID, since: Int64, stepwise: Bool, limit: Int, floor: ReadFloor, deadline: ContinuousClock.Instant
    ) async throws -> [HistoryPoint]? {
        if floor != .latest {
            let points = try await fromReplica(deadline) { deadline in
                try await replica.history(for: user, since: since, stepwise: stepwise, limit: limit, floor: floor, deadline: deadline)
            }
            switch points {
            case .some(.some(let points)) where (points.last?.version ?? 0) >= floor.minimumVersion ?? 0: return points
            case .some: behind.increment()
            case .none: break
            }
        }
        return try await primary.history(for: user, since: since, stepwise: stepwise, limit: limit, floor: floor, deadline: deadline)
    }

    public func userExists(_ user: UserID, deadline: ContinuousClock.Instant) async throws -> Bool {
        if try await fromReplica(deadline, { deadline in try await replica.userExists(user, deadline: deadline) }) == true { return true }
        return try await primary.userExists(user, deadline: deadline)
    }

    /// From the primary: an export must hold everything written so far.
    public func exportUser(_ user: UserID, deadline: ContinuousClock.Instant) async throws -> String {
        try await primary.exportUser(user, deadline: deadline)
    }

    public func eraseUser(_ user: UserID, deadline: ContinuousClock.Instant) async throws -> UserData.Erasure {
        try await primary.eraseUser(user, deadline: deadline)
    }

    public func webhooks(deadline: ContinuousClock.Instant) async throws -> [WebhookSubscription] {
        try await primary.webhooks(deadline: deadline)
    }

    public func registerDevice(_ device: PushDevice, for user: UserID, deadline: ContinuousClock.Instant) async throws -> Bool {
        try await primary.registerDevice(device, for: user, deadline: deadline)
    }

    public func removeDevice(_ id: String, of user: UserID, deadline: ContinuousClock.Instant) async throws -> Bool {
        try await primary.removeDevice(id, of: user, deadline: deadline)
    }

    public func putWebhook(_ subscription: WebhookSubscription, deadline: ContinuousClock.Instant) async throws -> Bool {
        try await primary.putWebhook(subscription, deadline: deadline)
    }

    public func removeWebhook(_ id: String, deadline: ContinuousClock.Instant) async throws -> Bool {
        try await primary.removeWebhook(id, deadline: deadline)
    }

    public func replayWebhook(_ id: String, deadline: ContinuousClock.Instant) async throws -> Int {
        try await primary.replayWebhook(id, deadline: deadline)
    }

    public func act(
        _ operation: BadgeOperation, at path: BadgePath, for user: UserID, seenVersion: Int64?, actionID: ActionID?,
        deadline: ContinuousClock.Instant
    ) async throws -> ActionOutcome {
        try await primary.act(operation, at: path, for: user, seenVersion: seenVersion, actionID: actionID, deadline: deadline)
    }

    /// The primary's problems, and the replica's, each named.
    public func readinessProblems(deadline: ContinuousClock.Instant) async -> [String] {
        async let primaryProblems = primary.readinessProblems(deadline: deadline)
        async let replicaProblems = replica.readinessProblems(deadline: deadline)
        return await primaryProblems + replicaProblems.map { "the read replica: \($0)" }
    }

    /// `body` on the replica, given half the time left before `deadline` (the primary gets the
    /// rest); nil when it failed (logged and counted: the caller asks the primary). A cancelled
    /// request stays cancelled.
    private func fromReplica<T: Sendable>(
        _ deadline: ContinuousClock.Instant, _ body: (ContinuousClock.Instant) async throws -> T
    ) async throws -> T? {
        replicaReads.increment()
        let now = ContinuousClock.now
        do {
            return try await body(deadline > now ? now + (deadline - now) / 2 : deadline)
        } catch let error where error is CancellationError || Task.isCancelled {
            // A cancelled request (the pool reports the statement it cancelled as a PGError).
            throw error
        } catch {
            failed.increment()
            logger.info("the read replica failed; the primary answers", metadata: [LogKey.error: "\(error)"])
            return nil
        }
    }
}
