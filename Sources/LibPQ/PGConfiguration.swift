internal import CLibPQ

/// How to reach PostgreSQL, following libpq's own conventions.
///
/// `connectionString` may be a URI (`postgresql://user@host:5432/db?sslmode=require`), a
/// `key=value` string, or empty: libpq then falls back to the `PG*` environment variables and
/// `~/.pgpass`, exactly as `psql` does. Multi-host URIs with `target_session_attrs` work as in libpq.
public struct PGConfiguration: Sendable {
    /// A libpq connection URI or `key=value` string; empty means "from `PG*` variables".
    public var connectionString: String
    /// Sent as `fallback_application_name`; a value in the connection string wins.
    public var applicationName: String
    /// Seconds libpq waits to connect, unless the connection string sets `connect_timeout`.
    public var connectTimeoutSeconds: Int
    /// `statement_timeout` set on every new connection, in milliseconds; `nil` keeps the server's.
    public var statementTimeoutMilliseconds: Int?
    /// Extra settings sent with `SET` after connecting (name → value), e.g. `jit` → `off`.
    public var sessionSettings: [(name: String, value: String)]

    /// Creates a configuration.
    public init(
        connectionString: String = "",
        applicationName: String = "reddot",
        connectTimeoutSeconds: Int = 10,
        statementTimeoutMilliseconds: Int? = nil,
        sessionSettings: [(name: String, value: String)] = []
    ) {
        self.connectionString = connectionString
        self.applicationName = applicationName
        self.connectTimeoutSeconds = connectTimeoutSeconds
        self.statementTimeoutMilliseconds = statementTimeoutMilliseconds
        self.sessionSettings = sessionSettings
    }
}

extension PGConfiguration {
    /// Why libpq cannot read `text` as a connection URI or `key=value` string (its own sentence,
    /// from `PQconninfoParse`), or nil when it can. A service checks its URL with this at start:
    /// a connection attempt would only fail, again and again, with the same sentence.
    public static func connectionStringProblem(_ text: String) -> String? {
        var message: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(text, &message) else {
            defer { if let message { PQfreemem(message) } }
            var sentence = message.map { String(cString: $0) } ?? ""
            while let last = sentence.last, last.isWhitespace { sentence.removeLast() }
            return sentence.isEmpty ? "libpq could not read it" : sentence
        }
        PQconninfoFree(options)
        return nil
    }
}
