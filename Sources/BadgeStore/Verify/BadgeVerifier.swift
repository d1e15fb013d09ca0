public import BadgeCore
import LibPQ

/// `reddot verify`: recounts every user's aggregates from their own state, with a formulation
/// independent of the rollup's (each node sums the own rows within it), and compares them with
/// the stored aggregates, a chunk of users per statement.
///
/// Users with a pending rollup (dirty) or an expired row not yet swept are skipped: their stored
/// aggregates are allowed to lag.
public struct BadgeVerifier: Sendable {
    /// The store whose pool it reads with.
    public let store: BadgeStore
    /// Users compared per statement.
    public var chunkSize: Int

    /// A verifier over `store`'s database.
    public init(store: BadgeStore, chunkSize: Int = 1_000) {
        self.store = store
        self.chunkSize = max(1, chunkSize)
    }

    /// Compares every user's aggregates; with `repair`, recomputes each user with a mismatch
    /// (in its own transaction, through the rollup's own step).
    ///
    /// - Parameter onMismatch: called for each mismatch as it is found, in user and path order.
    /// - Throws: `PGError` from the database.
    public func run(repair: Bool, onMismatch: @Sendable (AggregateMismatch) -> Void = { _ in }) async throws -> VerifyReport {
        var report = VerifyReport()
        var after = ""
        let size = chunkSize
        while true {
            let last = after
            let users: [String] = try await store.pool.withConnection { connection in
                try connection.query(VerifySQL.nextUsers, [last, size]).rows.map { try $0.decode(0, as: String.self) }
            }
            guard let lastUser = users.last else { break }
            after = lastUser
            report.usersChecked += users.count
            let mismatches: [AggregateMismatch] = try await store.pool.withConnection { connection in
                // On Citus, a shard's users a statement (docs/SHARDING.md, rule 10).
                guard try BadgeStore.citusInstalled(on: connection) else {
                    return try Self.mismatches(try connection.query(VerifySQL.compare.shipped, [users]))
                }
                return try BadgeStore.usersByShard(users, on: connection).flatMap { group in
                    try Self.mismatches(try connection.query(VerifySQL.compare.ofShard, [group]))
                }.sorted { ($0.user.rawValue, $0.path.rawValue) < ($1.user.rawValue, $1.path.rawValue) }
            }
            for mismatch in mismatches { onMismatch(mismatch) }
            report.mismatches += mismatches.count
            let broken = Array(Set(mismatches.map(\.user))).sorted()
            report.usersWithMismatches += broken.count
            if repair, !broken.isEmpty {
                try await store.pool.withTransaction { connection in
                    try BadgeStore.recomputeAggregates(for: broken, recountAll: true, on: connection)
                }
                report.usersRepaired += broken.count
            }
        }
        return report
    }

    /// The mismatches `result` (`VerifySQL.compare`) lists; rows whose user or path no longer
    /// parse are left out.
    private static func mismatches(_ result: PGResult) throws(PGError) -> [AggregateMismatch] {
        var mismatches: [AggregateMismatch] = []
        for row in result.rows {
            let userText = try row.decode(0, as: String.self)
            let pathText = try row.decode(1, as: String.self)
            guard let user = try? UserID(validating: userText), let path = try? BadgePath(validating: pathText) else { continue }
            mismatches.append(
                AggregateMismatch(
                    user: user, path: path,
                    storedCount: try row.decode(2, as: Int64?.self), storedIcon: try row.decode(3, as: String?.self),
                    expectedCount: try row.decode(4, as: Int64?.self), expectedIcon: try row.decode(5, as: String?.self),
                    storedUnseen: try row.decode(6, as: Int64?.self), expectedUnseen: try row.decode(7, as: Int64?.self)))
        }
        return mismatches
    }
}

/// One stored aggregate that differs from the recount. A nil count means no row.
public struct AggregateMismatch: Sendable, Hashable, Codable {
    /// Whose aggregate.
    public var user: UserID
    /// Which node.
    public var path: BadgePath
    /// The stored count (nil: no stored row).
    public var storedCount: Int64?
    /// The stored icon.
    public var storedIcon: String?
    /// The recounted count (nil: there should be no row).
    public var expectedCount: Int64?
    /// The recounted icon.
    public var expectedIcon: String?
    /// The stored unseen part (nil: no stored row).
    public var storedUnseen: Int64?
    /// The recounted unseen part (nil: there should be no row).
    public var expectedUnseen: Int64?

    enum CodingKeys: String, CodingKey {
        case user, path
        case storedCount = "stored_count", storedIcon = "stored_icon"
        case expectedCount = "expected_count", expectedIcon = "expected_icon"
        case storedUnseen = "stored_unseen", expectedUnseen = "expected_unseen"
    }

    /// A mismatch with the given fields.
    public init(
        user: UserID, path: BadgePath, storedCount: Int64?, storedIcon: String?, expectedCount: Int64?, expectedIcon: String?,
        storedUnseen: Int64? = nil, expectedUnseen: Int64? = nil
    ) {
        self.user = user
        self.path = path
        self.storedCount = storedCount
        self.storedIcon = storedIcon
        self.expectedCount = expectedCount
        self.expectedIcon = expectedIcon
        self.storedUnseen = storedUnseen
        self.expectedUnseen = expectedUnseen
    }

    /// Encodes every key, with explicit nulls.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(user, forKey: .user)
        try container.encode(path, forKey: .path)
        try container.encode(storedCount, forKey: .storedCount)
        try container.encode(storedIcon, forKey: .storedIcon)
        try container.encode(expectedCount, forKey: .expectedCount)
        try container.encode(expectedIcon, forKey: .expectedIcon)
        try container.encode(storedUnseen, forKey: .storedUnseen)
        try container.encode(expectedUnseen, forKey: .expectedUnseen)
    }
}

/// What a verification found.
public struct VerifyReport: Sendable, Hashable {
    /// Users compared (or skipped as pending).
    public var usersChecked = 0
    /// Aggregate rows that differ.
    public var mismatches = 0
    /// Users with at least one mismatch.
    public var usersWithMismatches = 0
    /// Users recomputed by `repair`.
    public var usersRepaired = 0

    /// An empty report.
    public init() {}
}

enum VerifySQL {
    /// The next chunk of users with own state (states, increments, live items) or aggregates,
    /// in user order.
    static let nextUsers = PGStatement(
        "verify.next_users",
        """
        SELECT user_id FROM (
            (SELECT DISTINCT user_id FROM badge_state WHERE user_id > $1 ORDER BY 1 LIMIT $2)
            UNION
            (SELECT DISTINCT user_id FROM badge_item WHERE user_id > $1 AND removed_at IS NULL ORDER BY 1 LIMIT $2)
            UNION
            (SELECT DISTINCT user_id FROM badge_increment WHERE user_id > $1 ORDER BY 1 LIMIT $2)
            UNION
            (SELECT DISTINCT user_id FROM badge_aggregate WHERE user_id > $1 ORDER BY 1 LIMIT $2)
        ) AS u
        ORDER BY 1
        LIMIT $2
        """)

    /// Recounts the listed users' aggregates (each shown node: the own counts and unseen parts
    /// within it, counters and live items, under the stored aggregation modes, as the rollup's
    /// recount does; its icon: its own counter's) and returns every row that differs from the
    /// stored one.
    static let compare = BadgeSQL.ShardForms("verify.compare") { pin in
        """
        WITH users AS (
            SELECT u.user_id FROM unnest($1::text[]) AS u(user_id)
            WHERE NOT EXISTS (SELECT 1 FROM dirty_mark d WHERE d.user_id = u.user_id\(pin.on("d")))
              AND NOT EXISTS (SELECT 1 FROM badge_state s WHERE s.user_id = u.user_id AND s.expires_at <= now()\(pin.on("s")))
        ), own AS (
            \(BadgeSQL.ownRows(pin: pin))
        )\(BadgeSQL.modedFresh(pin: pin)), expected AS (
            SELECT user_id, path, count, icon, unseen FROM fresh
        ), stored AS (
            SELECT a.user_id, a.path, a.count, a.icon, a.unseen FROM badge_aggregate a JOIN users USING (user_id)\(pin.isNone ? "" : "\n    WHERE true" + pin.on("a"))
        )
        SELECT coalesce(e.user_id, s.user_id), coalesce(e.path, s.path)::text, s.count, s.icon, e.count, e.icon,
               s.unseen, e.unseen
        FROM expected e FULL JOIN stored s ON s.user_id = e.user_id AND s.path = e.path
        WHERE e.count IS DISTINCT FROM s.count OR e.icon IS DISTINCT FROM s.icon OR e.unseen IS DISTINCT FROM s.unseen
        ORDER BY 1, 2
        """
    }
}
