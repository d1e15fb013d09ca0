@testable import BadgeStore
import LibPQ
import Testing
import TestSupport

/// The push and webhook senders claim due rows as the rollup claims dirty users, and their tables
/// meet the same statistics: a queue analyzed or vacuumed while nothing was due, then a burst.
/// The rollup's claim read every row of such a burst for each claim (BENCHMARKS.md, "A claim
/// planned by the statistics of an emptied queue"). These claims are ordered scans of a partial
/// index whose predicate is the claim's own (`push_device_due`, `webhook_delivery_due`), which no
/// estimate makes dearer than a scan and a sort; this test holds them to it.
@Suite("The push and webhook claims read only what they claim, whatever the statistics say")
struct SenderClaimPlanTests {
    /// How the senders' table looked when it was last counted.
    enum Counted: String, CaseIterable, Sendable {
        case analyzed = "ANALYZE"
        case vacuumedKeepingPages = "VACUUM (TRUNCATE false, ANALYZE)"
    }

    @Test("a burst of 20,000 due devices after statistics of none due: a claim of 100 reads about 100", arguments: Counted.allCases)
    func pushClaimAfterQuietStatistics(counted: Counted) async throws {
        try await Self.burstAfterQuietStatistics(
            table: "push_device", counted: counted,
            // 20,000 devices, each sent its last number: none due.
            quiet: """
                INSERT INTO push_device (user_id, device_id, platform, token, app_id, wanted_version, sent_version)
                SELECT 'claim_u' || u, 'phone', 'apns', 'token-' || u, 'com.example.app', 1, 1 FROM generate_series(1, 20000) u
                """,
            // Every device due.
            burst: "UPDATE push_device SET wanted_version = 2, next_attempt_at = now() - interval '1 minute'"
        ) { connection throws(PGError) in
            try PushStore.claim(limit: 100, lease: .seconds(60), on: connection).claimed.count
        }
    }

    @Test("a burst of 20,000 pending deliveries after statistics of none pending: a claim of 100 reads about 100", arguments: Counted.allCases)
    func webhookClaimAfterQuietStatistics(counted: Counted) async throws {
        try await Self.burstAfterQuietStatistics(
            table: "webhook_delivery", counted: counted,
            // A subscription, and 20,000 deliveries made earlier, all delivered: none pending.
            quiet: """
                INSERT INTO webhook_subscription (id, url, secret, paths, kinds)
                VALUES ('crm', 'http://127.0.0.1:9/hook', 'whsec_test', ARRAY['root'], ARRAY['root']);
                INSERT INTO webhook_delivery (user_id, id, subscription_id, kind, payload, state, finished_at)
                SELECT 'claim_u' || u, 'old', 'crm', 'badge.root', '{}', 'delivered', now() FROM generate_series(1, 20000) u
                """,
            // A delivery for each user, due now.
            burst: """
                INSERT INTO webhook_delivery (user_id, id, subscription_id, kind, payload, next_attempt_at)
                SELECT 'claim_u' || u, 'new', 'crm', 'badge.root', '{}', now() - interval '1 minute' FROM generate_series(1, 20000) u
                """
        ) { connection throws(PGError) in
            try WebhookStore.claim(limit: 100, lease: .seconds(60), on: connection).claimed.count
        }
    }

    /// On a fresh database: runs `quiet` (20,000 rows of `table`, none due), counts the table as
    /// `counted` says, claims ten times (a prepared statement settles on the plan made now:
    /// PostgreSQL's generic plan, after five), runs `burst` (all 20,000 due), and claims once
    /// more: that claim must take 100 rows, with no scan of the table and at most 400 rows read
    /// by index (the claimed rows through the due index, and again by key to lease them).
    static func burstAfterQuietStatistics(
        table: String, counted: Counted, quiet: String, burst: String,
        claim: @escaping @Sendable (PGConnection) throws(PGError) -> Int
    ) async throws {
        let fixture = try await StoreFixture.make(layout: .plain)
        try await tearingDown({ await fixture.tearDown() }) {
            let (early, read) = try await fixture.pool.withConnection { connection in
                try connection.execute(script: quiet, name: "test.quiet")
                try connection.execute(script: "\(counted.rawValue) \(table)", name: "test.count")
                var early = 0
                for _ in 0..<10 {
                    early += try claim(connection)
                }
                try connection.execute(script: burst, name: "test.burst")
                return (early, try rowsRead(of: table, on: connection) { () throws(PGError) in try claim(connection) })
            }
            #expect(early == 0, "a claim took \(early) rows before any was due")
            #expect(read.claimed == 100)
            #expect(read.sequentialScans == 0, "the claim scanned the whole table")
            #expect(read.indexRows <= 400, "a claim of 100 read \(read.indexRows) rows")
        }
    }

    /// What `body` claimed, and the sequential scans of `table` and the rows its index scans fetched while it ran on
    /// `connection`: the difference of the table's counts, each read as what the server has been
    /// told (`pg_stat_user_tables`) plus what this backend counted and has not reported yet
    /// (`pg_stat_xact_user_tables`). `body` runs its own transactions, and a backend reports its
    /// counts between them when a second has passed since it last did; the pending counts alone
    /// then went back (a difference of -4 scans, seen once in CI under load). Nothing else reads
    /// the table of this test's own database.
    static func rowsRead(
        of table: String, on connection: PGConnection, _ body: () throws(PGError) -> Int
    ) throws(PGError) -> (claimed: Int, sequentialScans: Int64, indexRows: Int64) {
        let counts = PGStatement(
            "test.sender_reads",
            """
            SELECT coalesce(s.seq_scan, 0) + coalesce(x.seq_scan, 0), coalesce(s.idx_tup_fetch, 0) + coalesce(x.idx_tup_fetch, 0)
            FROM pg_stat_user_tables s LEFT JOIN pg_stat_xact_user_tables x ON x.relid = s.relid
            WHERE s.relname = $1
            """,
            prepared: false)
        let before = try connection.query(counts, [table]).singleRow()
        let (scans, rows) = (try before.decode(0, as: Int64.self), try before.decode(1, as: Int64.self))
        let claimed = try body()
        let after = try connection.query(counts, [table]).singleRow()
        return (claimed, try after.decode(0, as: Int64.self) - scans, try after.decode(1, as: Int64.self) - rows)
    }
}
