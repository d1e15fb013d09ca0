import BadgeCore
@testable import BadgeStore
import LibPQ
import Testing
import TestSupport

/// The rollup's claim must not rest on the queue's statistics. Autovacuum analyzes `dirty_mark`
/// whenever it suits it while ingest fills and the rollup drains it; statistics taken at the
/// wrong moment once told the planner that a round's 500 users hold most of the queue, and every
/// round then scanned the whole queue and hashed every delta (issue 25, BENCHMARKS.md).
@Suite("The rollup's claim reads each user's marks by index, whatever the statistics say")
struct RollupPlanTests {
    @Test("statistics that say a round's users hold most of the queue: the claim still probes each user, and claims what a fresh plan claims")
    func claimProbesEachUser() async throws {
        // The shipped schema's plan.
        let fixture = try await StoreFixture.make(layout: .plain)
        try await tearingDown({ await fixture.tearDown() }) {
            // 4,000 users with 4 marks and 4 deltas each, as ingest leaves them; every tenth user's
            // last mark asks for a recount, every seventh one's for a new version.
            try await fixture.execute(
                """
                INSERT INTO dirty_mark (user_id, seq, bump, recount)
                SELECT 'plan_u' || u, s, s = 4 AND u % 7 = 0, s = 4 AND u % 10 = 0
                FROM generate_series(1, 4000) u, generate_series(1, 4) s
                """)
            try await fixture.execute(
                """
                INSERT INTO badge_delta (user_id, path, amount, unseen, seq)
                SELECT 'plan_u' || u, ('root.chat.c' || s)::ltree, 1, 1, s FROM generate_series(1, 4000) u, generate_series(1, 4) s
                """)
            let numbers = (1...500).map { $0 * 8 }
            let round = numbers.map { "plan_u\($0)" }
            let fresh = try await claimed(round, fixture)

            // Statistics that say the queue holds five users: each of the round's users would then
            // hold a fifth of the queue.
            try await fixture.execute("ALTER TABLE dirty_mark ALTER COLUMN user_id SET (n_distinct = 5)")
            try await fixture.execute("ANALYZE dirty_mark")
            try await fixture.execute("ANALYZE badge_delta")
            let plan = try await fixture.rows("EXPLAIN " + BadgeSQL.claimDirtyUsers.shipped.sql, [round, [String](), [String](), [String]()]).compactMap { $0.first ?? nil }
            let text = plan.joined(separator: "\n")
            #expect(!text.contains("Seq Scan on dirty_mark"), "the claim scans the whole queue:\n\(text)")
            #expect(!text.contains("Seq Scan on badge_delta"), "the claim scans every delta:\n\(text)")
            #expect(text.contains("dirty_mark_pkey"), "the claim does not probe the queue's index:\n\(text)")
            // Whether a mark asks for a recount or a bump, from the index of only those marks
            // (migration 33), not from every mark of the user.
            #expect(text.contains("dirty_mark_recount"), "the claim reads every mark for its flags:\n\(text)")

            // The same users and flags with the skewed statistics.
            #expect(try await claimed(round, fixture) == fresh)
            let expected = Dictionary(
                uniqueKeysWithValues: numbers.map { ("plan_u\($0)", Flags(bump: $0 % 7 == 0, recount: $0 % 10 == 0)) })
            #expect(fresh == expected)
        }
    }

    @Test("a delta round finds each user's first mark that asks for a recount in the index of such marks, not among all the user's marks")
    func deltaRoundProbesRecountMarks() async throws {
        let fixture = try await StoreFixture.make(layout: .plain)
        try await tearingDown({ await fixture.tearDown() }) {
            // 4,000 users with 4 marks each that carry their deltas, as ingest leaves them since
            // migration 31; every tenth user's last mark asks for a recount.
            try await fixture.execute(
                """
                INSERT INTO dirty_mark (user_id, seq, bump, recount, additive, delta_paths, delta_amounts, delta_unseen)
                SELECT 'plan_u' || u, s, false, true, NOT (s = 4 AND u % 10 = 0),
                       ARRAY[('root.chat.c' || s)::ltree], ARRAY[1::bigint], ARRAY[1::bigint]
                FROM generate_series(1, 4000) u, generate_series(1, 4) s
                """)
            try await fixture.execute("ANALYZE dirty_mark")
            let round = (1...500).map { "plan_u\($0 * 8)" }
            let statement = BadgeSQL.roundStatement(.init(additive: true, moded: false, partitioned: false, broadcasts: false))
            let held: [any PGBindable] = [[String](), [String](), [Int64](), [Int64](), [Int64]()]
            let plan = try await fixture.rows("EXPLAIN " + statement.sql, [round, "plan_test", [String]()] + held).compactMap { $0.first ?? nil }
            let text = plan.joined(separator: "\n")
            #expect(text.contains("dirty_mark_recount"), "the round reads every mark to find one that asks for a recount:\n\(text)")
            #expect(!text.contains("Seq Scan on dirty_mark"), "the round scans the whole queue:\n\(text)")
        }
    }

    /// How a vacuum leaves the queue's statistics: `VACUUM` cuts the emptied pages off; with
    /// `TRUNCATE false` (the rollup's own, `vacuumQueue`, or autovacuum's when a writer held
    /// the table) it keeps them and counts 0 rows on them.
    enum QueueVacuum: String, CaseIterable, Sendable {
        case truncating = "VACUUM dirty_mark"
        case keepingPages = "VACUUM (TRUNCATE false) dirty_mark"
    }

    @Test(
        "a claim made after a vacuum found the queue small reads each user's first mark only once it fills",
        arguments: [(0, QueueVacuum.truncating), (10, .truncating), (0, .keepingPages), (10, .keepingPages)])
    func sweepPlanOutlivesASmallVacuum(left: Int, vacuum: QueueVacuum) async throws {
        let fixture = try await StoreFixture.make(layout: .plain)
        try await tearingDown({ await fixture.tearDown() }) {
            // A backlog, analyzed while it waited (as autovacuum does), drained, `left` marks
            // still waiting when a vacuum (autovacuum's, or the rollup's `vacuumQueue`) counts
            // the queue.
            try await fixture.execute(
                "INSERT INTO dirty_mark (user_id, seq, bump, recount) SELECT 'gone_u' || u, 1, false, false FROM generate_series(1, 20000) u")
            try await fixture.execute("ANALYZE dirty_mark")
            try await fixture.execute("DELETE FROM dirty_mark")
            let waiting: [any PGBindable] = [left]
            try await fixture.execute(
                "INSERT INTO dirty_mark (user_id, seq, bump, recount) SELECT 'left_u' || u, 1, false, false FROM generate_series(1, $1::int) u", waiting)
            let (claimed, scans, fetched) = try await fixture.pool.withConnection { connection in
                try connection.execute(script: vacuum.rawValue, name: "test.vacuum")
                // Claims while the queue is that small: a prepared statement settles on the plan
                // made now (PostgreSQL's generic plan, after five).
                for _ in 0..<10 {
                    try connection.withTransaction { connection in _ = try BadgeStore.claimDirtyUsers(limit: 1, on: connection) }
                }
                // The next backlog.
                try connection.execute(
                    script: "INSERT INTO dirty_mark (user_id, seq, bump, recount) SELECT 'next_u' || u, 1, false, false FROM generate_series(1, 20000) u",
                    name: "test.fill")
                // Scans of the queue, and rows its index scans read, that this backend counted
                // and has not reported yet (earlier transactions' too, in PostgreSQL 15): the
                // claim's are the difference.
                let readSoFar = PGStatement(
                    "test.scans", "SELECT seq_scan, idx_tup_fetch FROM pg_stat_xact_user_tables WHERE relname = 'dirty_mark'", prepared: false)
                return try connection.withTransaction { connection -> (Int, Int64, Int64) in
                    let before = try connection.query(readSoFar).singleRow()
                    let claimed = try BadgeStore.claimDirtyUsers(limit: 500, on: connection)
                    let after = try connection.query(readSoFar).singleRow()
                    return (
                        claimed.count,
                        try after.decode(0, as: Int64.self) - before.decode(0, as: Int64.self),
                        try after.decode(1, as: Int64.self) - before.decode(1, as: Int64.self))
                }
            }
            #expect(claimed == 500)
            #expect(scans == 0, "the claim scanned the whole queue \(scans) times for 500 users")
            // One mark a user (the first after the last), not every mark after it.
            #expect(fetched <= 1_000, "the claim read \(fetched) marks for 500 users")
        }
    }

    @Test("the claim's plan settings end with it: the round after it runs with the session's own", arguments: ["on", "off"])
    func claimLeavesSessionSettings(session: String) async throws {
        let fixture = try await StoreFixture.make(layout: .plain)
        try await tearingDown({ await fixture.tearDown() }) {
            try await fixture.execute(
                "INSERT INTO dirty_mark (user_id, seq, bump, recount) SELECT 'set_u' || u, 1, false, false FROM generate_series(1, 20) u")
            let (during, after) = try await fixture.pool.withConnection { connection in
                // The session's values, set as RedDot's pools set theirs (`recommendedSessionSettings`).
                try connection.query(
                    PGStatement("test.session", "SELECT set_config('jit', $1, false), set_config('enable_sort', $1, false)", prepared: false),
                    [session])
                let read = PGStatement("test.settings", "SELECT current_setting('jit') || ' ' || current_setting('enable_sort')", prepared: false)
                let during = try connection.withTransaction { connection -> String in
                    let claimed = try BadgeStore.claimDirtyUsers(limit: 5, on: connection)
                    #expect(claimed.count == 5)
                    return try connection.query(read).singleRow().decode(0, as: String.self)
                }
                return (during, try connection.query(read).singleRow().decode(0, as: String.self))
            }
            #expect(during == "\(session) \(session)")
            #expect(after == during)
        }
    }

    /// What the claim returns per user: whether a mark asks for a new version, whether one asks
    /// for a recount.
    private struct Flags: Equatable {
        var bump: Bool
        var recount: Bool
    }

    private func claimed(_ users: [String], _ fixture: StoreFixture) async throws -> [String: Flags] {
        var flags: [String: Flags] = [:]
        for row in try await fixture.rows(BadgeSQL.claimDirtyUsers.shipped.sql, [users, [String](), [String](), [String]()]) {
            guard row.count >= 3, let user = row[0] else { continue }
            flags[user] = Flags(bump: row[1] == "t", recount: row[2] == "t")
        }
        return flags
    }
}
