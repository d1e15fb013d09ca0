import BadgeCore
import BadgeRollup
import BadgeStore
import Foundation
import LibPQ
import Logging
import ServiceLifecycle
import TestSupport

/// A migrated throwaway database with a pool and a store on it, for one test.
struct RollupFixture: Sendable {
    let database: TestDatabase
    let pool: PGPool
    let store: BadgeStore

    static let migrationsDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("migrations")

    /// Runs `body` on a fresh migrated database, dropped afterwards even when `body` throws.
    static func with<T>(connections: Int = 6, _ body: (RollupFixture) async throws -> T) async throws -> T {
        let database = try await TestDatabase.create(prefix: "rollup")
        let pool = PGPool(
            configuration: PGConfiguration(connectionString: database.url, sessionSettings: BadgeStore.recommendedSessionSettings),
            maximumConnections: connections, logger: TestServer.logger)
        let fixture = RollupFixture(database: database, pool: pool, store: BadgeStore(pool: pool))
        do {
            let migrator = Migrator(files: try MigrationFile.load(from: migrationsDirectory), logger: TestServer.logger)
            try await pool.withConnection { connection in _ = try migrator.up(on: connection) }
            let value = try await body(fixture)
            pool.close()
            await database.drop()
            return value
        } catch {
            pool.close()
            await database.drop()
            throw error
        }
    }

    /// Applies mutations as ingest does: one transaction, coalesced, users marked dirty.
    func ingest(_ mutations: [BadgeMutation]) async throws {
        var batch = BadgeBatch()
        batch.append(contentsOf: mutations)
        let finished = batch
        try await PGRetryPolicy().run(logger: TestServer.logger) {
            try await pool.withTransaction { connection in
                let outcome = try BadgeStore.apply(finished, on: connection)
                try BadgeStore.markDirty(finished.users, bumping: outcome.dismissedBroadcasts, on: connection)
            }
        }
    }

    func execute(_ sql: String, _ parameters: [any PGBindable] = []) async throws {
        try await pool.withConnection { connection in
            _ = try connection.query(PGStatement("test.execute", sql, prepared: false), parameters)
        }
    }

    func scalar<T: PGDecodable>(_ sql: String, _ parameters: [any PGBindable] = [], as type: T.Type = T.self) async throws -> T {
        try await pool.withConnection { connection in
            try connection.query(PGStatement("test.scalar", sql, prepared: false), parameters).singleRow().decode(0, as: T.self)
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
        while try await scalar("SELECT count(*) FROM dirty_user", as: Int64.self) > 0 {
            guard ContinuousClock.now < deadline else { throw RollupTestError("the dirty queue did not drain") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}

struct RollupTestError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

func user(_ name: String) -> UserID {
    do { return try UserID(validating: name) } catch { preconditionFailure("bad test user \(name)") }
}

func path(_ text: String) -> BadgePath {
    do { return try BadgePath(validating: text) } catch { preconditionFailure("bad test path \(text)") }
}
