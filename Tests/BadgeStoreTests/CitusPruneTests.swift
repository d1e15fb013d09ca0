import BadgeStore
import Foundation
import LibPQ
import TestSupport
import Testing

/// Issue 27: the retention prunes on a Citus cluster (docs/SHARDING.md, "What Citus refuses"):
/// the shipped prunes lock the rows they pick (`FOR UPDATE SKIP LOCKED`), which Citus refuses
/// over many shards, and the change log's joins the coordinator's feed lease. Skipped where no
/// Citus cluster is named (`deploy/citus/test.sh` names one).
@Suite(
    "Retention and expiry on tables distributed by Citus", .serialized,
    .enabled(if: !SchemaLayout.citusWorkers.isEmpty, "no Citus cluster (REDDOT_TEST_CITUS_WORKERS)"))
struct CitusPruneTests {
    @Test("the retention prunes delete every old row of users on every shard, and leave the young ones, OnCitus")
    func prunesOnCitus() async throws {
        let migrated = try await MigratedDatabase.create(prefix: "citusprune", connections: 1, layout: .citus)
        try await tearingDown({ await migrated.drop() }) {
            let pool = migrated.pool
            // 40 users: on 32 shards a table, nearly every shard has some.
            let users = (1...40).map { "prune_u\($0)" }
            let list = textArray(users)
            let tables = ["applied_user_event", "applied_action", "badge_item", "badge_clear_mark", "erased_user", "badge_change"]
            for (age, prefix) in [("now() - interval '30 days'", "old"), ("now()", "young")] {
                try await pool.withConnection { connection in
                    try connection.execute(
                        script: """
                        INSERT INTO applied_user_event (user_id, event_id, applied_at) SELECT u, '\(prefix)-' || u, \(age) FROM unnest(\(list)) u;
                        INSERT INTO applied_action (user_id, action_id, applied_at) SELECT u, '\(prefix)-' || u, \(age) FROM unnest(\(list)) u;
                        INSERT INTO badge_item (user_id, path, item, occurred_at, removed_at) SELECT u, 'root.x', '\(prefix)', \(age), \(age) FROM unnest(\(list)) u;
                        INSERT INTO badge_clear_mark (user_id, path, subtree, cleared_through, marked_at) SELECT u, 'root.\(prefix)', true, \(age), \(age) FROM unnest(\(list)) u;
                        INSERT INTO badge_change (user_id, version, broadcast_version, nodes, root_count, root_unseen, changed_at)
                            SELECT u, CASE '\(prefix)' WHEN 'old' THEN 1 ELSE 2 END, 0, '[]', 0, 0, \(age) FROM unnest(\(list)) u;
                        """,
                        name: "test.prune.rows")
                }
            }
            try await pool.withConnection { connection in
                try connection.execute(
                    script: """
                    INSERT INTO erased_user (user_id, erased_at) SELECT u, now() - interval '30 days' FROM unnest(\(list)) u;
                    -- An increment stored long ago, shown in the users' first version: folded
                    -- into a state of its own.
                    INSERT INTO badge_increment (user_id, path, occurred_at, amount, shown_in, arrived_at)
                        SELECT u, 'root.old', now() - interval '30 days', 2, 1, now() - interval '30 days' FROM unnest(\(list)) u;
                    INSERT INTO user_version (user_id, version, broadcast_version, writes_through) SELECT u, 1, 0, 1 FROM unnest(\(list)) u;
                    -- The change feed's outbox entries of the logged versions, as the rollup
                    -- writes them on the coordinator; the first 10 old ones published.
                    INSERT INTO change_feed_outbox (user_id, version) SELECT u, v FROM unnest(\(list)) u, (VALUES (1), (2)) AS x(v) ORDER BY v, u;
                    """,
                    name: "test.prune.erased")
                // In a snapshot taken after those entries committed.
                try connection.execute(
                    script: "UPDATE change_feed_lease SET published_seq = (SELECT min(seq) + 9 FROM change_feed_outbox), published_snapshot = pg_current_snapshot()",
                    name: "test.prune.cursor")
            }
            func rows() async throws -> [String: Int] { try await rowCounts(of: tables, in: pool) }
            #expect(try await rows() == ["applied_user_event": 80, "applied_action": 80, "badge_item": 80, "badge_clear_mark": 80, "erased_user": 40, "badge_change": 80])
            let shards = try await pool.withConnection { connection in
                try connection.query(PGStatement(
                    "test.shards",
                    "SELECT count(DISTINCT get_shard_id_for_distribution_column('applied_user_event', u)) FROM unnest(\(list)) u")).singleRow().decode(0, as: Int64.self)
            }
            #expect(shards > 16, "the users fall in \(shards) shards")

            // Chunks of 3: many statements, as a real prune of many rows takes.
            let cutoff = Date().addingTimeInterval(-7 * 86_400)
            let deleted = try await pool.withConnection { connection in
                try IngestTransaction.pruneAppliedEvents(olderThan: cutoff, limit: 3, on: connection)
            }
            let log = try await pool.withConnection { connection in
                try BadgeStore.pruneChangeLog(olderThan: cutoff, limit: 1_000, on: connection)
            }
            #expect(deleted == 240)
            #expect(log.pruned == 40)
            // The feed's cursor is past 10 of the old records: the other 30 went unpublished.
            // Their outbox entries went with them; the young ones' stay.
            #expect(log.unpublished == 30)
            let outbox = try await pool.withConnection { connection in
                try connection.query(PGStatement("test.outbox", "SELECT count(*), count(*) FILTER (WHERE version = 2) FROM change_feed_outbox")).singleRow()
            }
            #expect(try outbox.decode(0, as: Int64.self) == 40)
            #expect(try outbox.decode(1, as: Int64.self) == 40)
            #expect(try await rows() == ["applied_user_event": 40, "applied_action": 40, "badge_item": 40, "badge_clear_mark": 40, "erased_user": 0, "badge_change": 40])
            let folded = try await pool.withConnection { connection in
                try connection.query(PGStatement(
                    "test.folded",
                    "SELECT (SELECT count(*) FROM badge_increment), (SELECT count(*) FROM badge_state WHERE path = 'root.old' AND count = 2)")).singleRow()
            }
            #expect(try folded.decode(0, as: Int64.self) == 0)
            #expect(try folded.decode(1, as: Int64.self) == 40)

            // Withdrawn broadcasts: one long ago that users dismissed and saw, one long ago that
            // nobody did, one lately; the first two go, with the first's dismissals.
            try await pool.withConnection { connection in
                try connection.execute(
                    script: """
                    SET citus.multi_shard_modify_mode TO 'sequential';
                    INSERT INTO broadcast (id, event_id, path, withdrawn_at) VALUES
                        (1, 'b-old-dismissed', 'root.news', now() - interval '30 days'),
                        (2, 'b-old', 'root.news', now() - interval '30 days'),
                        (3, 'b-young', 'root.news', now());
                    INSERT INTO broadcast_clear (user_id, broadcast_id, shown_in) SELECT u, 1, 1 FROM unnest(\(list)) u;
                    INSERT INTO broadcast_seen (user_id, broadcast_id, shown_in) SELECT u, 1, 1 FROM unnest(\(list)) u;
                    RESET citus.multi_shard_modify_mode;
                    """,
                    name: "test.prune.broadcasts")
            }
            var withdrawn = (dismissals: 0, broadcasts: 0)
            while true {
                let step = try await pool.withConnection { connection in
                    try BadgeStore.pruneWithdrawnBroadcasts(olderThan: cutoff, limit: 25, on: connection)
                }
                withdrawn.dismissals += step.dismissals
                withdrawn.broadcasts += step.broadcasts
                if step.dismissals == 0 && step.broadcasts == 0 { break }
            }
            #expect(withdrawn.dismissals == 80)
            #expect(withdrawn.broadcasts == 2)
            let left = try await pool.withConnection { connection in
                try connection.query(PGStatement("test.broadcasts_left", "SELECT event_id FROM broadcast ORDER BY id")).rows.map {
                    try $0.decode(0, as: String.self)
                }
            }
            #expect(left == ["b-young"])
        }
    }

    @Test("the expiry sweeper expires the states and wakes the snoozes of users on every shard, and marks them dirty, OnCitus")
    func sweeperOnCitus() async throws {
        let migrated = try await MigratedDatabase.create(prefix: "citussweep", connections: 1, layout: .citus)
        try await tearingDown({ await migrated.drop() }) {
            let pool = migrated.pool
            let users = (1...40).map { "sweep_u\($0)" }
            let list = textArray(users)
            try await pool.withConnection { connection in
                try connection.execute(
                    script: """
                    INSERT INTO badge_state (user_id, path, count, expires_at) SELECT u, 'root.x', 1, now() - interval '1 minute' FROM unnest(\(list)) u;
                    INSERT INTO badge_state (user_id, path, count, expires_at) SELECT u, 'root.z', 1, now() + interval '1 hour' FROM unnest(\(list)) u;
                    INSERT INTO badge_mute (user_id, path, muted, until, occurred_at, woken, written_in)
                    SELECT u, 'root.y', true, now() - interval '1 minute', now() - interval '1 hour', false, 0 FROM unnest(\(list)) u;
                    """, name: "test.sweep.rows")
            }
            let parts = try await pool.withConnection { try BadgeStore.expiryParts(on: $0) }
            var expired = 0, woken = 0
            // Chunks of 7: several statements, as a sweep of many rows takes.
            for part in parts.states {
                while true {
                    let step = try await pool.withTransaction { try BadgeStore.expireBadges(limit: 7, part: part, on: $0) }
                    expired += step
                    if step == 0 { break }
                }
            }
            for part in parts.mutes {
                while true {
                    let step = try await pool.withTransaction { try BadgeStore.wakeSnoozes(limit: 7, part: part, on: $0) }
                    woken += step
                    if step == 0 { break }
                }
            }
            #expect(expired == 40 && woken == 40, "expired \(expired), woken \(woken)")
            let left = try await pool.withConnection { connection in
                try connection.query(PGStatement(
                    "test.swept",
                    """
                    SELECT (SELECT count(*) FROM badge_state WHERE path = 'root.x'), (SELECT count(*) FROM badge_state WHERE path = 'root.z'),
                           (SELECT count(*) FROM badge_mute WHERE woken), (SELECT count(DISTINCT user_id) FROM dirty_mark)
                    """)).singleRow()
            }
            #expect(try left.decode(0, as: Int64.self) == 0)
            #expect(try left.decode(1, as: Int64.self) == 40)
            #expect(try left.decode(2, as: Int64.self) == 40)
            #expect(try left.decode(3, as: Int64.self) == 40)
        }
    }
}
