import BadgeCore
import BadgeStore
import Dispatch
import Foundation
import LibPQ
import TestSupport
import Testing

/// The migrator against a real PostgreSQL: every test has its own database and its own
/// directory of fixture SQL files.
@Suite("Migrator against a real PostgreSQL")
struct MigratorTests {
    // MARK: - applying

    @Test("a fresh database gets every file once; a second up applies nothing")
    func freshDatabaseThenIdempotent() async throws {
        let directory = try FixtureDirectory([
            "0001_create_alpha.sql": "CREATE TABLE alpha (id integer PRIMARY KEY);\n",
            "0002_create_beta.sql": "CREATE TABLE beta (id integer PRIMARY KEY, note text);\nINSERT INTO beta VALUES (1, 'one');\n",
            "0003_create_gamma.sql": "CREATE TABLE gamma (id integer);\n",
        ])
        defer { directory.delete() }
        try await withDatabase { database in
            let migrator = Migrator(files: try directory.load(), logger: TestServer.logger)
            let applied = try await database.up(migrator)
            #expect(applied.map(\.fileName) == ["0001_create_alpha.sql", "0002_create_beta.sql", "0003_create_gamma.sql"])

            let history = try await database.history()
            #expect(history.map(\.version) == [1, 2, 3])
            #expect(history.map(\.fileName) == applied.map(\.fileName))
            #expect(history.map(\.checksum) == migrator.files.map(\.checksum))
            for table in ["alpha", "beta", "gamma"] {
                #expect(try await database.tableExists(table), "table \(table)")
            }
            #expect(try await database.scalar("SELECT count(*)::bigint FROM beta") == 1)

            let again = try await database.up(migrator)
            #expect(again.isEmpty)
            #expect(try await database.history() == history)
            #expect(try await database.scalar("SELECT count(*)::bigint FROM beta") == 1)

            let status = try await database.status(migrator)
            #expect(status.isCurrent)
            #expect(status.appliedCount == 3)
            #expect(status.entries.map(\.state) == [.applied, .applied, .applied])
        }
    }

    @Test("the real migrations/ directory applies cleanly and leaves the schema current")
    func realMigrations() async throws {
        let files = try MigrationFile.load(from: Repository.migrationsDirectory)
        #expect(files.first?.fileName == "0001_init.sql")
        try await withDatabase { database in
            let migrator = Migrator(files: files, logger: TestServer.logger)
            let applied = try await database.up(migrator)
            #expect(applied.map(\.fileName) == files.map(\.fileName))
            for table in ["badge_state", "badge_aggregate", "user_version", "dirty_mark", "consumer_offset", "broadcast"] {
                #expect(try await database.tableExists(table), "table \(table)")
            }
            let status = try await database.status(migrator)
            #expect(status.isCurrent)
            #expect(status.appliedCount == files.count)
            #expect(status.problemCount == 0)
            _ = try await database.verify(migrator, failIfPending: true)
            #expect(try await database.up(migrator).isEmpty)
        }
    }

    @Test("migration 3 keeps what schema 2 stored: the same trees, counted as seen, and verify finds nothing")
    func itemsMigrationKeepsCounters() async throws {
        let files = try MigrationFile.load(from: Repository.migrationsDirectory)
        try await withDatabase { database in
            try await database.up(through: 2, of: files)
            // What a schema-2 ingest and rollup left: own state, aggregates, a version.
            try await database.pool.withConnection { connection in
                for sql in [
                    "INSERT INTO badge_state (user_id, path, count, icon) VALUES ('old', 'root.chat.c1', 3, NULL), ('old', 'root.news', 0, 'new')",
                    "INSERT INTO badge_aggregate (user_id, path, count, icon) VALUES ('old', 'root', 3, NULL), ('old', 'root.chat', 3, NULL), "
                        + "('old', 'root.chat.c1', 3, NULL), ('old', 'root.news', 0, 'new')",
                    "INSERT INTO user_version (user_id, version) VALUES ('old', 4)",
                ] {
                    try connection.query(PGStatement("test.seed", sql, prepared: false))
                }
            }
            let plan = try await database.plan(Migrator(files: files, logger: TestServer.logger))
            #expect(plan.contains("0003_items_and_seen.sql") && plan.contains("CREATE TABLE badge_item"), "\(plan.prefix(400))")
            _ = try await database.up(Migrator(files: files, logger: TestServer.logger))

            let store = BadgeStore(pool: database.pool)
            let tree = try await store.tree(for: UserID(validating: "old"))
            #expect(tree.version == 4)
            #expect(tree.tree?.count == 3 && tree.tree?.unseen == 0)
            #expect(tree.tree?.children.map(\.path.rawValue) == ["root.chat", "root.news"])
            #expect(try await BadgeVerifier(store: store).run(repair: false).mismatches == 0)
            // What arrives after the migration counts as unseen; the old count stays seen.
            try await store.apply([BadgeMutation(user: try UserID(validating: "old"), path: try BadgePath(validating: "root.chat.c1"), operation: .increment(by: 2))], recomputeNow: true)
            let after = try await store.tree(for: UserID(validating: "old"))
            #expect(after.tree?.count == 5 && after.tree?.unseen == 2)
            #expect(try await BadgeVerifier(store: store).run(repair: false).mismatches == 0)
        }
    }

    @Test("every text column in a key or an index compares byte by byte (migration 32, and every file after it)")
    func keysAreBytewise() async throws {
        let files = try MigrationFile.load(from: Repository.migrationsDirectory)
        try await withDatabase { database in
            _ = try await database.up(Migrator(files: files, logger: TestServer.logger))
            // A column left to the database's collation makes joins with the bytewise ones
            // unable to use its indexes (the clause takes "C"; the index has the default).
            let loose = try await database.pool.withConnection { connection in
                try connection.query(PGStatement("test.loose_keys", """
                    SELECT DISTINCT c.relname || '.' || a.attname
                    FROM pg_index x
                    JOIN pg_class c ON c.oid = x.indrelid
                    JOIN pg_namespace n ON n.oid = c.relnamespace
                    JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = ANY (x.indkey::int2[])
                    WHERE n.nspname = current_schema() AND a.atttypid = 'text'::regtype
                      AND a.attcollation <> 'pg_catalog."C"'::regcollation
                    ORDER BY 1
                    """, prepared: false)).rows.map { try $0.decode(0, as: String.self) }
            }
            #expect(loose == [])
        }
    }

    @Test("migration 32 keeps what schema 31 stored: the same trees, ids that differ only in case or punctuation kept apart, verify finds nothing")
    func bytewiseKeysKeepTrees() async throws {
        let files = try MigrationFile.load(from: Repository.migrationsDirectory)
        try await withDatabase { database in
            try await database.up(through: 31, of: files)
            let store = BadgeStore(pool: database.pool)
            let users = try await seedSchema31(database)
            let plan = try await database.plan(Migrator(files: files, logger: TestServer.logger))
            #expect(plan.contains("0032_bytewise_keys.sql") && plan.contains("COLLATE \"C\""), "\(plan.prefix(400))")
            _ = try await database.up(Migrator(files: files, logger: TestServer.logger))
            #expect(try await database.scalar(
                "SELECT count(*)::bigint FROM pg_attribute WHERE attrelid = 'badge_aggregate'::regclass AND attname = 'user_id' AND attcollation = 'pg_catalog.\"C\"'::regcollation") == 1)

            for (index, user) in users.enumerated() {
                let tree = try await store.tree(for: user)
                #expect(tree.version == 1, "\(user)")
                #expect(tree.tree?.count == Int64(index + 1), "\(user)")
            }
            #expect(try await BadgeVerifier(store: store).run(repair: false).mismatches == 0)
            try await store.apply([BadgeMutation(user: users[1], path: try BadgePath(validating: "root.chat.c2"), operation: .increment(by: 5))], recomputeNow: true)
            let after = try await store.tree(for: users[1])
            #expect(after.version == 2 && after.tree?.count == 7)
            #expect(try await store.tree(for: users[0]).tree?.count == 1)
            #expect(try await BadgeVerifier(store: store).run(repair: false).mismatches == 0)
        }
    }

    @Test("migration 32 leaves a layout partitioned by user as it is, and the store runs on it")
    func bytewiseKeysLeavePartitionedLayout() async throws {
        let files = try MigrationFile.load(from: Repository.migrationsDirectory)
        try await withDatabase { database in
            try await database.up(through: 31, of: files)
            try await database.pool.withConnection { try SchemaLayout.partitionedByUser.apply(on: $0) }
            _ = try await database.up(Migrator(files: files, logger: TestServer.logger))
            #expect(try await database.history().map(\.version).last == files.last?.version)
            #expect(try await database.scalar(
                "SELECT count(*)::bigint FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid WHERE c.relname IN ('badge_aggregate', 'user_version', 'consumer_offset') AND a.attcollation = 'pg_catalog.\"C\"'::regcollation") == 0)

            let store = BadgeStore(pool: database.pool)
            let user = try UserID(validating: "p1")
            try await store.apply([BadgeMutation(user: user, path: try BadgePath(validating: "root.chat.c1"), operation: .increment(by: 3))], recomputeNow: true)
            #expect(try await store.tree(for: user).tree?.count == 3)
            #expect(try await BadgeVerifier(store: store).run(repair: false).mismatches == 0)
        }
    }

    @Test("migration 19 starts the feed's cursor below the oldest record not yet published: nothing is lost, nothing below it is sent again")
    func feedCursorMigrationKeepsUnpublished() async throws {
        let files = try MigrationFile.load(from: Repository.migrationsDirectory)
        try await withDatabase { database in
            try await database.up(through: 15, of: files)
            // Five versions logged by an older rollup; its feed had published the 1st, 2nd and 4th.
            try await database.pool.withConnection { connection in
                for sql in [
                    """
                    INSERT INTO badge_change (user_id, version, broadcast_version, nodes, root_count, root_unseen)
                    SELECT 'm' || n, 1, 0, '[]', n, n FROM generate_series(1, 5) n ORDER BY n
                    """,
                    "UPDATE badge_change SET published_at = now() WHERE user_id IN ('m1', 'm2', 'm4')",
                ] {
                    try connection.query(PGStatement("test.seed", sql, prepared: false))
                }
            }
            _ = try await database.up(Migrator(files: files, logger: TestServer.logger))
            let round = try await database.pool.withConnection { try BadgeStore.pendingFeedRecords(limit: 100, countCap: 99, on: $0) }
            #expect(round.records.map(\.key) == ["m3", "m4", "m5"])
            #expect(try await database.pool.withConnection { try BadgeStore.unpublishedChanges(on: $0) } == 3)
        }
    }

    @Test("five concurrent migrators apply every file exactly once")
    func concurrentMigrators() async throws {
        let directory = try FixtureDirectory([
            "0001_create_alpha.sql": "CREATE TABLE alpha (id integer PRIMARY KEY);\n",
            // Slow, so that the others arrive while the first holds the lock (1.5 s was once too
            // short for four more connections on a machine running the whole suite).
            "0002_slow.sql": "SELECT pg_sleep(5);\nCREATE TABLE beta (id integer PRIMARY KEY);\n",
            "0003_seed_alpha.sql": "INSERT INTO alpha VALUES (1);\n",
        ])
        defer { directory.delete() }
        try await withDatabase { database in
            let migrator = Migrator(files: try directory.load(), logger: TestServer.logger)
            let url = database.url
            let clock = ContinuousClock()
            let runs = try await withThrowingTaskGroup(of: MigratorRun.self) { group in
                for _ in 0..<5 {
                    group.addTask {
                        let pool = PGPool(configuration: PGConfiguration(connectionString: url), maximumConnections: 1, logger: TestServer.logger)
                        defer { pool.close() }
                        return try await pool.withConnection { connection in
                            let started = clock.now
                            let applied = try migrator.up(on: connection).map(\.fileName)
                            return MigratorRun(applied: applied, started: started, finished: clock.now)
                        }
                    }
                }
                var runs: [MigratorRun] = []
                for try await run in group { runs.append(run) }
                return runs
            }
            let results = runs.map(\.applied)
            let allFiles = ["0001_create_alpha.sql", "0002_slow.sql", "0003_seed_alpha.sql"]
            #expect(results.count == 5)
            let union = results.flatMap { $0 }
            #expect(union.sorted() == allFiles, "every file applied once, by someone: \(results)")
            #expect(Set(union).count == union.count, "no file applied twice: \(results)")
            // Under the lock, the first migrator applies everything and the others find it done.
            #expect(results.filter { !$0.isEmpty } == [allFiles])
            // They did race: others were already waiting while the first one applied.
            let applier = try #require(runs.first { !$0.applied.isEmpty })
            #expect(runs.filter { $0.started < applier.finished }.count >= 2, "\(runs)")
            #expect(try await database.history().map(\.version) == [1, 2, 3])
            // The insert of 0003 would fail on its primary key had it run twice.
            #expect(try await database.scalar("SELECT count(*)::bigint FROM alpha") == 1)
        }
    }

    // MARK: - history mismatches

    @Test("an applied file edited afterwards is refused by name and shown as modified")
    func editedAppliedFile() async throws {
        let directory = try FixtureDirectory([
            "0001_create_alpha.sql": "CREATE TABLE alpha (id integer PRIMARY KEY);\n",
            "0002_create_beta.sql": "CREATE TABLE beta (id integer PRIMARY KEY);\n",
        ])
        defer { directory.delete() }
        try await withDatabase { database in
            let original = Migrator(files: try directory.load(), logger: TestServer.logger)
            _ = try await database.up(original)
            let appliedChecksum = original.files[1].checksum

            try directory.write("0002_create_beta.sql", "CREATE TABLE beta (id integer PRIMARY KEY, extra text);\n")
            try directory.write("0003_create_gamma.sql", "CREATE TABLE gamma (id integer);\n")
            let edited = Migrator(files: try directory.load(), logger: TestServer.logger)
            #expect(edited.files[1].checksum != appliedChecksum)

            let verifyError = await #expect(throws: MigrationError.self) { try await database.verify(edited) }
            #expect(verifyError?.code == .historyMismatch)
            #expect(verifyError?.exitCode == 65)
            #expect(verifyError?.message.contains("0002_create_beta.sql") == true, "\(verifyError?.message ?? "")")

            let upError = await #expect(throws: MigrationError.self) { try await database.up(edited) }
            #expect(upError?.code == .historyMismatch)
            #expect(upError?.message.contains("0002_create_beta.sql") == true, "\(upError?.message ?? "")")
            // Refused before anything ran: the new file 0003 was not applied either.
            #expect(try await database.history().map(\.version) == [1, 2])
            #expect(try await !database.tableExists("gamma"))

            let planError = await #expect(throws: MigrationError.self) { try await database.plan(edited) }
            #expect(planError?.code == .historyMismatch)

            let status = try await database.status(edited)
            #expect(status.entries.map(\.state) == [.applied, .modified, .pending])
            #expect(status.entries[1].file == "0002_create_beta.sql")
            #expect(status.entries[1].checksum == edited.files[1].checksum)
            #expect(status.entries[1].appliedChecksum == appliedChecksum)
            #expect(status.problemCount == 1)
            #expect(!status.isCurrent)
        }
    }

    @Test("a deleted applied file is missing; a new file numbered below an applied one is out of order")
    func missingAndOutOfOrder() async throws {
        let directory = try FixtureDirectory([
            "0001_create_alpha.sql": "CREATE TABLE alpha (id integer PRIMARY KEY);\n",
            "0003_create_gamma.sql": "CREATE TABLE gamma (id integer);\n",
        ])
        defer { directory.delete() }
        try await withDatabase { database in
            _ = try await database.up(Migrator(files: try directory.load(), logger: TestServer.logger))

            try directory.write("0002_create_beta.sql", "CREATE TABLE beta (id integer);\n")
            let late = Migrator(files: try directory.load(), logger: TestServer.logger)
            let lateStatus = try await database.status(late)
            #expect(lateStatus.entries.map(\.state) == [.applied, .outOfOrder, .applied])
            let upError = await #expect(throws: MigrationError.self) { try await database.up(late) }
            #expect(upError?.code == .historyMismatch)
            #expect(upError?.message.contains("0002_create_beta.sql") == true, "\(upError?.message ?? "")")
            #expect(try await !database.tableExists("beta"))
            #expect(try await database.history().map(\.version) == [1, 3])

            try directory.remove("0002_create_beta.sql")
            let appliedChecksum = try directory.load()[1].checksum
            try directory.remove("0003_create_gamma.sql")
            let missing = Migrator(files: try directory.load(), logger: TestServer.logger)
            let missingStatus = try await database.status(missing)
            #expect(missingStatus.entries.map(\.state) == [.applied, .missing])
            #expect(missingStatus.entries[1].file == "0003_create_gamma.sql")
            #expect(missingStatus.entries[1].checksum == nil)
            #expect(missingStatus.entries[1].appliedChecksum == appliedChecksum)
            let verifyError = await #expect(throws: MigrationError.self) { try await database.verify(missing) }
            #expect(verifyError?.code == .historyMismatch)
            #expect(verifyError?.message.contains("0003_create_gamma.sql") == true, "\(verifyError?.message ?? "")")
        }
    }

    // MARK: - failures

    @Test("a migration failing half-way is rolled back whole; earlier files stay applied")
    func failingMigrationRollsBack() async throws {
        let directory = try FixtureDirectory([
            "0001_create_alpha.sql": "CREATE TABLE alpha (id integer PRIMARY KEY);\n",
            "0002_half_way.sql": "CREATE TABLE half_way (id integer);\nINSERT INTO half_way VALUES (1);\nSELECT * FROM no_such_table;\n",
            "0003_create_gamma.sql": "CREATE TABLE gamma (id integer);\n",
        ])
        defer { directory.delete() }
        try await withDatabase { database in
            let migrator = Migrator(files: try directory.load(), logger: TestServer.logger)
            let error = await #expect(throws: MigrationError.self) { try await database.up(migrator) }
            #expect(error?.code == .migrationFailed)
            #expect(error?.exitCode == 1)
            #expect(error?.message.contains("0002_half_way.sql") == true, "\(error?.message ?? "")")

            #expect(try await database.tableExists("alpha"))
            #expect(try await !database.tableExists("half_way"))
            #expect(try await !database.tableExists("gamma"))
            #expect(try await database.history().map(\.version) == [1])
            let status = try await database.status(migrator)
            #expect(status.entries.map(\.state) == [.applied, .pending, .pending])

            // Fixing the file (it was never applied, so that is allowed) lets up go on.
            try directory.write("0002_half_way.sql", "CREATE TABLE half_way (id integer);\n")
            let fixed = Migrator(files: try directory.load(), logger: TestServer.logger)
            #expect(try await database.up(fixed).map(\.version) == [2, 3])
        }
    }

    @Test("a no-transaction file runs CREATE INDEX CONCURRENTLY; the same file in a transaction fails")
    func noTransactionDirective() async throws {
        let index = "CREATE INDEX CONCURRENTLY IF NOT EXISTS alpha_value ON alpha (value);\n"
        let directory = try FixtureDirectory([
            "0001_create_alpha.sql": "CREATE TABLE alpha (id integer PRIMARY KEY, value integer);\nINSERT INTO alpha SELECT n, n % 7 FROM generate_series(1, 100) AS n;\n",
            "0002_index_alpha.sql": "-- An index built without blocking writes.\n\(MigrationFile.noTransactionDirective)\n\(index)",
        ])
        defer { directory.delete() }
        try await withDatabase { database in
            let migrator = Migrator(files: try directory.load(), logger: TestServer.logger)
            #expect(migrator.files.map(\.isTransactional) == [true, false])
            let plan = try await database.plan(migrator)
            #expect(plan.contains("-- 0002_index_alpha.sql (\(migrator.files[1].checksum), outside a transaction)"), "\(plan)")

            #expect(try await database.up(migrator).map(\.version) == [1, 2])
            let valid = try await database.scalar(
                "SELECT count(*)::bigint FROM pg_index WHERE indexrelid = to_regclass('alpha_value') AND indisvalid AND indisready")
            #expect(valid == 1)

            // Without the directive the same statement runs in a transaction, which PostgreSQL refuses.
            try directory.write("0003_index_again.sql", "CREATE INDEX CONCURRENTLY alpha_value_again ON alpha (value);\n")
            let wrapped = Migrator(files: try directory.load(), logger: TestServer.logger)
            #expect(wrapped.files[2].isTransactional)
            let error = await #expect(throws: MigrationError.self) { try await database.up(wrapped) }
            #expect(error?.code == .migrationFailed)
            #expect(error?.message.contains("0003_index_again.sql") == true, "\(error?.message ?? "")")
            #expect(try await database.scalar("SELECT count(*)::bigint FROM pg_class WHERE relname = 'alpha_value_again'") == 0)
            #expect(try await database.history().map(\.version) == [1, 2])
        }
    }

    // MARK: - locks

    @Test("another migrator holding the lock makes up give up with lockBusy after the lock wait")
    func advisoryLockBusy() async throws {
        let directory = try FixtureDirectory(["0001_create_alpha.sql": "CREATE TABLE alpha (id integer);\n"])
        defer { directory.delete() }
        try await withDatabase { database in
            let migrator = Migrator(files: try directory.load(), lockWaitMilliseconds: 300, logger: TestServer.logger)
            try await withHeldSession(
                database.database.configuration, holding: "SELECT pg_advisory_lock(\(Migrator.advisoryLockKey))",
                until: "SELECT pg_advisory_unlock(\(Migrator.advisoryLockKey))"
            ) { () async throws in
                let started = ContinuousClock.now
                let error = await #expect(throws: MigrationError.self) { try await database.up(migrator) }
                let elapsed = ContinuousClock.now - started
                #expect(error?.code == .lockBusy)
                #expect(error?.exitCode == 75)
                #expect(error?.message.contains("more than 0.3 s") == true, "\(error?.message ?? "")")
                #expect(elapsed >= .milliseconds(250), "waited \(elapsed)")
                // Gives up rather than waiting for the holder, which holds the lock until this body returns (a
                // minute at most). 15 s was once too short on a CI machine running the whole suite.
                #expect(elapsed < .seconds(45), "waited \(elapsed)")
                #expect(try await !database.tableExists("alpha"))
                #expect(try await !database.tableExists(Migrator.historyTable))
            }
            // Once the other migrator is done, up goes through.
            #expect(try await database.up(migrator).map(\.version) == [1])
        }
    }

    @Test("a migration waiting past lock_timeout for a table lock fails with lockBusy and applies nothing")
    func tableLockTimeout() async throws {
        let directory = try FixtureDirectory(["0001_create_alpha.sql": "CREATE TABLE alpha (id integer);\n"])
        defer { directory.delete() }
        try await withDatabase { database in
            _ = try await database.up(Migrator(files: try directory.load(), logger: TestServer.logger))
            try directory.write("0002_alter_alpha.sql", "ALTER TABLE alpha ADD COLUMN note text;\n")
            let migrator = Migrator(files: try directory.load(), lockWaitMilliseconds: 5_000, lockTimeoutMilliseconds: 300, logger: TestServer.logger)
            try await withHeldSession(database.database.configuration, holding: "BEGIN; LOCK TABLE alpha IN ACCESS EXCLUSIVE MODE", until: "COMMIT") { () async throws in
                let started = ContinuousClock.now
                let error = await #expect(throws: MigrationError.self) { try await database.up(migrator) }
                let elapsed = ContinuousClock.now - started
                #expect(error?.code == .lockBusy)
                #expect(error?.exitCode == 75)
                #expect(error?.message.contains("0002_alter_alpha.sql") == true, "\(error?.message ?? "")")
                // Gives up rather than waiting for the holder, which holds the lock until this body returns (a
                // minute at most). 15 s was once too short on a CI machine running the whole suite.
                #expect(elapsed < .seconds(45), "waited \(elapsed)")
                #expect(try await database.history().map(\.version) == [1])
            }
            #expect(try await database.scalar("SELECT count(*)::bigint FROM information_schema.columns WHERE table_name = 'alpha' AND column_name = 'note'") == 0)
            #expect(try await database.up(migrator).map(\.version) == [2])
            #expect(try await database.scalar("SELECT count(*)::bigint FROM information_schema.columns WHERE table_name = 'alpha' AND column_name = 'note'") == 1)
        }
    }

    // MARK: - files

    @Test("a misnamed .sql file is refused by name")
    func misnamedFile() throws {
        for badName in ["1_short.sql", "0002_Upper.sql", "0002-dash.sql", "0002_.sql", "0000_zero.sql", "abcd_words.sql"] {
            let directory = try FixtureDirectory([
                "0001_create_alpha.sql": "CREATE TABLE alpha (id integer);\n",
                badName: "SELECT 1;\n",
            ])
            defer { directory.delete() }
            let error = #expect(throws: MigrationError.self) { try MigrationFile.load(from: directory.url) }
            #expect(error?.code == .invalidFile)
            #expect(error?.exitCode == 65)
            #expect(error?.message.contains(badName) == true, "\(error?.message ?? "")")
        }
    }

    @Test("files other than .sql are ignored, and files load sorted by version")
    func loadOrder() throws {
        let directory = try FixtureDirectory([
            "0010_tenth.sql": "SELECT 10;\n",
            "0002_second.sql": "SELECT 2;\n",
            "README.md": "not a migration\n",
            "0003_third.sql.orig": "not a migration either\n",
        ])
        defer { directory.delete() }
        let files = try MigrationFile.load(from: directory.url)
        #expect(files.map(\.fileName) == ["0002_second.sql", "0010_tenth.sql"])
        #expect(files.map(\.version) == [2, 10])
        #expect(files.map(\.name) == ["second", "tenth"])
    }

    @Test("two files with one version are refused, naming both")
    func duplicateVersions() throws {
        let directory = try FixtureDirectory([
            "0001_create_alpha.sql": "CREATE TABLE alpha (id integer);\n",
            "0002_first_idea.sql": "SELECT 1;\n",
            "00002_second_idea.sql": "SELECT 2;\n",
        ])
        defer { directory.delete() }
        let error = #expect(throws: MigrationError.self) { try MigrationFile.load(from: directory.url) }
        #expect(error?.code == .invalidFile)
        #expect(error?.message.contains("0002_first_idea.sql") == true, "\(error?.message ?? "")")
        #expect(error?.message.contains("00002_second_idea.sql") == true, "\(error?.message ?? "")")
    }

    @Test("a missing directory and a file that is not UTF-8 are invalid")
    func unreadableInput() throws {
        let missing = FileManager.default.temporaryDirectory.appendingPathComponent("reddot-no-such-dir-\(UUID().uuidString)")
        let directoryError = #expect(throws: MigrationError.self) { try MigrationFile.load(from: missing) }
        #expect(directoryError?.code == .invalidFile)

        let encodingError = #expect(throws: MigrationError.self) {
            try MigrationFile(fileName: "0001_latin1.sql", contents: [0x2D, 0x2D, 0x20, 0xE9, 0x0A])
        }
        #expect(encodingError?.code == .invalidFile)
        #expect(encodingError?.message.contains("0001_latin1.sql") == true)
    }

    @Test(
        "the checksum is the SHA-256 of the file's bytes",
        arguments: [
            ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
            ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
            // Padding edges: the length fits the first block, just does not, and fills it.
            (String(repeating: "a", count: 55), "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"),
            (String(repeating: "a", count: 56), "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"),
            (String(repeating: "a", count: 64), "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"),
            // 1,800 bytes: many blocks (the value is from sha256sum).
            (MigratorTests.longChecksumInput, "a029a0c2f9af9f0097098bcf140c9ed7462cd92d272d49f292f941cf47c71ffe"),
            // Multi-byte UTF-8 is hashed as bytes.
            ("-- ünïcode ✓ 日本\n", "f391dcec6e5e0ac5491bb77d4e10bf40dc1949787b3cd5e18130a1addcedcfcc"),
        ])
    func checksum(text: String, digest: String) throws {
        let file = try MigrationFile(fileName: "0001_checksum.sql", contents: Array(text.utf8))
        #expect(file.checksum == "sha256:\(digest)")
        #expect(file.sql == text)
    }

    @Test("the long checksum input is the 1,800 bytes that sha256sum hashed")
    func longChecksumInputShape() {
        let text = Self.longChecksumInput
        #expect(text.utf8.count == 1_800)
        #expect(text.hasPrefix("-- line 0000: RedDot checks every migration by its SHA-256.\n-- line 0001: "))
        #expect(text.hasSuffix("-- line 0029: RedDot checks every migration by its SHA-256.\n"))
    }

    /// 30 numbered lines, 1,800 bytes: 29 SHA-256 blocks.
    static let longChecksumInput = (0..<30).map { String(format: "-- line %04d: RedDot checks every migration by its SHA-256.\n", $0) }.joined()
}
