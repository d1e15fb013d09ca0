public import BadgeCore
public import BadgeStore
import LibPQ

/// The PostgreSQL implementation. It lives here, beside the protocol, rather than in
/// `BadgeStore`: it turns a write that misses its deadline into the API's 503 and words the
/// readiness problems for `/readyz`, and `BadgeStore` knows nothing of HTTP.
extension BadgeStore: BadgeAPIStore {
    /// One statement on a pooled connection; the pool gives up at `deadline` with `.timedOut`
    /// (which costs no task and no timer per request). One database meets every `floor`.
    public func readView(
        for user: UserID, within path: BadgePath, depth: Int?, floor: ReadFloor, deadline: ContinuousClock.Instant
    ) async throws -> UserView {
        try await pool.withConnection(deadline: deadline) { connection in
            try Self.readView(for: user, within: path, depth: depth, on: connection)
        }
    }

    /// See ``BadgeStore/readBroadcastSet(on:)``.
    public func broadcastSet(deadline: ContinuousClock.Instant) async throws -> BroadcastSet {
        try await pool.withConnection(deadline: deadline) { connection in try Self.readBroadcastSet(on: connection) }
    }

    /// See ``BadgeStore/broadcastChanges(after:through:on:)``.
    public func broadcastChanges(after: Int64, through: Int64, deadline: ContinuousClock.Instant) async throws -> [BroadcastSetChange] {
        try await pool.withConnection(deadline: deadline) { connection in
            try Self.broadcastChanges(after: after, through: through, on: connection)
        }
    }

    /// One read of the change log on a pooled connection (``BadgeStore/ownChanges(for:after:limit:on:)``).
    public func ownChanges(for user: UserID, after: Int64, limit: Int, deadline: ContinuousClock.Instant) async throws -> [OwnLayerChange]? {
        try await pool.withConnection(deadline: deadline) { connection in
            try Self.ownChanges(for: user, after: after, limit: limit, on: connection)
        }
    }

    /// One read of the change log for all of `reads` on a pooled connection (``BadgeStore/ownChanges(of:limit:on:)``).
    public func ownChanges(of reads: [LogRead], limit: Int, deadline: ContinuousClock.Instant) async throws -> [[OwnLayerChange]?] {
        try await pool.withConnection(deadline: deadline) { connection in
            try Self.ownChanges(of: reads, limit: limit, on: connection)
        }
    }

    /// One repeatable-read transaction on a pooled connection (``BadgeStore/readHistory(for:since:limit:on:)``).
    public func history(
        for user: UserID, since: Int64, stepwise: Bool, limit: Int, floor: ReadFloor, deadline: ContinuousClock.Instant
    ) async throws -> [HistoryPoint]? {
        let history = try await pool.withConnection(deadline: deadline) { connection in
            try Self.readHistory(for: user, since: since, limit: limit, on: connection)
        }
        guard let history else { return nil }
        if stepwise {
            return history.layers(since: since, limit: limit)?.map(HistoryPoint.init)
        }
        guard let then = history.layers(at: since, limit: limit) else { return nil }
        return [HistoryPoint(then), HistoryPoint(history.current)]
    }

    /// See ``BadgeStore/userExists(_:on:)``.
    public func userExists(_ user: UserID, deadline: ContinuousClock.Instant) async throws -> Bool {
        try await pool.withConnection(deadline: deadline) { connection in try Self.userExists(user, on: connection) }
    }

    /// Applies the clear and recomputes at once; the write may take several leases (its
    /// retries), so it races `deadline` as a whole.
    ///
    /// - Throws: ``APIError`` 503 when `deadline` passes first.
    public func act(
        _ operation: BadgeOperation, at path: BadgePath, for user: UserID, seenVersion: Int64?, actionID: ActionID?,
        deadline: ContinuousClock.Instant
    ) async throws -> ActionOutcome {
        try await Self.racing(deadline) {
            try await act(operation, at: path, for: user, seenVersion: seenVersion, actionID: actionID)
        }
    }

    /// `UserData.export`, in one statement.
    public func exportUser(_ user: UserID, deadline: ContinuousClock.Instant) async throws -> String {
        try await pool.withConnection(deadline: deadline) { connection in try UserData.export(user, on: connection) }
    }

    /// `UserData.erase`, waiting for open transactions until a second before `deadline` (at
    /// least a second); races `deadline` as a whole (a 503 leaves the erasure running to its end:
    /// asking again is safe).
    public func eraseUser(_ user: UserID, deadline: ContinuousClock.Instant) async throws -> UserData.Erasure {
        let settle = max(.seconds(1), deadline - .now - .seconds(1))
        return try await Self.racing(deadline) { try await eraseUser(user, settle: settle) }
    }

    public func webhooks(deadline: ContinuousClock.Instant) async throws -> [WebhookSubscription] {
        try await pool.withConnection(deadline: deadline) { connection in try WebhookStore.subscriptions(on: connection) }
    }

    public func putWebhook(_ subscription: WebhookSubscription, deadline: ContinuousClock.Instant) async throws -> Bool {
        try await pool.withConnection(deadline: deadline) { connection in try WebhookStore.put(subscription, on: connection) }
    }

    public func removeWebhook(_ id: String, deadline: ContinuousClock.Instant) async throws -> Bool {
        try await pool.withConnection(deadline: deadline) { connection in try WebhookStore.remove(id, on: connection) }
    }

    public func replayWebhook(_ id: String, deadline: ContinuousClock.Instant) async throws -> Int {
        try await pool.withConnection(deadline: deadline) { connection in
            try WebhookStore.replay(id: nil, user: nil, subscription: id, on: connection)
        }
    }

    public func registerDevice(_ device: PushDevice, for user: UserID, deadline: ContinuousClock.Instant) async throws -> Bool {
        try await pool.withConnection(deadline: deadline) { connection in try PushStore.register(device, for: user, on: connection) }
    }

    public func removeDevice(_ id: String, of user: UserID, deadline: ContinuousClock.Instant) async throws -> Bool {
        try await pool.withConnection(deadline: deadline) { connection in try PushStore.remove(device: id, of: user, on: connection) }
    }

    /// The database answers, and its schema is at the version this build needs.
    public func readinessProblems(deadline: ContinuousClock.Instant) async -> [String] {
        do {
            let applied = try await pool.withConnection(deadline: deadline) { connection in
                try Migrator.appliedSchemaVersion(on: connection)
            }
            if applied < Migrator.requiredSchemaVersion {
                return ["the schema is at version \(applied); this build needs \(Migrator.requiredSchemaVersion) (run reddot migrate up)"]
            }
            return []
        } catch {
            return ["the database is unreachable"]
        }
    }

    /// Runs `body`, and answers 503 when it has not finished by `deadline`.
    private static func racing<T: Sendable>(
        _ deadline: ContinuousClock.Instant, _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(until: deadline, clock: .continuous)
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let value = first else {
                throw APIError.unavailable("the database did not answer in time; try again shortly")
            }
            return value
        }
    }
}

extension HistoryPoint {
    /// What the user saw in `layers`.
    init(_ layers: BadgeLayers) {
        self.init(version: layers.version, aggregates: layers.visibleAggregates, mutes: layers.mutes)
    }
}
