import Foundation
public import LibPQ
public import Logging

/// The PostgreSQL server that `deploy/test.sh` started, and throwaway databases on it.
///
/// Tests that need PostgreSQL fail loudly when the environment does not name a server: run them
/// with `deploy/test.sh`, or export `REDDOT_TEST_DATABASE_URL` (a libpq URI of a database on a
/// server where the user may `CREATE DATABASE`).
public enum TestServer {
    /// The administrative connection string (the test script's `postgres` database).
    public static func adminURL() throws -> String {
        guard let url = ProcessInfo.processInfo.environment["REDDOT_TEST_DATABASE_URL"], !url.isEmpty else {
            throw TestSetupError(
                "REDDOT_TEST_DATABASE_URL is not set: run the tests with deploy/test.sh, which starts a throwaway PostgreSQL")
        }
        return url
    }

    /// A logger that only shows warnings (set `REDDOT_TEST_LOG=debug` for more).
    public static let logger: Logger = {
        var logger = Logger(label: "reddot.test")
        let level = ProcessInfo.processInfo.environment["REDDOT_TEST_LOG"].flatMap(Logger.Level.init(rawValue:))
        logger.logLevel = level ?? .warning
        return logger
    }()

    /// A second server that tests may restart (`pg_ctl restart`) without disturbing the others:
    /// its administrative URL and a `pg_ctl` wrapper for it (runs as the server's user).
    public static func restartable() throws -> (adminURL: String, pgCtl: String) {
        let values = try variables("REDDOT_TEST_RESTARTABLE_DATABASE_URL", "REDDOT_TEST_RESTARTABLE_PG_CTL")
        return (values[0], values[1])
    }

    /// A primary and a hot standby streaming from it (`deploy/test.sh` makes it with
    /// `pg_basebackup`): their administrative URLs. A database created on the primary appears
    /// on the standby once replayed.
    public static func replicated() throws -> (primaryURL: String, standbyURL: String) {
        let values = try variables("REDDOT_TEST_REPLICATED_DATABASE_URL", "REDDOT_TEST_STANDBY_DATABASE_URL")
        return (values[0], values[1])
    }

    /// The values of the variables `deploy/test.sh` exports, in order.
    ///
    /// - Throws: `TestSetupError` naming those that are missing or empty.
    private static func variables(_ names: String...) throws -> [String] {
        let environment = ProcessInfo.processInfo.environment
        let missing = names.filter { environment[$0]?.isEmpty ?? true }
        guard missing.isEmpty else {
            throw TestSetupError("\(missing.joined(separator: ", ")) not set: run the tests with deploy/test.sh")
        }
        return names.map { environment[$0] ?? "" }
    }
}

/// A database created for one test (or suite) and dropped by `drop()`.
public struct TestDatabase: Sendable {
    /// The database's name (`reddot_t_…`).
    public let name: String
    /// A libpq URI for it.
    public let url: String
    /// The server's administrative URL.
    public let adminURL: String

    /// A configuration for it.
    public var configuration: PGConfiguration { PGConfiguration(connectionString: url) }

    /// Creates an empty database with a unique name; `options` (trusted SQL, e.g. `TEMPLATE
    /// template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US'`) follow its name in `CREATE DATABASE`.
    public static func create(prefix: String = "t", server: String? = nil, options: String = "") async throws -> TestDatabase {
        let admin = try server ?? TestServer.adminURL()
        let suffix = UInt64.random(in: 0...UInt64.max)
        let name = "reddot_\(prefix)_\(String(suffix, radix: 36))".lowercased()
        let pool = PGPool(configuration: PGConfiguration(connectionString: admin), maximumConnections: 1, logger: TestServer.logger)
        defer { pool.close() }
        // The name is made of [a-z0-9_] only, so it is safe as an identifier.
        try await pool.withConnection { connection in
            try connection.execute(script: "CREATE DATABASE \(name) \(options)", name: "test.create_database")
        }
        return TestDatabase(name: name, url: Self.replacingDatabase(in: admin, with: name), adminURL: admin)
    }

    /// Drops the database, ending its other sessions first.
    public func drop() async {
        let admin = adminURL
        let pool = PGPool(configuration: PGConfiguration(connectionString: admin), maximumConnections: 1, logger: TestServer.logger)
        defer { pool.close() }
        let name = self.name
        _ = try? await pool.withConnection { connection in
            try connection.execute(script: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)", name: "test.drop_database")
        }
        SchemaLayout.dropOnWorkers(name)
    }

    /// The URL of this database on another server (a standby of its own).
    public func url(on server: String) -> String { Self.replacingDatabase(in: server, with: name) }

    /// Replaces the database part of a `postgresql://…/db?params` URI.
    static func replacingDatabase(in uri: String, with name: String) -> String {
        guard let schemeEnd = uri.range(of: "://") else { return "\(uri) dbname=\(name)" }
        let rest = uri[schemeEnd.upperBound...]
        let query = rest.firstIndex(of: "?").map { String(rest[$0...]) } ?? ""
        let beforeQuery = rest.firstIndex(of: "?").map { rest[..<$0] } ?? rest
        let authority = beforeQuery.firstIndex(of: "/").map { beforeQuery[..<$0] } ?? beforeQuery
        return "\(uri[..<schemeEnd.upperBound])\(authority)/\(name)\(query)"
    }
}

/// A test could not be set up (no server configured, …).
public struct TestSetupError: Error, CustomStringConvertible {
    /// What is missing.
    public let description: String
    /// Creates the error.
    public init(_ description: String) { self.description = description }
}

extension TestDatabase {
    /// The database goes away: new sessions are refused and its sessions are ended.
    public func beginOutage() async throws {
        try await allowConnections(false)
        try await admin { connection in
            try connection.query(
                PGStatement(
                    "test.terminate_sessions",
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
                    prepared: false),
                [name])
        }
    }

    /// The database accepts sessions again.
    public func endOutage() async throws {
        try await allowConnections(true)
    }

    private func allowConnections(_ allowed: Bool) async throws {
        // The name is made of [a-z0-9_] only, so it is safe as an identifier.
        let script = "ALTER DATABASE \(name) WITH ALLOW_CONNECTIONS \(allowed)"
        try await admin { connection in try connection.execute(script: script, name: "test.allow_connections") }
    }

    private func admin(_ body: @escaping @Sendable (PGConnection) throws -> Void) async throws {
        let pool = PGPool(configuration: PGConfiguration(connectionString: adminURL), maximumConnections: 1, logger: TestServer.logger)
        defer { pool.close() }
        try await pool.withConnection(body)
    }
}
