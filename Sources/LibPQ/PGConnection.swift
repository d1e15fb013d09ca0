internal import CLibPQ
public import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One libpq connection (`PGconn`).
///
/// Ownership: the connection owns its `PGconn` and finishes it exactly once (`close()` or
/// deinit), even after a failed connect. Every call blocks the calling thread, so it must never run
/// on Swift's cooperative pool: `PGPool` gives each connection its own serial queue and leases it
/// to one task at a time. Only `cancel()` may be called from another thread.
///
/// `@unchecked Sendable` because the type enforces that confinement itself rather than the
/// compiler: a statement (or a wait for notifications) started while another thread's is running
/// is refused with `PGError.Code.concurrentUse` before it reaches libpq (`LibPQTests` shows it),
/// so the mutable state below is only ever touched by one thread at a time.
public final class PGConnection: @unchecked Sendable {
    /// Set while a thread runs a statement or waits for notifications on this connection.
    private let busy = Atomic<Bool>(false)
    private var handle: OpaquePointer?
    private let cancelHandle: Mutex<CancelHandle>
    private let cancelRequested = Atomic<Bool>(false)
    private var prepared: Set<String> = []
    /// How many times each statement was prepared again after the server refused its prepared
    /// form (`PGError.preparedShapeChanged`): its server-side name (`serverName`) takes the
    /// count, so the new form needs no `DEALLOCATE` of the old one (left until the connection
    /// closes).
    private var reprepared: [String: Int] = [:]
    /// What callers looked up once about this connection's database (`remembered`).
    private var facts: [String: Bool] = [:]
    private let notices: NoticeSink
    /// The logger for notices and slow statements.
    public let logger: Logger

    private init(handle: OpaquePointer, logger: Logger) {
        self.handle = handle
        self.cancelHandle = Mutex(CancelHandle(pointer: PQgetCancel(handle)))
        self.logger = logger
        self.notices = NoticeSink(logger: logger)
        PQsetNoticeProcessor(
            handle,
            { context, message in
                guard let context, let message else { return }
                let sink = Unmanaged<NoticeSink>.fromOpaque(context).takeUnretainedValue()
                sink.receive(String(cString: message))
            }, Unmanaged.passUnretained(notices).toOpaque())
    }

    deinit { close() }

    /// The fact `key` about this connection's database (an extension installed, say): looked up
    /// by `lookUp` at the first call, then remembered for as long as the connection lives.
    public func remembered(_ key: String, _ lookUp: (PGConnection) throws(PGError) -> Bool) throws(PGError) -> Bool {
        if let known = facts[key] { return known }
        let value = try lookUp(self)
        facts[key] = value
        return value
    }

    /// Opens a connection with `PQconnectdbParams`, then applies the configuration's session settings.
    ///
    /// - Throws: `PGError` with code `.connectionFailed` (libpq's message, never the password).
    public static func connect(_ configuration: PGConfiguration, logger: Logger) throws(PGError) -> PGConnection {
        // Keywords before `dbname` are defaults the connection string may override; after it, they win.
        var pairs: [(String, String)] = [
            ("fallback_application_name", configuration.applicationName),
            ("connect_timeout", String(configuration.connectTimeoutSeconds)),
        ]
        if !configuration.connectionString.isEmpty {
            pairs.append(("dbname", configuration.connectionString))
        }
        pairs.append(("client_encoding", "UTF8"))
        let connection: OpaquePointer? = withCStringArray(pairs.map(\.0)) { keywords in
            withCStringArray(pairs.map(\.1)) { values in
                PQconnectdbParams(keywords, values, 1)
            }
        }
        guard let connection else {
            throw PGError(code: .connectionFailed, message: "libpq could not allocate a connection")
        }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = errorMessage(of: connection)
            PQfinish(connection)
            throw PGError(code: .connectionFailed, externalMessage: message)
        }
        let result = PGConnection(handle: connection, logger: logger)
        var settings: [(String, String)] = [("TimeZone", "UTC"), ("DateStyle", "ISO")]
        if let timeout = configuration.statementTimeoutMilliseconds {
            settings.append(("statement_timeout", String(timeout)))
        }
        settings += configuration.sessionSettings
        for (name, value) in settings {
            _ = try result.query(
                PGStatement("set_config", "SELECT set_config($1, $2, false)", prepared: false), [name, value])
        }
        return result
    }

    /// Whether the connection is open and not inside a transaction (fit to go back to a pool).
    public var isReusable: Bool {
        guard let handle, PQstatus(handle) == CONNECTION_OK else { return false }
        return PQtransactionStatus(handle) == PQTRANS_IDLE
    }

    /// Whether the connection is still open.
    public var isOpen: Bool {
        guard let handle else { return false }
        return PQstatus(handle) == CONNECTION_OK
    }

    /// The server's version number (`150004` for 15.4).
    public var serverVersion: Int {
        guard let handle else { return 0 }
        return Int(PQserverVersion(handle))
    }

    /// The server process id of this connection (for `pg_terminate_backend` in tests and ops).
    public var backendPID: Int32 {
        guard let handle else { return 0 }
        return PQbackendPID(handle)
    }

    /// Runs one statement with bound parameters (text format) and returns its rows.
    ///
    /// Prepared statements are prepared once per connection, by name. When the server refuses a
    /// prepared one because its result changed shape since (a migration altered a column it
    /// returns), it is prepared again: at once, and run again, outside a transaction block; at
    /// its next use inside one, whose unit of work the error (`preparedShapeChanged`, retriable)
    /// asks to run again. The parameters are never logged.
    /// - Throws: `PGError` (`.server` with SQLSTATE, `.connectionLost`, `.cancelled`).
    @discardableResult
    public func query(_ statement: PGStatement, _ parameters: [any PGBindable] = []) throws(PGError) -> PGResult {
        try enter(statement.name)
        defer { leave() }
        guard let handle else {
            throw PGError(code: .connectionLost, message: "the connection is closed", statement: statement.name)
        }
        try checkCancellation(statement.name)
        do {
            return try run(statement, parameters, on: handle)
        } catch let error where error.preparedShapeChanged && PQtransactionStatus(handle) == PQTRANS_IDLE {
            return try run(statement, parameters, on: handle)
        }
    }

    /// `query`'s work: prepares `statement` if this connection has not (again, under a new
    /// server-side name, after its form went stale), then runs it.
    private func run(_ statement: PGStatement, _ parameters: [any PGBindable], on handle: OpaquePointer) throws(PGError) -> PGResult {
        var preparedNow = false
        let serverName = reprepared[statement.name].map { "\(statement.name)#\($0)" } ?? statement.name
        if statement.prepared, !prepared.contains(statement.name) {
            let preparation = PQprepare(handle, serverName, statement.sql, Int32(parameters.count), nil)
            _ = try consume(preparation, statement: statement.name)
            prepared.insert(statement.name)
            preparedNow = true
        }
        let texts = parameters.map(\.pgText)
        let result: OpaquePointer? = withOptionalCStringArray(texts) { values in
            if statement.prepared {
                return PQexecPrepared(handle, serverName, Int32(texts.count), values, nil, nil, 0)
            }
            return PQexecParams(handle, statement.sql, Int32(texts.count), nil, values, nil, nil, 0)
        }
        do {
            return try consume(result, statement: statement.name)
        } catch var error where statement.prepared && !preparedNow && error.sqlState == "0A000" {
            // Only a form prepared earlier can be stale: the same error from one prepared just
            // now is the statement's own, and is not retried.
            prepared.remove(statement.name)
            reprepared[statement.name, default: 0] += 1
            error.preparedShapeChanged = true
            throw error
        }
    }

    /// Runs SQL text with the simple query protocol: several statements, no parameters (migrations,
    /// `BEGIN`/`COMMIT`). Only for trusted SQL; never for text that contains input.
    public func execute(script: String, name: String) throws(PGError) {
        try enter(name)
        defer { leave() }
        guard let handle else {
            throw PGError(code: .connectionLost, message: "the connection is closed", statement: name)
        }
        try checkCancellation(name)
        _ = try consume(PQexec(handle, script), statement: name)
    }

    /// Runs `body` in a transaction: `BEGIN`, then `COMMIT` if it returns, `ROLLBACK` if it throws.
    ///
    /// A failed `ROLLBACK` is logged and never hides the error that caused it.
    public func withTransaction<T>(
        _ isolation: PGIsolationLevel = .readCommitted, _ body: (PGConnection) throws -> T
    ) throws -> T {
        try execute(script: "BEGIN ISOLATION LEVEL \(isolation.sql)", name: "transaction.begin")
        let value: T
        do {
            value = try body(self)
        } catch {
            rollbackAfterFailure()
            throw error
        }
        try execute(script: "COMMIT", name: "transaction.commit")
        return value
    }

    private func rollbackAfterFailure() {
        guard let handle, PQstatus(handle) == CONNECTION_OK else { return }
        resetCancellation()
        do {
            try execute(script: "ROLLBACK", name: "transaction.rollback")
        } catch {
            logger.info("ROLLBACK failed after an error", metadata: [LogKey.error: "\(error)"])
        }
    }

    /// Asks the server to cancel the statement running now, and makes later statements of this
    /// lease fail with `.cancelled` until `resetCancellation()`. Safe from any thread.
    public func cancel() {
        cancelRequested.store(true, ordering: .releasing)
        cancelHandle.withLock { cancel in
            guard let cancel = cancel.pointer else { return }
            var buffer = [CChar](repeating: 0, count: 256)
            _ = PQcancel(cancel, &buffer, Int32(buffer.count))
        }
    }

    /// Forgets an earlier `cancel()` (the pool calls it when it leases the connection anew).
    public func resetCancellation() {
        cancelRequested.store(false, ordering: .releasing)
    }

    private func checkCancellation(_ statement: String) throws(PGError) {
        if cancelRequested.load(ordering: .acquiring) {
            throw PGError(code: .cancelled, message: "the statement was cancelled before it started", statement: statement)
        }
    }

    /// Marks the connection in use by this thread; refuses (`.concurrentUse`) when another has it.
    private func enter(_ statement: String) throws(PGError) {
        guard busy.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged else {
            throw PGError(
                code: .concurrentUse,
                message: "the connection is running another thread's statement; a connection serves one thread at a time (lease it from a PGPool)",
                statement: statement)
        }
    }

    private func leave() {
        busy.store(false, ordering: .releasing)
    }

    /// Finishes the connection (`PQfinish`); later calls throw `.connectionLost`. Idempotent.
    public func close() {
        cancelHandle.withLock { cancel in
            if let pointer = cancel.pointer { PQfreeCancel(pointer) }
            cancel.pointer = nil
        }
        if let handle {
            PQfinish(handle)
            self.handle = nil
        }
    }

    /// Waits up to `timeoutMilliseconds` for `NOTIFY` messages on channels this connection LISTENs
    /// to, and returns those that arrived (possibly none).
    ///
    /// A socket that is readable because the server closed it, or that failed, ends in
    /// `.connectionLost` (libpq reads the end of the stream and drops the connection), so a
    /// caller that reconnects on that error never polls a dead socket again.
    ///
    /// - Throws: `PGError.Code.connectionLost` when the connection broke.
    public func waitForNotifications(timeoutMilliseconds: Int32) throws(PGError) -> [PGNotification] {
        try enter("wait for notifications")
        defer { leave() }
        guard let handle else { throw PGError(code: .connectionLost, message: "the connection is closed") }
        var received = drainNotifications(handle)
        if !received.isEmpty { return received }
        let socket = PQsocket(handle)
        guard socket >= 0, PQstatus(handle) == CONNECTION_OK else {
            throw PGError(code: .connectionLost, externalMessage: PGConnection.errorMessage(of: handle))
        }
        var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        let ready = poll(&descriptor, 1, timeoutMilliseconds)
        if ready < 0, errno != EINTR {
            throw PGError(code: .connectionLost, message: "poll failed on the connection socket (errno \(errno))")
        }
        if ready > 0, descriptor.revents & Int16(POLLNVAL) != 0 {
            throw PGError(code: .connectionLost, message: "the connection socket is not open")
        }
        if ready > 0 {
            guard PQconsumeInput(handle) == 1 else {
                throw PGError(code: .connectionLost, externalMessage: PGConnection.errorMessage(of: handle))
            }
            received = drainNotifications(handle)
        }
        if PQstatus(handle) != CONNECTION_OK {
            throw PGError(code: .connectionLost, externalMessage: PGConnection.errorMessage(of: handle))
        }
        return received
    }

    private func drainNotifications(_ handle: OpaquePointer) -> [PGNotification] {
        var received: [PGNotification] = []
        while let notification = PQnotifies(handle) {
            let item = notification.pointee
            received.append(
                PGNotification(
                    channel: item.relname.map { String(cString: $0) } ?? "",
                    payload: item.extra.map { String(cString: $0) } ?? "",
                    senderPID: item.be_pid))
            PQfreemem(notification)
        }
        return received
    }

    /// Turns a `PGresult` into a `PGResult` or a `PGError`, clearing it exactly once.
    private func consume(_ result: OpaquePointer?, statement: String) throws(PGError) -> PGResult {
        guard let handle else { throw PGError(code: .connectionLost, message: "the connection is closed") }
        guard let result else {
            let lost = PQstatus(handle) != CONNECTION_OK
            throw PGError(
                code: lost ? .connectionLost : .client, externalMessage: PGConnection.errorMessage(of: handle),
                statement: statement)
        }
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        switch status {
        case PGRES_TUPLES_OK, PGRES_COMMAND_OK, PGRES_EMPTY_QUERY:
            return Self.copy(result, statement: statement)
        default:
            throw Self.error(from: result, connection: handle, statement: statement)
        }
    }

    private static func copy(_ result: OpaquePointer, statement: String) -> PGResult {
        let columnCount = Int(PQnfields(result))
        let rowCount = Int(PQntuples(result))
        var columns: [String] = []
        columns.reserveCapacity(columnCount)
        for column in 0..<columnCount {
            columns.append(PQfname(result, Int32(column)).map { String(cString: $0) } ?? "")
        }
        var rows: [PGRow] = []
        rows.reserveCapacity(rowCount)
        for row in 0..<rowCount {
            var values: [String?] = []
            values.reserveCapacity(columnCount)
            for column in 0..<columnCount {
                if PQgetisnull(result, Int32(row), Int32(column)) == 1 {
                    values.append(nil)
                } else {
                    values.append(PQgetvalue(result, Int32(row), Int32(column)).map { String(cString: $0) })
                }
            }
            rows.append(PGRow(values: values, statement: statement))
        }
        let tuples = PQcmdTuples(result).map { String(cString: $0) } ?? ""
        return PGResult(columns: columns, rows: rows, affectedRows: Int(tuples) ?? 0, statement: statement)
    }

    private static func error(from result: OpaquePointer, connection: OpaquePointer, statement: String) -> PGError {
        func field(_ code: Character) -> String? {
            guard let ascii = code.asciiValue, let value = PQresultErrorField(result, Int32(ascii)) else { return nil }
            return String(cString: value)
        }
        let sqlState = field("C")
        let message = field("M") ?? errorMessage(of: connection)
        var code: PGError.Code = .server
        if PQstatus(connection) != CONNECTION_OK {
            code = .connectionLost
        } else if sqlState == "57014" {
            code = .cancelled
        }
        return PGError(
            code: code, sqlState: sqlState, externalMessage: message, detail: field("D"), hint: field("H"),
            statement: statement)
    }

    static func errorMessage(of connection: OpaquePointer) -> String {
        guard let text = PQerrorMessage(connection) else { return "unknown libpq error" }
        let message = String(cString: text).trimmingWhitespace()
        return message.isEmpty ? "unknown libpq error" : message
    }
}

/// Transaction isolation levels.
public enum PGIsolationLevel: Sendable {
    /// PostgreSQL's default.
    case readCommitted
    /// Snapshot isolation.
    case repeatableRead
    /// Full serializability (retry on `40001`).
    case serializable

    var sql: String {
        switch self {
        case .readCommitted: return "READ COMMITTED"
        case .repeatableRead: return "REPEATABLE READ"
        case .serializable: return "SERIALIZABLE"
        }
    }
}

/// A `NOTIFY` message.
public struct PGNotification: Sendable, Hashable {
    /// The channel it was sent on.
    public var channel: String
    /// The payload text (may be empty).
    public var payload: String
    /// The sending server process.
    public var senderPID: Int32
}

/// Metadata keys used in LibPQ's log lines.
public enum LogKey {
    /// The error that was logged.
    public static let error = "db.error"
    /// The SQLSTATE of a server error.
    public static let sqlState = "db.sqlstate"
    /// A statement's name.
    public static let statement = "db.statement"
}

/// libpq's `PGcancel`, freed by `PGConnection.close()`; guarded by a mutex because `PQcancel` may
/// run on another thread.
private struct CancelHandle: @unchecked Sendable {
    var pointer: OpaquePointer?
}

/// Receives server notices (`NOTICE: relation already exists, skipping`) into the logger.
private final class NoticeSink: @unchecked Sendable {
    let logger: Logger
    init(logger: Logger) { self.logger = logger }
    func receive(_ message: String) {
        logger.debug("server notice", metadata: ["db.notice": "\(message.trimmingWhitespace())"])
    }
}

extension String {
    func trimmingWhitespace() -> String {
        var scalars = Substring(self)
        while let last = scalars.last, last.isWhitespace { scalars.removeLast() }
        while let first = scalars.first, first.isWhitespace { scalars.removeFirst() }
        return String(scalars)
    }
}

/// Calls `body` with a NULL-terminated array of C strings that live for the call.
private func withCStringArray<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    let copies = strings.map { strdup($0) }
    defer { copies.forEach { free($0) } }
    let pointers: [UnsafePointer<CChar>?] = copies.map { $0.map { UnsafePointer($0) } } + [nil]
    return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}

/// Calls `body` with an array of C strings where `nil` stays a null pointer (SQL NULL).
private func withOptionalCStringArray<R>(
    _ strings: [String?], _ body: (UnsafePointer<UnsafePointer<CChar>?>?) -> R
) -> R {
    let copies = strings.map { $0.flatMap { strdup($0) } }
    defer { copies.forEach { free($0) } }
    let pointers: [UnsafePointer<CChar>?] = copies.map { $0.map { UnsafePointer($0) } }
    return pointers.withUnsafeBufferPointer { body($0.baseAddress) }
}
