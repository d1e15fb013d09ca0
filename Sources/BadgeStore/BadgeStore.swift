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

    /// Whether the Citus extension is installed in the database of `connection`: its
    /// distributed tables then take the statements Citus runs (docs/SHARDING.md, "What Citus
    /// refuses"), where the shipped ones are refused. Looked up once per connection: install
    /// Citus (and distribute the tables) before RedDot's processes start.
    public static func citusInstalled(on connection: PGConnection) throws(PGError) -> Bool {
        try connection.remembered("citus") { connection throws(PGError) in
            try connection.query(citusInstalled).singleRow().decode(0, as: Bool.self)
        }
    }

    /// `users` in groups that share a Citus shard (of `user_version`, with which every per-user
    /// table is colocated), each group sorted, the groups in shard order. For the statements
    /// Citus runs only over one shard (docs/SHARDING.md, rule 10).
    static func usersByShard(_ users: [String], on connection: PGConnection) throws(PGError) -> [[String]] {
        var groups: [Int64: [String]] = [:]
        for row in try connection.query(usersByShard, [users]).rows {
            groups[try row.decode(1, as: Int64.self), default: []].append(try row.decode(0, as: String.self))
        }
        return groups.keys.sorted().map { groups[$0, default: []].sorted() }
    }

    private static let usersByShard = PGStatement(
        "badges.users_by_shard",
        "SELECT DISTINCT u, get_shard_id_for_distribution_column('user_version', u) FROM unnest($1::text[]) AS u")

    private static let citusInstalled = PGStatement(
        "badges.citus_installed", "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')")
}
