import BadgeCore
import BadgeStore
import Foundation
import LibPQ
import Testing
import TestSupport

/// `reddot migrate up --online`: migration 32 through `OnlineCollationChange`.
extension MigratorTests {
    /// The schema as the tests compare it: every column's type and collation, every index's and
    /// constraint's definition, by name.
    static let schemaShape = """
        SELECT string_agg(line, E'\\n' ORDER BY line) FROM (
            SELECT 'column ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' ' || coalesce(co.collname, '-') AS line
            FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid LEFT JOIN pg_collation co ON co.oid = a.attcollation
            WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped
            UNION ALL
            SELECT 'index ' || pg_get_indexdef(i.indexrelid) || ' valid=' || i.indisvalid
            FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relnamespace = current_schema()::regnamespace
            UNION ALL
            SELECT 'constraint ' || conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid)
            FROM pg_constraint WHERE connamespace = current_schema()::regnamespace
            UNION ALL
            SELECT 'inherits ' || inhrelid::regclass::text || ' < ' || inhparent::regclass::text FROM pg_inherits
        ) AS shape
        """

    func shape(of database: MigrationDatabase) async throws -> String {
        try await database.pool.withConnection { connection in
            try connection.query(PGStatement("test.schema_shape", Self.schemaShape, prepared: false)).singleRow().decode(0, as: String.self)
        }
    }

    /// Each index's name and its file (`relfilenode`): an index rebuilt gets a new file.
    func indexFiles(of database: MigrationDatabase) async throws -> [String: Int64] {
        try await database.pool.withConnection { connection in
            var files: [String: Int64] = [:]
            for row in try connection.query(PGStatement("test.index_files", """
                SELECT c.relname, c.relfilenode::bigint FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'i'
                """, prepared: false)).rows {
                files[try row.decode(0, as: String.self)] = try row.decode(1, as: Int64.self)
            }
            return files
        }
    }

    /// Stores trees, ids that differ only in case, and dedupe rows on a schema-31 database.
    func seedSchema31(_ database: MigrationDatabase) async throws -> [UserID] {
        let store = BadgeStore(pool: database.pool)
        let users = try ["user", "User", "USER", "user-2", "user_2"].map { try UserID(validating: $0) }
        for (index, user) in users.enumerated() {
            try await store.apply(
                [BadgeMutation(user: user, path: try BadgePath(validating: "root.chat.c1"), operation: .increment(by: Int64(index + 1)))],
                recomputeNow: true)
        }
        try await database.pool.withConnection { connection in
            try connection.query(PGStatement("test.seed_ids", """
                INSERT INTO applied_user_event_generation (user_id, event_id, slot)
                SELECT 'u' || (n % 50), 'e' || n, (n % 2)::smallint FROM generate_series(1, 2000) n
                """, prepared: false))
        }
        return users
    }

    @Test("migrate up --online leaves the schema migration 32 leaves, swaps in the indexes it built without rebuilding them, resumes a stopped build (an invalid index built again), keeps the trees")
    func onlineBytewiseKeysMatchTheFile() async throws {
        let files = try MigrationFile.load(from: Repository.migrationsDirectory)
        let file32 = try #require(files.first { $0.version == 32 })
        try await withDatabase { byFile in
            try await withDatabase { online in
                try await byFile.up(through: 31, of: files)
                try await online.up(through: 31, of: files)
                _ = try await seedSchema31(byFile)
                let users = try await seedSchema31(online)

                // A build that stopped after its first index: the run keeps that one.
                let change = try #require(try await online.pool.withConnection { try OnlineCollationChange.prepare(file32, on: $0) })
                #expect(change.indexes.count > 25 && change.partitioned.count == 2, "\(change.indexes.count) \(change.partitioned.count)")
                try await online.pool.withConnection { connection in
                    try connection.query(PGStatement("test.first_build", change.indexes[0].build, prepared: false))
                }
                let firstFile = try #require(try await indexFiles(of: online)[change.indexes[0].newName])
                // A build that failed half-way leaves its index INVALID: the run drops it and builds it again.
                let aggregates = try #require(change.indexes.first { $0.table == "badge_aggregate" })
                await #expect(throws: PGError.self) {
                    try await online.pool.withConnection { connection in
                        try connection.query(PGStatement(
                            "test.failed_build", "CREATE UNIQUE INDEX CONCURRENTLY \(aggregates.newName) ON badge_aggregate (path)", prepared: false))
                    }
                }
                #expect(try await online.scalar(
                    "SELECT count(*)::bigint FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = '\(aggregates.newName)' AND NOT i.indisvalid") == 1)

                let plan = try await online.plan(Migrator(files: files, logger: TestServer.logger), online: true)
                #expect(plan.contains("CREATE UNIQUE INDEX CONCURRENTLY \(OnlineCollationChange.buildPrefix)") && plan.contains("USING INDEX"), "\(plan.prefix(600))")

                let applied = try await online.pool.withConnection { connection in
                    try Migrator(files: files, logger: TestServer.logger).up(on: connection, online: true)
                }
                #expect(applied.map(\.version) == files.map(\.version).filter { $0 > 31 })
                _ = try await byFile.up(Migrator(files: files, logger: TestServer.logger))

                #expect(try await shape(of: online) == shape(of: byFile))
                #expect(try await online.history().last == byFile.history().last)
                #expect(try await indexFiles(of: online)[change.indexes[0].name] == firstFile, "the first index was built once, before the swap")
                #expect(try await indexFiles(of: online).keys.filter { $0.hasPrefix(OnlineCollationChange.buildPrefix) } == [])
                #expect(try await online.verify(Migrator(files: files, logger: TestServer.logger)).pendingCount == 0)

                let store = BadgeStore(pool: online.pool)
                for (index, user) in users.enumerated() {
                    #expect(try await store.tree(for: user).tree?.count == Int64(index + 1), "\(user)")
                }
                #expect(try await BadgeVerifier(store: store).run(repair: false).mismatches == 0)
                #expect(try await online.scalar("SELECT count(*)::bigint FROM applied_user_event_generation WHERE user_id = 'u7'") == 40)
            }
        }
    }

    @Test("the online form reads migration 32's columns from the file; a long statement without its end matches nothing")
    func declaredColumnsOfMigration32() throws {
        let files = try MigrationFile.load(from: Repository.migrationsDirectory)
        let declared = OnlineCollationChange.declaredColumns(in: try #require(files.first { $0.version == 32 }).sql)
        #expect(declared.count == 29)
        #expect(declared.first { $0.table == "webhook_delivery" }?.columns == ["id", "user_id", "subscription_id"])
        #expect(declared.first { $0.table == "consumer_offset" }?.columns == ["consumer_group", "topic"])
        #expect(declared.first { $0.table == "badge_aggregate" }?.columns == ["user_id"])
        // Many columns, runs of spaces between them, and no ';': one way to match each run.
        let unfinished = "ALTER TABLE t " + String(repeating: "ALTER COLUMN c TYPE text COLLATE \"C\"    ,    ", count: 2_000)
        #expect(OnlineCollationChange.declaredColumns(in: unfinished).isEmpty)
        #expect(OnlineCollationChange.declaredColumns(in: "ALTER TABLE t ALTER COLUMN a TYPE text COLLATE \"C\"  ALTER COLUMN b TYPE text COLLATE \"C\";").map(\.columns) == [["a", "b"]])
    }

    @Test("no index an online run built outlives migration 32: the file drops what a stopped run left, the swap what it did not take")
    func onlineLeftoversDropped() async throws {
        let files = try MigrationFile.load(from: Repository.migrationsDirectory)
        let file32 = try #require(files.first { $0.version == 32 })
        for online in [false, true] {
            try await withDatabase { database in
                try await database.up(through: 31, of: files)
                let change = try #require(try await database.pool.withConnection { try OnlineCollationChange.prepare(file32, on: $0) })
                let stateIndexes = try await database.scalar("SELECT count(*)::bigint FROM pg_indexes WHERE tablename = 'badge_state'")
                try await database.pool.withConnection { connection in
                    try connection.query(PGStatement("test.first_build", change.indexes[0].build, prepared: false))
                    // One no swap takes: named after an index that is not there.
                    try connection.query(PGStatement(
                        "test.stray", "CREATE INDEX \(OnlineCollationChange.buildPrefix)1 ON badge_state (path)", prepared: false))
                }
                let applied = try await database.pool.withConnection { connection in
                    try Migrator(files: files, logger: TestServer.logger).up(on: connection, online: online)
                }
                #expect(applied.map(\.version) == files.map(\.version).filter { $0 > 31 })
                #expect(try await indexFiles(of: database).keys.filter { $0.hasPrefix(OnlineCollationChange.buildPrefix) } == [], "online: \(online)")
                #expect(try await database.scalar("SELECT count(*)::bigint FROM pg_indexes WHERE tablename = 'badge_state'") == stateIndexes)
            }
        }
    }

    @Test("migrate up --online on a layout partitioned by user applies the file, which leaves it as it is")
    func onlineFormOnPartitionedLayout() async throws {
        let files = try MigrationFile.load(from: Repository.migrationsDirectory)
        try await withDatabase { database in
            try await database.up(through: 31, of: files)
            try await database.pool.withConnection { try SchemaLayout.partitionedByUser.apply(on: $0) }
            let applied = try await database.pool.withConnection { connection in
                try Migrator(files: files, logger: TestServer.logger).up(on: connection, online: true)
            }
            #expect(applied.map(\.version) == files.map(\.version).filter { $0 > 31 })
            #expect(try await database.scalar(
                "SELECT count(*)::bigint FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid WHERE c.relname = 'badge_aggregate' AND a.attcollation = 'pg_catalog.\"C\"'::regcollation") == 0)
        }
    }

    @Test("migrate up --online refuses an index it would not rebuild, naming it, and applies nothing; the file still applies")
    func onlineFormRefusesPartialIndex() async throws {
        let files = try MigrationFile.load(from: Repository.migrationsDirectory)
        try await withDatabase { database in
            try await database.up(through: 31, of: files)
            try await database.pool.withConnection { connection in
                try connection.query(PGStatement("test.partial", "CREATE INDEX operator_partial ON badge_state (user_id) WHERE count > 5", prepared: false))
            }
            let migrator = Migrator(files: files, logger: TestServer.logger)
            let error = await #expect(throws: MigrationError.self) {
                _ = try await database.pool.withConnection { connection in try migrator.up(on: connection, online: true) }
            }
            #expect(error?.code == .migrationFailed && error?.message.contains("operator_partial on badge_state is partial") == true, "\(String(describing: error))")
            #expect(try await database.history().last?.version == 31)
            #expect(try await database.scalar("SELECT count(*)::bigint FROM pg_class WHERE relname LIKE 'reddot_bytewise_%'") == 0)
            #expect(try await database.plan(migrator, online: true).contains("operator_partial on badge_state is partial"))
            _ = try await database.up(migrator)
            #expect(try await database.history().last?.version == files.last?.version)
        }
    }

    /// Runs `migrator` (online or not) on `database` while a transaction that wrote `user_write`
    /// stays open; once the migrator waits for a lock, a writer inserts into `user_write` with a
    /// 3 s lock timeout; then the open transaction commits.
    ///
    /// - Returns: whether the writer's insert went through, and the versions the migrator applied.
    func writeWhileMigrating(_ database: MigrationDatabase, _ migrator: Migrator, online: Bool) async throws -> (wrote: Bool, applied: [Int]) {
        let writer = PGPool(configuration: database.database.configuration, maximumConnections: 1, logger: TestServer.logger)
        let watcher = PGPool(configuration: database.database.configuration, maximumConnections: 1, logger: TestServer.logger)
        defer { writer.close(); watcher.close() }
        let open = try PGConnection.connect(database.database.configuration, logger: TestServer.logger)
        defer { open.close() }
        try open.execute(script: "BEGIN; INSERT INTO user_write (user_id, seq) VALUES ('holder', 1)", name: "test.hold")
        let migration = Task { try await database.pool.withConnection { try migrator.up(on: $0, online: online) } }
        // Until the migrator waits for that transaction (nothing else waits here).
        let waiting = PGStatement("test.migrator_waits", """
            SELECT count(*)::bigint FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'
            """, prepared: false)
        var polls = 0
        while try await watcher.withConnection({ try $0.query(waiting).singleRow().decode(0, as: Int64.self) }) == 0, polls < 1_000 {
            polls += 1
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(polls < 1_000, "the migrator never waited (online: \(online))")
        let wrote = try await writer.withConnection { connection in
            do {
                try connection.execute(script: "SET lock_timeout = '3s'; INSERT INTO user_write (user_id, seq) VALUES ('writer', 1)", name: "test.write")
                return true
            } catch {
                return false
            }
        }
        try open.execute(script: "COMMIT", name: "test.commit")
        return (wrote, try await migration.value.map(\.version))
    }

    @Test("while an open transaction keeps the online swap from its locks, a writer that comes waits for one short attempt, not for that transaction")
    func onlineSwapWaitsInShortAttempts() async throws {
        let files = try MigrationFile.load(from: Repository.migrationsDirectory)
        let file32 = try #require(files.first { $0.version == 32 })
        try await withDatabase { database in
            try await database.up(through: 31, of: files)
            let change = try #require(try await database.pool.withConnection { try OnlineCollationChange.prepare(file32, on: $0) })
            try await database.pool.withConnection { connection in try change.build(on: connection) { _, _ in } }
            // The default lock timeout (10 s): with one wait that long, the writer would queue behind it.
            let outcome = try await writeWhileMigrating(database, Migrator(files: files, logger: TestServer.logger), online: true)
            #expect(outcome.wrote, "the writer waited past 3 s behind the swap's lock request")
            #expect(outcome.applied == files.map(\.version).filter { $0 > 31 })
        }
    }

    @Test("while migrate up --online builds, a writer is not blocked; migration 32 as a file blocks it")
    func onlineFormLetsWritersGoOn() async throws {
        let files = try MigrationFile.load(from: Repository.migrationsDirectory)
        for online in [true, false] {
            try await withDatabase { database in
                try await database.up(through: 31, of: files)
                let migrator = Migrator(files: files, lockTimeoutMilliseconds: 0, logger: TestServer.logger)
                let outcome = try await writeWhileMigrating(database, migrator, online: online)
                #expect(outcome.wrote == online, "online: \(online)")
                #expect(outcome.applied == files.map(\.version).filter { $0 > 31 })
            }
        }
    }
}
