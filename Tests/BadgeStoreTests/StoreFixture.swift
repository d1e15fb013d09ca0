import BadgeCore
import BadgeStore
import Foundation
import LibPQ
import TestSupport

/// A migrated throwaway database with a pool and a store on it.
struct StoreFixture {
    let database: TestDatabase
    let pool: PGPool
    let store: BadgeStore

    static let migrationsDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("migrations")

    static func make(connections: Int = 4) async throws -> StoreFixture {
        let database = try await TestDatabase.create(prefix: "store")
        let pool = PGPool(
            configuration: PGConfiguration(
                connectionString: database.url, sessionSettings: BadgeStore.recommendedSessionSettings),
            maximumConnections: connections, logger: TestServer.logger)
        let files = try MigrationFile.load(from: migrationsDirectory)
        let migrator = Migrator(files: files, logger: TestServer.logger)
        try await pool.withConnection { connection in _ = try migrator.up(on: connection) }
        return StoreFixture(database: database, pool: pool, store: BadgeStore(pool: pool))
    }

    func tearDown() async {
        pool.close()
        await database.drop()
    }

    /// Applies mutations as ingest does: one transaction, coalesced, users marked dirty.
    func ingest(_ mutations: [BadgeMutation]) async throws {
        var batch = BadgeBatch()
        batch.append(contentsOf: mutations)
        let finished = batch
        try await pool.withTransaction { connection in
            try BadgeStore.apply(finished, on: connection)
            try BadgeStore.markDirty(finished.users, on: connection)
        }
    }

    /// Recomputes `users` in one transaction (what a rollup worker does for the users it claimed).
    @discardableResult
    func recompute(_ users: [UserID]) async throws -> [UserID: Int64] {
        try await pool.withTransaction { connection in
            try BadgeStore.recomputeAggregates(for: users, on: connection)
        }
    }

    /// Claims and recomputes dirty users, as rollup workers do, until none is left.
    func drainDirtyUsers(batchSize: Int = 100) async throws {
        while try await store.recomputeDirtyUsers(limit: batchSize) > 0 {}
    }

    func scalar<T: PGDecodable>(_ sql: String, _ parameters: [any PGBindable] = [], as type: T.Type = T.self) async throws -> T {
        try await pool.withConnection { connection in
            try connection.query(PGStatement("test.scalar", sql, prepared: false), parameters).singleRow().decode(0, as: T.self)
        }
    }
}

func user(_ name: String) -> UserID {
    do { return try UserID(validating: name) } catch { preconditionFailure("bad test user \(name)") }
}

func path(_ text: String) -> BadgePath {
    do { return try BadgePath(validating: text) } catch { preconditionFailure("bad test path \(text)") }
}
