import BadgeCore
import BadgeStore
import Foundation
import LibPQ
import TestSupport
import Testing

/// Issue 27: ingest's writes on a Citus cluster (docs/SHARDING.md, rule 10): a batch is written
/// a shard of users at a time. The same random batches written to the shipped schema and to
/// the tables Citus distributes leave the same rows. Skipped where no Citus cluster is named
/// (`deploy/citus/test.sh` names one).
@Suite(
    "Ingest on tables distributed by Citus", .serialized,
    .enabled(if: !SchemaLayout.citusWorkers.isEmpty, "no Citus cluster (REDDOT_TEST_CITUS_WORKERS)"))
struct CitusIngestTests {
    /// The tables a batch writes, each with the columns that differ by when the write ran
    /// (its `now()`) or that hold a set in no order, which are left out, and what stands for
    /// them (a JSON object).
    static let tables: [(name: String, left: [String], instead: String?)] = [
        ("badge_state", ["updated_at"], nil),
        ("badge_increment", ["arrived_at"], nil),
        // A tombstone's time is its write's.
        ("badge_item", ["removed_at", "occurred_at"],
         "jsonb_build_object('removed', t.removed_at IS NOT NULL, 'occurred_at', CASE WHEN t.removed_at IS NULL THEN t.occurred_at END)"),
        ("badge_clear_mark", ["marked_at"], nil),
        ("badge_seen_mark", ["marked_at"], nil),
        ("badge_mute", ["stored_at"], nil),
        ("broadcast_clear", [], nil),
        ("broadcast_seen", [], nil),
        ("user_write", [], nil),
        // A mark's deltas are added up: their order is none.
        ("dirty_mark", ["dirtied_at", "delta_paths", "delta_amounts", "delta_unseen"],
         """
         jsonb_build_object('deltas', (SELECT jsonb_agg(jsonb_build_array(p::text, a, u) ORDER BY p::text, a, u)
                                       FROM unnest(t.delta_paths, t.delta_amounts, t.delta_unseen) AS d(p, a, u)))
         """),
        ("badge_delta", [], nil),
        ("applied_user_event_generation", [], nil),
    ]

    @Test("random batches of many users leave the same rows on Citus as on the shipped schema, OnCitus", arguments: [UInt64(11), 12])
    func sameRowsAsShippedOnCitus(seed: UInt64) async throws {
        let plain = try await StoreFixture.make(layout: .plain)
        try await tearingDown({ await plain.tearDown() }) {
            let citus = try await StoreFixture.make(layout: .citus)
            try await tearingDown({ await citus.tearDown() }) {
                let users = (0..<300).map { user("ci\(seed)_u\($0)") }
                var generator = RandomBadgeOperations(users: users, seed: seed)
                let start = Date()
                for round in 0..<12 {
                    var batch = BadgeBatch(now: start.addingTimeInterval(Double(round)))
                    batch.append(contentsOf: generator.sequence(count: generator.integer(in: 1...300)))
                    try await plain.ingest(batch)
                    try await citus.ingest(batch)
                }
                let spread = try await citus.pool.withConnection { connection in
                    try connection.query(PGStatement(
                        "test.spread", "SELECT count(DISTINCT get_shard_id_for_distribution_column('user_write', user_id)) FROM user_write",
                        prepared: false)).singleRow().decode(0, as: Int64.self)
                }
                #expect(spread > 16, "the users fall in \(spread) shards")
                for table in Self.tables {
                    let (expected, stored) = (try await Self.rows(of: table, in: plain), try await Self.rows(of: table, in: citus))
                    #expect(
                        stored == expected,
                        """
                        \(table.name): \(stored.count) rows on Citus, \(expected.count) on the shipped schema; only on Citus: \
                        \(Set(stored).subtracting(expected).sorted().prefix(3)); only on the shipped schema: \
                        \(Set(expected).subtracting(stored).sorted().prefix(3))
                        """)
                }
            }
        }
    }

    /// The rows of `table` as JSON text, sorted, without the columns `left`, with `instead`.
    static func rows(of table: (name: String, left: [String], instead: String?), in fixture: StoreFixture) async throws -> [String] {
        let left = table.left.map { "'\($0)'" }.joined(separator: ",")
        let sql = """
            SELECT x::text FROM (
                SELECT (to_jsonb(t) - ARRAY[\(left)]::text[])\(table.instead.map { " || \($0)" } ?? "") AS x FROM \(table.name) t
            ) s ORDER BY 1
            """
        return try await fixture.pool.withConnection { connection in
            try connection.query(PGStatement("test.rows.\(table.name)", sql, prepared: false)).rows.map { try $0.decode(0, as: String.self) }
        }
    }
}
