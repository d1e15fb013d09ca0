public import BadgeCore
public import LibPQ

/// Badge state in PostgreSQL: applies operations set-based, recomputes aggregates, reads trees.
///
/// The `static` functions run on a connection the caller leased, inside the caller's transaction
/// (ingest puts them in one transaction with its offsets and dedupe); the instance methods are
/// conveniences that lease a connection and open the transaction themselves.
public struct BadgeStore: Sendable {
    /// The pool the convenience methods lease connections from.
    public let pool: PGPool
    /// How counts are displayed in answers.
    public var display: BadgeDisplay

    /// The channel the rollup and broadcast changes notify on (payloads: ``ChangeNotification``).
    public static let changeChannel = "reddot_badges"

    /// Creates a store on `pool`.
    public init(pool: PGPool, display: BadgeDisplay = BadgeDisplay()) {
        self.pool = pool
        self.display = display
    }

    /// Session settings the store's connections should use: JIT off (its compilation costs more
    /// than the rollup statements it would speed up).
    public static let recommendedSessionSettings: [(name: String, value: String)] = [("jit", "off")]
}
