public import Foundation
public import LibPQ
public import Logging

/// Applies the numbered SQL files of `migrations/` and keeps their history, with checksums, in
/// `reddot_schema_migrations`.
///
/// All work happens on one connection, under a session-level advisory lock, so concurrent
/// migrators apply each file exactly once: the others wait up to `lockWaitMilliseconds` and then
/// see the files as applied (or give up with `.lockBusy`). Every step blocks its thread: call it
/// through `PGPool.withConnection`.
public struct Migrator: Sendable {
    /// The files, sorted by version.
    public let files: [MigrationFile]
    /// How long to wait for another migrator to finish, in milliseconds.
    public var lockWaitMilliseconds: Int
    /// `lock_timeout` while a migration runs, so it never queues for long behind a long
    /// transaction (and blocks everything behind itself); 0 disables it.
    public var lockTimeoutMilliseconds: Int
    private let logger: Logger

    /// The advisory lock key: "reddot" in ASCII.
    public static let advisoryLockKey: Int64 = 0x7265_6464_6F74
    /// The history table.
    public static let historyTable = "reddot_schema_migrations"

    /// Creates a migrator for `files`.
    public init(files: [MigrationFile], lockWaitMilliseconds: Int = 60_000, lockTimeoutMilliseconds: Int = 10_000, logger: Logger) {
        self.files = files.sorted { $0.version < $1.version }
        self.lockWaitMilliseconds = lockWaitMilliseconds
        self.lockTimeoutMilliseconds = lockTimeoutMilliseconds
        self.logger = logger
    }

    /// One row of the history table.
    public struct AppliedMigration: Sendable, Hashable {
        /// The file's version.
        public var version: Int
        /// The file's name when it was applied.
        public var fileName: String
        /// Its checksum when it was applied.
        public var checksum: String
        /// When it was applied.
        public var appliedAt: Date
    }

    // MARK: - status

    /// Compares the files with the history. Read-only; takes no lock.
    public func status(on connection: PGConnection) throws -> MigrationStatus {
        let applied = try readHistory(on: connection)
        return MigrationStatus(files: files, applied: applied)
    }

    /// Fails with `.historyMismatch`, naming every file, when an applied file was edited or is
    /// missing, or a new file sorts before an applied one; and, with `failIfPending`, with
    /// `.pending` when files wait to be applied.
    public func verify(on connection: PGConnection, failIfPending: Bool = false) throws -> MigrationStatus {
        let status = try status(on: connection)
        try status.requireConsistent()
        if failIfPending, status.pendingCount > 0 {
            let names = status.entries.filter { $0.state == .pending }.map(\.file).joined(separator: ", ")
            throw MigrationError(.pending, "\(status.pendingCount) migration(s) not applied yet: \(names)")
        }
        return status
    }

    /// The SQL `up` would run now, file by file, with the transaction around each; with
    /// `online`, a file's online form where it has one (`OnlineCollationChange`, as the catalog
    /// stands now).
    public func plan(on connection: PGConnection, online: Bool = false) throws -> String {
        let status = try status(on: connection)
        try status.requireConsistent()
        let pending = files.filter { file in status.entries.contains { $0.version == file.version && $0.state == .pending } }
        if pending.isEmpty { return "-- nothing to apply: the schema is current\n" }
        var text = ""
        for file in pending {
            if online, OnlineCollationChange.versions.contains(file.version) {
                do {
                    if let change = try OnlineCollationChange.prepare(file, on: connection) {
                        text += onlinePlan(file, change)
                        continue
                    }
                    text += "-- \(file.fileName): no online form needed (the layout is partitioned or distributed by user; the file leaves it as it is)\n"
                } catch let error as MigrationError {
                    text += "-- \(error.message.replacingOccurrences(of: "\n", with: " "))\n"
                }
            }
            text += "-- \(file.fileName) (\(file.checksum), \(file.isTransactional ? "in a transaction" : "outside a transaction"))\n"
            if file.isTransactional { text += "BEGIN;\nSET LOCAL lock_timeout = '\(lockTimeoutMilliseconds)ms';\n" }
            text += file.sql
            if !file.sql.hasSuffix("\n") { text += "\n" }
            text += historyInsertText(file)
            if file.isTransactional { text += "COMMIT;\n" }
            text += "\n"
        }
        return text
    }

    /// `plan`'s text for `file`'s online form.
    private func onlinePlan(_ file: MigrationFile, _ change: OnlineCollationChange) -> String {
        var text = """
            -- \(file.fileName) (\(file.checksum)), online: \(change.indexes.count) indexes built first, one at a time, while \
            writers go on (a run that stops keeps the ones it built); then one transaction that locks the tables for catalog \
            changes only (the file's ALTER COLUMN keeps the new indexes as they are)

            """
        text += "SET lock_timeout = 0;\n"
        for index in change.indexes { text += index.build + ";\n" }
        text += "BEGIN;\nSET LOCAL lock_timeout = '\(lockTimeoutMilliseconds)ms';\n"
        for statement in change.swap(file) {
            text += statement
            if !statement.hasSuffix("\n") { text += ";\n" }
        }
        text += "-- DROP INDEX each \(OnlineCollationChange.buildPrefix)… index left that no swap took, if any\n"
        text += historyInsertText(file) + "COMMIT;\n\n"
        return text
    }

    /// `plan`'s line for the history row `record` adds for `file`.
    private func historyInsertText(_ file: MigrationFile) -> String {
        "INSERT INTO \(Self.historyTable) (version, name, file_name, checksum, transactional, duration_ms) VALUES (\(file.version), '\(file.name)', '\(file.fileName)', '\(file.checksum)', \(file.isTransactional), …);\n"
    }

    // MARK: - up

    /// Applies every pending file in order, each in its own transaction (unless it declares it
    /// cannot run in one), under the advisory lock; with `online`, a file that has an online form
    /// (`OnlineCollationChange`) through it.
    ///
    /// - Returns: the files applied by this call (empty when the schema was current).
    /// - Throws: `MigrationError` (`.historyMismatch`, `.lockBusy`, `.migrationFailed`); a file
    ///   that fails leaves the schema and the history as they were before it (an online form
    ///   keeps the indexes it built, which its next run uses).
    public func up(on connection: PGConnection, online: Bool = false) throws -> [MigrationFile] {
        try lock(connection)
        defer { unlock(connection) }
        try connection.execute(script: Self.createHistorySQL, name: "migrate.create_history")
        let status = try status(on: connection)
        try status.requireConsistent()
        let pendingVersions = Set(status.entries.filter { $0.state == .pending }.map(\.version))
        var applied: [MigrationFile] = []
        for file in files where pendingVersions.contains(file.version) {
            if online, OnlineCollationChange.versions.contains(file.version), let change = try OnlineCollationChange.prepare(file, on: connection) {
                try applyOnline(file, change, on: connection)
            } else {
                try apply(file, on: connection)
                if OnlineCollationChange.versions.contains(file.version) { dropLeftovers(after: file, on: connection) }
            }
            applied.append(file)
        }
        return applied
    }

    /// Drops the indexes a stopped online run left (`OnlineCollationChange.dropLeftovers`) once
    /// `file` is applied as a file. Best effort: the file is applied either way, so a failure
    /// is a warning that names what to drop by hand.
    private func dropLeftovers(after file: MigrationFile, on connection: PGConnection) {
        do {
            for name in try OnlineCollationChange.dropLeftovers(on: connection) {
                logger.info("dropped an index an online run left", metadata: ["migration.file": "\(file.fileName)", "migration.index": "\(name)"])
            }
        } catch {
            logger.warning(
                "could not drop the indexes an online run left; drop every index named \(OnlineCollationChange.buildPrefix)… by hand",
                metadata: ["migration.file": "\(file.fileName)", LogKey.error: "\(error)"])
        }
    }

    /// Adds `file` to the history, with the time since `started`.
    private func record(_ file: MigrationFile, since started: ContinuousClock.Instant, on connection: PGConnection) throws(PGError) {
        let elapsed = (ContinuousClock.now - started).components
        let milliseconds: Int64 = elapsed.seconds * 1000 + elapsed.attoseconds / 1_000_000_000_000_000
        try connection.query(Self.insertHistory, [file.version, file.name, file.fileName, file.checksum, file.isTransactional, milliseconds])
    }

    private func apply(_ file: MigrationFile, on connection: PGConnection) throws {
        logger.info("applying migration", metadata: ["migration.file": "\(file.fileName)"])
        let started = ContinuousClock.now
        do {
            if file.isTransactional {
                try connection.withTransaction { connection in
                    try connection.query(Self.setLocalLockTimeout, [String(lockTimeoutMilliseconds)])
                    try connection.execute(script: file.sql, name: "migrate.\(file.fileName)")
                    try record(file, since: started, on: connection)
                }
            } else {
                try connection.query(Self.setSessionLockTimeout, [String(lockTimeoutMilliseconds)])
                try connection.execute(script: file.sql, name: "migrate.\(file.fileName)")
                try record(file, since: started, on: connection)
            }
        } catch let error as PGError {
            let undone = file.isTransactional ? "it was rolled back; the schema and history are unchanged" : "it ran outside a transaction: check for partial effects (an INVALID index) before running again"
            throw failure(error, applying: file, undone: undone)
        }
        logger.info("applied migration", metadata: ["migration.file": "\(file.fileName)"])
    }

    /// The longest an online swap's attempt waits for its locks (1 s): a writer that comes
    /// while it waits queues behind it.
    static let swapAttemptMilliseconds = 1_000

    /// Applies `file` through its online form: builds the new indexes without blocking writers
    /// (no lock timeout: each build waits for the transactions that write its table), then
    /// swaps them in and records the file in one transaction, in attempts that each wait at
    /// most `swapAttemptMilliseconds` for the locks, for up to `lockTimeoutMilliseconds` in all.
    private func applyOnline(_ file: MigrationFile, _ change: OnlineCollationChange, on connection: PGConnection) throws {
        logger.info("applying migration online", metadata: ["migration.file": "\(file.fileName)", "migration.indexes": "\(change.indexes.count)"])
        let started = ContinuousClock.now
        do {
            try connection.query(Self.setSessionLockTimeout, ["0"])
            try change.build(on: connection) { index, left in
                logger.info(
                    "building index", metadata: ["migration.file": "\(file.fileName)", "migration.index": "\(index.name)", "migration.table": "\(index.table)", "migration.left": "\(left)"])
            }
            let statements = change.swap(file)
            // Each attempt waits at most `swapAttemptMilliseconds` for the locks, so that the
            // writers queued behind its request wait no longer; attempts go on, a pause apart,
            // until `lockTimeoutMilliseconds` have passed (0: until one succeeds).
            let attempt = lockTimeoutMilliseconds == 0 ? Self.swapAttemptMilliseconds : min(lockTimeoutMilliseconds, Self.swapAttemptMilliseconds)
            let swapStarted = ContinuousClock.now
            var attempts = 0
            while true {
                attempts += 1
                do {
                    try connection.withTransaction { connection in
                        try connection.query(Self.setLocalLockTimeout, [String(attempt)])
                        for (position, statement) in statements.enumerated() {
                            try connection.execute(script: statement, name: "migrate.online.\(file.fileName).\(position)")
                            if position == 0 { try change.requireBuilt(on: connection) }
                        }
                        for name in try OnlineCollationChange.dropLeftovers(on: connection) {
                            logger.info("dropped an index no swap took", metadata: ["migration.file": "\(file.fileName)", "migration.index": "\(name)"])
                        }
                        try record(file, since: started, on: connection)
                    }
                    break
                } catch let error as PGError where error.sqlState == "55P03" {
                    let waited = ContinuousClock.now - swapStarted
                    guard lockTimeoutMilliseconds == 0 || waited + .milliseconds(attempt) < .milliseconds(lockTimeoutMilliseconds) else { throw error }
                    logger.info(
                        "the swap's locks were not granted in time; trying again",
                        metadata: ["migration.file": "\(file.fileName)", "migration.attempt": "\(attempts)", "migration.waited": "\(waited)"])
                    Thread.sleep(forTimeInterval: Double(attempt) / 1000)
                }
            }
            logger.info(
                "applied migration online",
                metadata: [
                    "migration.file": "\(file.fileName)", "migration.swap": "\(ContinuousClock.now - swapStarted)", "migration.attempts": "\(attempts)",
                    "migration.total": "\(ContinuousClock.now - started)",
                ])
        } catch let error as PGError {
            throw failure(
                error, applying: file,
                undone: "nothing was swapped and the history is unchanged; the indexes built so far (\(OnlineCollationChange.buildPrefix)…) stay, and the next run builds only the rest")
        }
    }

    /// The `MigrationError` for `error` while applying `file`; `undone` says what is left.
    private func failure(_ error: PGError, applying file: MigrationFile, undone: String) -> MigrationError {
        if error.sqlState == "55P03" {
            return MigrationError(
                .lockBusy,
                "migration \(file.fileName) waited longer than lock_timeout (\(lockTimeoutMilliseconds) ms) for a table lock; a long transaction holds it. Nothing of this file was applied; run again later or raise --lock-timeout"
            )
        }
        if error.code == .connectionLost || error.code == .connectionFailed {
            return MigrationError(.unavailable, "lost the database connection while applying \(file.fileName): \(error.debugDescription)")
        }
        return MigrationError(.migrationFailed, "migration \(file.fileName) failed: \(error.debugDescription); \(undone)")
    }

    private func lock(_ connection: PGConnection) throws {
        do {
            try connection.query(Self.setSessionLockTimeout, [String(lockWaitMilliseconds)])
            try connection.query(Self.advisoryLock, [Self.advisoryLockKey])
        } catch {
            guard error.sqlState == "55P03" else { throw error }
            throw MigrationError(
                .lockBusy,
                "another migrator has held the migration lock for more than \(Double(lockWaitMilliseconds) / 1000) s; nothing was applied. Run again when it is done, or raise --lock-wait"
            )
        }
    }

    private func unlock(_ connection: PGConnection) {
        do {
            try connection.query(Self.advisoryUnlock, [Self.advisoryLockKey])
        } catch {
            // The lock is a session lock: it goes away with the connection anyway.
            logger.debug("could not release the migration lock", metadata: [LogKey.error: "\(error)"])
        }
    }

    private func readHistory(on connection: PGConnection) throws -> [AppliedMigration] {
        let exists = try connection.query(Self.historyExists).singleRow().decode(0, as: Bool.self)
        guard exists else { return [] }
        var applied: [AppliedMigration] = []
        for row in try connection.query(Self.selectHistory).rows {
            let version = try row.decode(0, as: Int.self)
            let fileName = try row.decode(1, as: String.self)
            let checksum = try row.decode(2, as: String.self)
            let appliedAt = try row.decode(3, as: Date.self)
            applied.append(AppliedMigration(version: version, fileName: fileName, checksum: checksum, appliedAt: appliedAt))
        }
        return applied
    }

    // MARK: - SQL

    static let createHistorySQL = """
        CREATE TABLE IF NOT EXISTS \(historyTable) (
            version        integer     PRIMARY KEY,
            name           text        NOT NULL,
            file_name      text        NOT NULL,
            checksum       text        NOT NULL,
            transactional  boolean     NOT NULL,
            duration_ms    integer     NOT NULL,
            applied_at     timestamptz NOT NULL DEFAULT now()
        )
        """
    static let historyExists = PGStatement(
        "migrate.history_exists", "SELECT to_regclass('\(historyTable)') IS NOT NULL", prepared: false)
    static let selectHistory = PGStatement(
        "migrate.select_history",
        "SELECT version, file_name, checksum, applied_at FROM \(historyTable) ORDER BY version", prepared: false)
    static let insertHistory = PGStatement(
        "migrate.insert_history",
        """
        INSERT INTO \(historyTable) (version, name, file_name, checksum, transactional, duration_ms)
        VALUES ($1, $2, $3, $4, $5, $6)
        """, prepared: false)
    static let setSessionLockTimeout = PGStatement(
        "migrate.lock_timeout", "SELECT set_config('lock_timeout', $1 || 'ms', false)", prepared: false)
    static let setLocalLockTimeout = PGStatement(
        "migrate.local_lock_timeout", "SELECT set_config('lock_timeout', $1 || 'ms', true)", prepared: false)
    static let advisoryLock = PGStatement("migrate.lock", "SELECT pg_advisory_lock($1)", prepared: false)
    static let advisoryUnlock = PGStatement("migrate.unlock", "SELECT pg_advisory_unlock($1)", prepared: false)
}

extension Migrator {
    /// The schema version this build's statements need (the last migration they rely on).
    public static let requiredSchemaVersion = 34

    /// The highest applied migration version; 0 when none is (or the history table is missing).
    public static func appliedSchemaVersion(on connection: PGConnection) throws(PGError) -> Int {
        let exists = PGStatement(
            "migrate.history_table_exists", "SELECT to_regclass('\(historyTable)') IS NOT NULL", prepared: false)
        guard try connection.query(exists).rows.first?.decode(0, as: Bool.self) == true else { return 0 }
        let latest = PGStatement(
            "migrate.applied_version", "SELECT coalesce(max(version), 0) FROM \(historyTable)", prepared: false)
        return try connection.query(latest).rows.first?.decode(0, as: Int.self) ?? 0
    }
}
