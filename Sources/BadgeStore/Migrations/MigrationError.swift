/// Why `reddot migrate` stopped. Each code maps to a documented process exit code.
public struct MigrationError: Error, Sendable, CustomStringConvertible {
    /// The kind of failure.
    public enum Code: Sendable, Hashable {
        /// A file is misnamed, unreadable, not UTF-8, or shares a number with another. Exit 65.
        case invalidFile
        /// An applied file was edited, is missing, or a new file sorts before an applied one. Exit 65.
        case historyMismatch
        /// Another migrator held the lock longer than the lock wait, or a statement waited longer
        /// than `lock_timeout` for a table lock. Nothing was changed by the failing step. Exit 75.
        case lockBusy
        /// The database could not be reached. Exit 69.
        case unavailable
        /// A migration's SQL failed; its transaction was rolled back. Exit 1.
        case migrationFailed
        /// There are pending migrations (only with `verify --fail-if-pending`). Exit 3.
        case pending
    }

    /// The kind of failure.
    public var code: Code
    /// A sentence that names the file and what to do.
    public var message: String

    /// Creates an error.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// The process exit code documented for this failure.
    public var exitCode: Int32 {
        switch code {
        case .invalidFile, .historyMismatch: return 65
        case .lockBusy: return 75
        case .unavailable: return 69
        case .migrationFailed: return 1
        case .pending: return 3
        }
    }

    public var description: String { message }
}
