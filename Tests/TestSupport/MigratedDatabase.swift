public import BadgeStore
public import Foundation
public import LibPQ
public import Logging

/// The folders of this repository that tests read.
public enum Repository {
    /// The checkout's root folder.
    public static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The repository's `migrations` folder, the one `reddot migrate` applies.
    public static let migrationsDirectory = root.appendingPathComponent("migrations")

    /// The repository's migration files, read and parsed once per test process: hundreds of
    /// fixtures migrate a database each, and parsing the files every time kept the cooperative
    /// pool's two threads busy for tens of seconds at the start of a run (a client test's
    /// polls then started 11 s late and failed).
    public static func migrationFiles() throws -> [MigrationFile] {
        try loadedMigrations.get()
    }

    private static let loadedMigrations = Result { try MigrationFile.load(from: migrationsDirectory) }
}

/// A throwaway database with the repository's migrations applied, and a pool on it (with
/// BadgeStore's recommended session settings). The caller owns both: ``drop()`` closes the pool
/// and drops the database.
public struct MigratedDatabase: Sendable {
    /// The database (`reddot_<prefix>_…`).
    public let database: TestDatabase
    /// A pool on it.
    public let pool: PGPool

    /// Creates a database on `server` (the test server by default), a pool of `connections` on
    /// it, applies the repository's migrations and lays the tables out as `layout` says; throws
    /// (leaving nothing behind) when any step fails.
    public static func create(
        prefix: String, server: String? = nil, connections: Int = 4, layout: SchemaLayout = .fromEnvironment, logger: Logger = TestServer.logger
    ) async throws -> MigratedDatabase {
        let database = try await TestDatabase.create(prefix: prefix, server: server)
        let pool = PGPool(
            configuration: PGConfiguration(connectionString: database.url, sessionSettings: BadgeStore.recommendedSessionSettings),
            maximumConnections: connections, logger: logger)
        do {
            try await migrate(pool, logger: logger)
            try await pool.withConnection { connection in try layout.apply(on: connection) }
        } catch {
            pool.close()
            await database.drop()
            throw error
        }
        return MigratedDatabase(database: database, pool: pool)
    }

    /// Runs `body` on a fresh migrated database (see ``create(prefix:server:connections:logger:)``),
    /// dropped afterwards even when `body` throws; rethrows what `body` throws.
    public static func with<T>(
        prefix: String, connections: Int = 4, _ body: (MigratedDatabase) async throws -> T
    ) async throws -> T {
        let migrated = try await create(prefix: prefix, connections: connections)
        do {
            let value = try await body(migrated)
            await migrated.drop()
            return value
        } catch {
            await migrated.drop()
            throw error
        }
    }

    /// Applies the repository's migrations to the database of `pool`; throws what loading the
    /// files or applying them throws.
    public static func migrate(_ pool: PGPool, logger: Logger = TestServer.logger) async throws {
        let migrator = Migrator(files: try Repository.migrationFiles(), logger: logger)
        try await pool.withConnection { connection in _ = try migrator.up(on: connection) }
    }

    /// Closes the pool and drops the database.
    public func drop() async {
        pool.close()
        await database.drop()
    }
}
