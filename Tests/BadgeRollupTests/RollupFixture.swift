import BadgeCore
import BadgeRollup
import BadgeStore
import Foundation
import LibPQ
import Logging
import ServiceLifecycle
import TestSupport

/// A migrated throwaway database with a pool and a store on it, for one test.
struct RollupFixture: PooledFixture, Sendable {
    let database: TestDatabase
    let pool: PGPool
    let store: BadgeStore

    /// Runs `body` on a fresh migrated database, dropped afterwards even when `body` throws.
    static func with<T>(connections: Int = 6, _ body: (RollupFixture) async throws -> T) async throws -> T {
        try await MigratedDatabase.with(prefix: "rollup", connections: connections) { migrated in
            try await body(RollupFixture(database: migrated.database, pool: migrated.pool, store: BadgeStore(pool: migrated.pool)))
        }
    }

    /// Applies mutations as ingest does: one transaction, coalesced, users marked dirty first.
    func ingest(_ mutations: [BadgeMutation]) async throws {
        var batch = BadgeBatch()
        batch.append(contentsOf: mutations)
        let finished = batch
        try await PGRetryPolicy().run(logger: TestServer.logger) {
            try await pool.withTransaction { connection in
                try BadgeStore.markDirty(finished.users, on: connection)
                let outcome = try BadgeStore.apply(finished, on: connection)
                try BadgeStore.markDirty([], bumping: outcome.viewChangedUsers, on: connection)
            }
        }
    }

    /// Runs rollup services in a service group until `body` returns, then shuts them down
    /// gracefully.
    func withRollup<T: Sendable>(
        _ services: [RollupService], _ body: () async throws -> T
    ) async throws -> T {
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: services, gracefulShutdownSignals: [], cancellationSignals: [], logger: TestServer.logger))
        let running = Task { try await group.run() }
        do {
            let value = try await body()
            await group.triggerGracefulShutdown()
            try await running.value
            return value
        } catch {
            await group.triggerGracefulShutdown()
            _ = try? await running.value
            throw error
        }
    }

    /// Waits until no user is dirty (or the deadline passes).
    func waitForEmptyQueue(timeout: Duration = .seconds(60)) async throws {
        let deadline = ContinuousClock.now + timeout
        while try await scalar("SELECT count(DISTINCT user_id) FROM dirty_mark", as: Int64.self) > 0 {
            guard ContinuousClock.now < deadline else { throw RollupTestError("the dirty queue did not drain") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}

struct RollupTestError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
