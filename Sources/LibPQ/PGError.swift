/// An error from PostgreSQL or from libpq.
///
/// It keeps the SQLSTATE, the server's message, the name of the statement that failed (never its
/// bound values) and whether retrying the whole unit of work may succeed.
public struct PGError: Error, Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// What kind of failure this is. Extensible: switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }
        /// libpq could not open a connection (bad address, refused, authentication failed, …).
        public static let connectionFailed = Code("connectionFailed")
        /// The connection broke while in use; the connection is no longer usable.
        public static let connectionLost = Code("connectionLost")
        /// The server answered a statement with an error; `sqlState` says which.
        public static let server = Code("server")
        /// The statement was cancelled (task cancellation or `statement_timeout`).
        public static let cancelled = Code("cancelled")
        /// A result value could not be decoded into the requested Swift type.
        public static let decoding = Code("decoding")
        /// A deadline passed first (`PGPool.withConnection(deadline:)`): no connection was free or
        /// could be opened in time, or the statement was still running (it is cancelled).
        public static let timedOut = Code("timedOut")
        /// The pool was shut down.
        public static let poolClosed = Code("poolClosed")
        /// Anything else libpq reported (out of memory, protocol errors).
        public static let client = Code("client")
        /// A statement was started on a connection another thread was using: a mistake of the
        /// caller (a connection serves one thread at a time), refused before it reached libpq.
        public static let concurrentUse = Code("concurrentUse")
        /// The code's name (`server`, `connectionLost`, …).
        public var description: String { name }
    }

    /// The kind of failure.
    public var code: Code
    /// The five-character SQLSTATE when the server sent one (`40001`, `23505`, …).
    public var sqlState: String?
    /// The primary message, from the server or libpq.
    public var message: String
    /// The server's DETAIL field, if any.
    public var detail: String?
    /// The server's HINT field, if any.
    public var hint: String?
    /// The name of the statement that failed (never its parameters).
    public var statement: String?

    /// Creates an error.
    public init(
        code: Code, sqlState: String? = nil, message: String, detail: String? = nil,
        hint: String? = nil, statement: String? = nil
    ) {
        self.code = code
        self.sqlState = sqlState
        self.message = message
        self.detail = detail
        self.hint = hint
        self.statement = statement
    }

    /// Whether the server refused to run a statement this connection had prepared because its
    /// result's shape changed since (SQLSTATE `0A000`, "cached plan must not change result
    /// type": a migration altered a column it returns, its collation included). The connection
    /// prepares it again at its next use, so running the unit of work again succeeds.
    public var preparedShapeChanged = false

    /// Whether `message`, `detail` and `hint` came from the server or libpq (and may quote data)
    /// rather than from this wrapper: `description` then leaves them out.
    var messageIsExternal = false

    /// An error whose message (and detail and hint) the server or libpq wrote.
    init(
        code: Code, sqlState: String? = nil, externalMessage: String, detail: String? = nil,
        hint: String? = nil, statement: String? = nil
    ) {
        self.init(code: code, sqlState: sqlState, message: externalMessage, detail: detail, hint: hint, statement: statement)
        messageIsExternal = true
    }

    /// Whether running the whole unit of work again may succeed: serialization failures,
    /// deadlocks, lost connections, server shutdown or start-up, connection failures, and a
    /// prepared statement whose result changed shape (`preparedShapeChanged`).
    public var isRetriable: Bool {
        if preparedShapeChanged { return true }
        switch code {
        case .connectionFailed, .connectionLost: return true
        default: break
        }
        guard let sqlState else { return false }
        if sqlState.hasPrefix("08") { return true }  // connection exception
        switch sqlState {
        case "40001",  // serialization_failure
            "40P01",  // deadlock_detected
            "57P01",  // admin_shutdown
            "57P02",  // crash_shutdown
            "57P03",  // cannot_connect_now
            "53300",  // too_many_connections
            "55P03":  // lock_not_available (lock_timeout)
            return true
        default: return false
        }
    }

    /// Whether the server reported a unique, foreign-key or check violation (class 23).
    public var isIntegrityViolation: Bool { sqlState?.hasPrefix("23") ?? false }

    /// For logs: the statement's name, the code and the SQLSTATE, and the message only when this
    /// wrapper wrote it or it says why a connection failed (libpq's words on the host, the port,
    /// the role or the database: what an operator needs, never the password). The server's
    /// message, detail and hint are left out, as they can quote data (a duplicate key's value, a
    /// row); `debugDescription` has them.
    public var description: String { summary(messageIsExternal && code != .connectionFailed ? "\(code) error" : message) }

    /// Everything: the statement's name, the message, the SQLSTATE, the detail and the hint. For a
    /// person who needs the server's words to act (a failed migration, a refused connection);
    /// not for logs.
    public var debugDescription: String {
        var text = summary(message)
        if let detail, !detail.isEmpty { text += "; detail: \(detail)" }
        if let hint, !hint.isEmpty { text += "; hint: \(hint)" }
        return text
    }

    /// `statement: text (SQLSTATE x)`.
    private func summary(_ text: String) -> String {
        var summary = text
        if let statement { summary = "\(statement): \(summary)" }
        if let sqlState { summary += " (SQLSTATE \(sqlState))" }
        return summary
    }
}
