public import BadgeStore
import Foundation
public import LibPQ
public import Logging

/// The scratch database of one bench run: created on the server the user named, migrated with
/// the real migrations, dropped afterwards unless kept. Nothing touches real data.
public enum BenchScratch {
    /// The opening paragraph of every bench's help.
    public static let discussion = """
        Nothing touches real data. The bench creates a scratch database reddot_bench_<random> \
        on the server of --database-url (so that role needs CREATEDB), migrates it with the \
        real migrations, runs everything there and drops it at the end (unless --keep). An \
        interrupted bench leaves its scratch database behind: drop it by hand.


        """

    /// The scratch database could not be created (or the server not reached).
    public struct CreateError: Error, CustomStringConvertible {
        /// The sentence for the user: what failed, then the database's error.
        public let description: String
        /// The database's error.
        public let underlying: PGError
    }

    /// Creates `reddot_bench_<runID>` on `server`, migrates it with `migrations`, and runs `body`
    /// with its configuration, name and the server's version; drops it afterwards (also on
    /// failure) unless `keep`.
    ///
    /// - Throws: ``CreateError`` when the database cannot be created; whatever migrating or
    ///   `body` throws, after the drop.
    public static func run<T>(
        runID: String, server: PGConfiguration, applicationName: String, migrations files: [MigrationFile], keep: Bool,
        logger: Logger, _ body: (PGConfiguration, String, String) async throws -> T
    ) async throws -> T {
        let name = "reddot_bench_\(runID)"
        let scratch = PGConfiguration(
            connectionString: connectionString(server.connectionString, database: name), applicationName: applicationName)
        let serverVersion = try await createDatabase(name, server: server, logger: logger)
        let value: T
        do {
            let pool = PGPool(configuration: scratch, maximumConnections: 1, logger: logger)
            defer { pool.close() }
            let migrator = Migrator(files: files, logger: logger)
            try await pool.withConnection { connection in _ = try migrator.up(on: connection) }
            value = try await body(scratch, name, serverVersion)
        } catch {
            if !keep { await dropDatabase(name, server: server, logger: logger) }
            throw error
        }
        if !keep { await dropDatabase(name, server: server, logger: logger) }
        return value
    }

    /// `server` with its database replaced by `name`: a URI's path, or a `dbname=` key
    /// appended to a key=value string (a later key wins in libpq).
    public static func connectionString(_ server: String, database name: String) -> String {
        guard let schemeEnd = server.range(of: "://") else {
            return server.isEmpty ? "dbname=\(name)" : "\(server) dbname=\(name)"
        }
        let rest = server[schemeEnd.upperBound...]
        let queryStart = rest.firstIndex(of: "?") ?? rest.endIndex
        let authorityEnd = rest[..<queryStart].firstIndex(of: "/") ?? queryStart
        return String(server[..<authorityEnd]) + "/" + name + String(server[queryStart...])
    }

    /// Creates the scratch database; returns the server's version.
    static func createDatabase(_ name: String, server: PGConfiguration, logger: Logger) async throws -> String {
        let pool = PGPool(configuration: server, maximumConnections: 1, logger: logger)
        defer { pool.close() }
        do {
            return try await pool.withConnection { connection in
                // The name is ours (letters and digits), never input: it cannot be bound.
                _ = try connection.query(PGStatement("bench.create_database", "CREATE DATABASE \(name)", prepared: false))
                return try connection.query(PGStatement("bench.server_version", "SHOW server_version", prepared: false))
                    .singleRow().decode(0, as: String.self)
            }
        } catch let error as PGError {
            let what = error.code == .connectionFailed ? "cannot connect to the database" : "cannot create the scratch database \(name)"
            throw CreateError(description: "\(what): \(error)", underlying: error)
        }
    }

    static func dropDatabase(_ name: String, server: PGConfiguration, logger: Logger) async {
        let pool = PGPool(configuration: server, maximumConnections: 1, logger: logger)
        defer { pool.close() }
        do {
            try await pool.withConnection { connection in
                _ = try connection.query(PGStatement("bench.drop_database", "DROP DATABASE IF EXISTS \(name) WITH (FORCE)", prepared: false))
            }
        } catch {
            FileHandle.standardError.write(Data("reddot: could not drop the scratch database \(name): \(error)\n".utf8))
        }
    }

    /// PostgreSQL's durability settings (`fsync`, `synchronous_commit`, `full_page_writes`) and
    /// those that size its memory and write-ahead log (`shared_buffers`, `max_wal_size`,
    /// `checkpoint_timeout`, `wal_compression`), as a session of `database` sees them: what
    /// the reports name.
    public static func durabilitySettings(_ database: PGConfiguration, logger: Logger) async throws -> [String: String] {
        let pool = PGPool(configuration: database, maximumConnections: 1, logger: logger)
        defer { pool.close() }
        return try await pool.withConnection { connection in
            var values: [String: String] = [:]
            for name in ["fsync", "synchronous_commit", "full_page_writes", "shared_buffers", "max_wal_size", "checkpoint_timeout", "wal_compression"] {
                // The names are ours, never input.
                values[name] = try connection.query(PGStatement("bench.show_setting", "SHOW \(name)", prepared: false))
                    .singleRow().decode(0, as: String.self)
            }
            return values
        }
    }

    /// The report in snake-case JSON, pretty-printed with sorted keys: what `--json` prints.
    public static func json(_ report: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.keyEncodingStrategy = .convertToSnakeCase
        return String(decoding: try encoder.encode(report), as: UTF8.self)
    }
}
