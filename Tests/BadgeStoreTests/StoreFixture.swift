import BadgeCore
import BadgeStore
import Foundation
import LibPQ
import TestSupport

/// A migrated throwaway database with a pool and a store on it.
struct StoreFixture: PooledFixture {
    let database: TestDatabase
    let pool: PGPool
    let store: BadgeStore

    /// A fixture on a fresh database, its tables laid out as `layout` says.
    static func make(connections: Int = 4, layout: SchemaLayout = .fromEnvironment) async throws -> StoreFixture {
        let migrated = try await MigratedDatabase.create(prefix: "store", connections: connections, layout: layout)
        return StoreFixture(database: migrated.database, pool: migrated.pool, store: BadgeStore(pool: migrated.pool))
    }

    func tearDown() async {
        pool.close()
        await database.drop()
    }

    /// Applies mutations as ingest does: one transaction, coalesced, users marked dirty first.
    func ingest(_ mutations: [BadgeMutation]) async throws {
        var batch = BadgeBatch()
        batch.append(contentsOf: mutations)
        try await ingest(batch)
    }

    /// Applies a batch as ingest does: one transaction, users marked dirty first, new rows
    /// first (so additive users' deltas are recorded), merged when a row is stored already.
    func ingest(_ batch: BadgeBatch) async throws {
        try await pool.withTransaction { connection in
            try BadgeStore.writeNewRowsFirst(on: connection) { conflicts throws(PGError) in
                try BadgeStore.applyMarked(batch, conflicts: conflicts, on: connection)
            }
        }
    }

    /// Applies a batch as ingest does when it is caught up: the users' rollup locks first, the
    /// batch written as `ingest(_:)` writes it but with no dirty mark for the users who only add,
    /// and the locked users brought current in the same transaction (`recountAll`: by recounts).
    @discardableResult
    func ingestRollingUp(_ batch: BadgeBatch, recountAll: Bool = false) async throws -> RollupOutcome {
        try await pool.withTransaction { connection in
            let owned = try BadgeStore.tryLockForRollUp(batch.users, on: connection)
            let (unmarked, _) = try BadgeStore.writeNewRowsFirst(on: connection) { conflicts throws(PGError) in
                try BadgeStore.applyMarked(batch, conflicts: conflicts, owned: Set(owned), on: connection)
            }
            return try BadgeStore.rollUpOwned(owned, unmarked: unmarked, recountAll: recountAll, on: connection)
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
    func drainDirtyUsers(batchSize: Int = 100, recountAll: Bool = false) async throws {
        while try await store.recomputeDirtyUsers(limit: batchSize, recountAll: recountAll) > 0 {}
    }
}

/// The number of rows of each of `tables` (names from the test, never input).
func rowCounts(of tables: [String], in pool: PGPool) async throws -> [String: Int] {
    try await pool.withConnection { connection in
        var counts: [String: Int] = [:]
        for table in tables {
            counts[table] = Int(try connection.query(PGStatement("test.count.\(table)", "SELECT count(*) FROM \(table)")).rows.first?.decode(0, as: Int64.self) ?? -1)
        }
        return counts
    }
}

/// `values` as an SQL `text[]` literal, for a test's script (ids the test made, without quotes).
func textArray(_ values: [String]) -> String {
    "ARRAY[\(values.map { "'\($0)'" }.joined(separator: ","))]::text[]"
}
