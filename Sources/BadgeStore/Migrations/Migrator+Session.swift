public import LibPQ
public import Logging

extension Migrator {
    /// Runs `body` with a migrator of `files` on one connection of its own, closed afterwards.
    /// Migrations may run long: the connection has no statement timeout, whatever `database` says.
    ///
    /// - Parameters:
    ///   - lockWaitSeconds: how long to wait for another migrator (at most `Int32.max / 1000`).
    ///   - lockTimeoutSeconds: how long a migration may wait for a table lock; 0 waits forever.
    /// - Throws: `MigrationError` or `PGError` from `body`; `PGError` when the database cannot be reached.
    public static func withConnection<T: Sendable>(
        files: [MigrationFile], database: PGConfiguration, lockWaitSeconds: Double, lockTimeoutSeconds: Double, logger: Logger,
        _ body: @escaping @Sendable (Migrator, PGConnection) throws -> T
    ) async throws -> T {
        let migrator = Migrator(
            files: files, lockWaitMilliseconds: milliseconds(lockWaitSeconds), lockTimeoutMilliseconds: milliseconds(lockTimeoutSeconds),
            logger: logger)
        var configuration = database
        configuration.statementTimeoutMilliseconds = 0
        let pool = PGPool(configuration: configuration, maximumConnections: 1, logger: logger)
        defer { pool.close() }
        return try await pool.withConnection { connection in try body(migrator, connection) }
    }

    /// Whole milliseconds for PostgreSQL's `lock_timeout`, rounded up: a wait of 0.0004 s is 1 ms,
    /// not 0, which PostgreSQL reads as no limit at all. 0 (or NaN) stays 0 (wait forever); a
    /// library caller's huge or infinite wait is PostgreSQL's longest, never a trap.
    static func milliseconds(_ seconds: Double) -> Int {
        guard seconds > 0 else { return 0 }
        return Int(min((seconds * 1000).rounded(.up), Double(Int32.max)))
    }
}
