import BadgeCore
import BadgeStore
import LibPQ
import Logging

extension QueryBenchmark {
    /// What the load wrote and how long it took.
    struct LoadMeasurement: Sendable {
        var rows: Int
        var aggregateRows: Int
        var loadSeconds: Double
        var rollupSeconds: Double
        var vacuumSeconds: Double
    }

    /// Writes every user's own state through `BadgeStore.apply`, marks the users dirty, runs the
    /// rollup until no user is dirty, checks the row counts, and vacuums.
    func loadUsers() async throws -> LoadMeasurement {
        var configuration = settings.database
        configuration.sessionSettings += BadgeStore.recommendedSessionSettings
        let writers = settings.loadWriters
        let pool = PGPool(configuration: configuration, maximumConnections: writers, logger: logger)
        defer { pool.close() }
        let paths = try Self.nodePaths.map { try BadgePath(validating: $0) }
        let users = settings.users

        let loadStart = BenchClock.now
        try await writeUsers(paths: paths, pool: pool)
        let loadSeconds = Double(BenchClock.now - loadStart) / 1e9

        let store = BadgeStore(pool: pool)
        let rollupStart = BenchClock.now
        while try await pool.withConnection({ try BadgeStore.queueDepth(on: $0) }) > 0 {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<writers {
                    group.addTask { while try await store.recomputeDirtyUsers(limit: 1_000) > 0 {} }
                }
                try await group.waitForAll()
            }
        }
        let rollupSeconds = Double(BenchClock.now - rollupStart) / 1e9

        let expectedAggregates = users * Self.treeNodeCount
        let (stateRows, aggregateRows, versions) = try await pool.withConnection { try $0.countBadgeRows() }
        guard stateRows == users * paths.count, aggregateRows == expectedAggregates, versions == users else {
            throw BenchFailure(
                "the load is incomplete: \(stateRows) own-state rows (expected \(users * paths.count)), \(aggregateRows) aggregates "
                    + "(expected \(expectedAggregates)), \(versions) user versions (expected \(users))")
        }

        // Fresh statistics and visibility maps, and no autovacuum or checkpoint of the load
        // running while the reads are measured.
        let vacuumStart = BenchClock.now
        try await pool.withConnection { connection in
            try connection.vacuumAnalyzeBadgeTables()
            do {
                try connection.checkpoint()
            } catch {
                logger.warning("CHECKPOINT failed (it needs superuser or pg_checkpoint); measuring anyway", metadata: [LogKey.error: "\(error)"])
            }
        }
        let vacuumSeconds = Double(BenchClock.now - vacuumStart) / 1e9
        return LoadMeasurement(
            rows: stateRows, aggregateRows: aggregateRows, loadSeconds: loadSeconds, rollupSeconds: rollupSeconds,
            vacuumSeconds: vacuumSeconds)
    }

    /// Every user's nodes set to their seeded counts and the users marked dirty, in
    /// transactions of `loadBatchUsers` users, `loadWriters` connections in parallel.
    private func writeUsers(paths: [BadgePath], pool: PGPool) async throws {
        let (writers, users, batchUsers, seed) = (settings.loadWriters, settings.users, settings.loadBatchUsers, settings.seed)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<writers {
                group.addTask {
                    var chunk = writer
                    while chunk * batchUsers < users {
                        let first = chunk * batchUsers
                        var batch = BadgeBatch()
                        for user in first..<min(users, first + batchUsers) {
                            let id = try UserID(validating: Self.userName(user))
                            for (node, path) in paths.enumerated() {
                                let count = Self.count(user: user, node: node, seed: seed)
                                batch.append(BadgeMutation(user: id, path: path, operation: .set(count: count, icon: nil)))
                            }
                        }
                        let finished = batch
                        try await pool.withTransaction { connection in
                            try BadgeStore.markDirty(finished.users, on: connection)
                            try BadgeStore.apply(finished, on: connection)
                        }
                        chunk += writers
                    }
                }
            }
            try await group.waitForAll()
        }
    }
}
