import BadgeStore
import Foundation
import LibPQ
import TestSupport

/// The fixtures of ``MigratorTests``: a database of its own, a directory of migration files.
extension MigratorTests {
    /// Runs `body` on a fresh database, dropped afterwards.
    func withDatabase(_ body: (MigrationDatabase) async throws -> Void) async throws {
        let database = MigrationDatabase(database: try await TestDatabase.create(prefix: "mig"))
        do {
            try await body(database)
        } catch {
            await database.close()
            throw error
        }
        await database.close()
    }

    /// What one of the concurrent migrators did, and when.
    struct MigratorRun: Sendable {
        var applied: [String]
        var started: ContinuousClock.Instant
        var finished: ContinuousClock.Instant
    }

    /// A temporary directory of migration files, unique to one test.
    struct FixtureDirectory {
        let url: URL

        init(_ files: [String: String]) throws {
            url = FileManager.default.temporaryDirectory.appendingPathComponent("reddot-migrations-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
            for (name, text) in files { try write(name, text) }
        }

        func write(_ name: String, _ text: String) throws {
            try Data(text.utf8).write(to: url.appendingPathComponent(name))
        }

        func remove(_ name: String) throws {
            try FileManager.default.removeItem(at: url.appendingPathComponent(name))
        }

        func load() throws -> [MigrationFile] {
            try MigrationFile.load(from: url)
        }

        func delete() {
            try? FileManager.default.removeItem(at: url)
        }
    }

    /// One test's database, with the few queries the tests need.
    struct MigrationDatabase: Sendable {
        let database: TestDatabase
        let pool: PGPool

        init(database: TestDatabase) {
            self.database = database
            self.pool = PGPool(configuration: database.configuration, maximumConnections: 1, logger: TestServer.logger)
        }

        var url: String { database.url }

        struct HistoryRow: Hashable, Sendable {
            var version: Int
            var fileName: String
            var checksum: String
        }

        func up(_ migrator: Migrator) async throws -> [MigrationFile] {
            try await pool.withConnection { connection in try migrator.up(on: connection) }
        }

        /// Applies `files` up to `version` (an older schema, for a migration's test).
        @discardableResult
        func up(through version: Int, of files: [MigrationFile]) async throws -> [MigrationFile] {
            try await up(Migrator(files: files.filter { $0.version <= version }, logger: TestServer.logger))
        }

        func status(_ migrator: Migrator) async throws -> MigrationStatus {
            try await pool.withConnection { connection in try migrator.status(on: connection) }
        }

        @discardableResult
        func verify(_ migrator: Migrator, failIfPending: Bool = false) async throws -> MigrationStatus {
            try await pool.withConnection { connection in try migrator.verify(on: connection, failIfPending: failIfPending) }
        }

        func plan(_ migrator: Migrator, online: Bool = false) async throws -> String {
            try await pool.withConnection { connection in try migrator.plan(on: connection, online: online) }
        }

        /// The history table's rows by version; empty when it does not exist yet.
        func history() async throws -> [HistoryRow] {
            guard try await tableExists(Migrator.historyTable) else { return [] }
            return try await pool.withConnection { connection in
                try connection.query(
                    PGStatement("test.history", "SELECT version, file_name, checksum FROM \(Migrator.historyTable) ORDER BY version", prepared: false)
                ).rows.map { row in
                    HistoryRow(version: try row.decode(0), fileName: try row.decode(1), checksum: try row.decode(2))
                }
            }
        }

        func tableExists(_ name: String) async throws -> Bool {
            try await pool.withConnection { connection in
                try connection.query(PGStatement("test.table_exists", "SELECT to_regclass($1) IS NOT NULL", prepared: false), [name])
                    .singleRow().decode(0, as: Bool.self)
            }
        }

        /// The single `bigint` that `sql` (fixed test SQL, no input) returns.
        func scalar(_ sql: String) async throws -> Int64 {
            try await pool.withConnection { connection in
                try connection.query(PGStatement("test.scalar", sql, prepared: false)).singleRow().decode(0, as: Int64.self)
            }
        }

        func close() async {
            pool.close()
            await database.drop()
        }
    }
}
