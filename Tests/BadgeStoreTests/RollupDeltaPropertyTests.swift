import BadgeCore
import BadgeStore
import Foundation
import LibPQ
import TestSupport
import Testing

@Suite("The rollup's delta path equals a full recount: the same trees and the same change log")
struct RollupDeltaPropertyTests {
    /// Seeds of two families (mostly increments; the default mix), on the shipped schema and,
    /// one of each, on the tables hash-partitioned by user; with `inBatch`, about half the
    /// batches bring their users current themselves, as ingest does when caught up (the users
    /// who only add leave no dirty mark).
    /// The deltas waiting for the rollup: rows of `badge_delta` and those the dirty marks carry.
    static let waitingDeltas = """
        SELECT ((SELECT count(*) FROM badge_delta) + (SELECT coalesce(sum(cardinality(delta_paths)), 0) FROM dirty_mark))::int
        """

    static let cases: [(seed: UInt64, additive: Bool, layout: SchemaLayout, inBatch: Bool)] = [
        (1, true, .plain, false), (2, true, .plain, false), (3, true, .plain, true), (4, false, .plain, false),
        (5, false, .plain, true), (6, true, .partitionedByUser, true), (7, false, .partitionedByUser, false),
        (8, true, .plain, true),
    ]

    /// The same on tables distributed by Citus (docs/SHARDING.md, "Running the tests on Citus"),
    /// an additive seed with rounds in ingest's batches and a mixed one; skipped where no Citus
    /// cluster is named.
    @Test(
        "on tables distributed by Citus, random batches rolled up with deltas and with forced recounts give identical trees and logs, OnCitus",
        .enabled(if: !SchemaLayout.citusWorkers.isEmpty, "no Citus cluster (REDDOT_TEST_CITUS_WORKERS)"),
        arguments: [(UInt64(11), true, true), (12, false, false)])
    func deltasEqualRecountsOnCitus(seed: UInt64, additive: Bool, inBatch: Bool) async throws {
        try await deltasEqualRecounts(seed: seed, additive: additive, layout: .citus, inBatch: inBatch)
    }

    @Test("random batches rolled up with deltas and with forced recounts give identical trees and logs", arguments: cases)
    func deltasEqualRecounts(seed: UInt64, additive: Bool, layout: SchemaLayout, inBatch: Bool) async throws {
        let deltas = try await StoreFixture.make(layout: layout)
        let recounts = try await StoreFixture.make(layout: layout)
        defer {
            Task {
                await deltas.tearDown()
                await recounts.tearDown()
            }
        }
        let users = (0..<120).map { user("d\(seed)_u\($0)") }
        var generator = RandomBadgeOperations(users: users, seed: seed &+ 9_001)
        if additive { generator.weights = .additive }
        let now = Date()
        let all = generator.sequence(count: 4_000)
        var models: [UserID: BadgeTree] = [:]
        for mutation in all { models[mutation.user, default: BadgeTree()].apply(mutation, now: now) }
        // Every operation follows the order-free rules, so both families arrive shuffled: an
        // increment may arrive after a seen, a set, a decrement or a clear that occurred later.
        var random = SeededRandom(seed: seed &* 31)
        var arrivals = all.shuffled(using: &random)
        var recordedDeltas = 0, addedUsers = 0, rolledInBatch = 0
        while !arrivals.isEmpty {
            let mutations = Array(arrivals.prefix(generator.integer(in: 1...250)))
            arrivals.removeFirst(mutations.count)
            // One batch value for both databases: the same times, the same rounds.
            var batch = BadgeBatch(now: now)
            batch.append(contentsOf: mutations)
            if inBatch, generator.integer(in: 0...1) == 1 {
                let rolled = try await deltas.ingestRollingUp(batch)
                try await recounts.ingestRollingUp(batch, recountAll: true)
                rolledInBatch += rolled.added
            } else {
                try await deltas.ingest(batch)
                try await recounts.ingest(batch)
            }
            recordedDeltas += try await deltas.scalar(Self.waitingDeltas, as: Int.self)
            guard generator.integer(in: 0...2) > 0 else { continue }  // sometimes let deltas pile up
            addedUsers += try await deltas.drainCountingDeltas(batchSize: generator.integer(in: 1...80))
            try await recounts.drainDirtyUsers(batchSize: generator.integer(in: 1...80), recountAll: true)
        }
        addedUsers += try await deltas.drainCountingDeltas(batchSize: 100)
        try await recounts.drainDirtyUsers(recountAll: true)

        // The delta path ran, and consumed what ingest recorded.
        #expect(recordedDeltas > 0, "ingest recorded no deltas (seed \(seed))")
        #expect(addedUsers > 0, "no rollup took the delta path (seed \(seed))")
        #expect(try await deltas.scalar(Self.waitingDeltas, as: Int.self) == 0)
        #expect(!inBatch || rolledInBatch > 0, "no batch added its users' deltas itself (seed \(seed))")

        for id in users {
            let added = try await deltas.store.tree(for: id)
            let recounted = try await recounts.store.tree(for: id)
            #expect(added.tree == recounted.tree, "user \(id) (seed \(seed))")
            #expect(added.version == recounted.version, "user \(id) (seed \(seed))")
            #expect(added.tree == models[id, default: BadgeTree()].node(at: .root, now: now), "user \(id) against the model (seed \(seed))")
        }
        let addedLog = try await deltas.changeLog()
        let recountedLog = try await recounts.changeLog()
        #expect(!addedLog.isEmpty)
        #expect(addedLog.count == recountedLog.count)
        for (added, recounted) in zip(addedLog, recountedLog) where added != recounted {
            Issue.record("change log differs (seed \(seed)): delta path \(added), recount \(recounted)")
            break
        }
        // And the verifier, which recounts from scratch, finds nothing wrong.
        let report = try await BadgeVerifier(store: deltas.store).run(repair: false)
        #expect(report.mismatches == 0, "seed \(seed)")
    }
}

extension StoreFixture {
    /// Rolls up every dirty user as a worker does; returns how many took the delta path.
    func drainCountingDeltas(batchSize: Int) async throws -> Int {
        var added = 0
        while true {
            let round = try await store.rollupRound(limit: batchSize)
            added += round.outcome.added
            if round.claimed.isEmpty { return added }
        }
    }

    /// Every change-log record, without its times and feed order: user, version, broadcast
    /// version, nodes and root totals, in user and version order.
    func changeLog() async throws -> [String] {
        try await pool.withConnection { connection in
            try connection.query(
                PGStatement(
                    "test.change_log",
                    """
                    SELECT concat_ws(' ', user_id, version, broadcast_version, nodes::text, root_count, root_unseen)
                    FROM badge_change ORDER BY user_id, version
                    """, prepared: false)
            ).rows.map { try $0.decode(0, as: String.self) }
        }
    }
}

@Suite("The rollup's deltas of writes a version already covers")
struct RollupDeltaUpgradeTests {
    @Test("a delta of a write the user's current version already covers (left by a recount that did not see it) is dropped, not added twice")
    func staleDeltaIsDropped() async throws {
        let fixture = try await StoreFixture.make()
        try await tearingDown({ await fixture.tearDown() }) {
            let alice = user("stale_alice")
            // Left both ways: in `badge_delta` (earlier builds, other writers) and on a mark.
            let path = try BadgePath(validating: "root.chat.c1")
            try await fixture.ingest([BadgeMutation(user: alice, path: path, operation: .increment(by: 2))])
            // Ingest's additive write carries its delta on its dirty mark (migration 31).
            #expect(try await fixture.scalar("SELECT count(*)::int FROM badge_delta", as: Int.self) == 0)
            #expect(
                try await fixture.scalar(
                    "SELECT concat_ws(' ', recount, additive, delta_paths::text, delta_amounts::text) FROM dirty_mark", as: String.self)
                    == "t t {root.chat.c1} {2}")
            try await fixture.drainDirtyUsers()
            #expect(try await fixture.store.tree(for: alice).tree?.count == 2)

            // A recount that did not consume a delta leaves it behind, stamped with a write the
            // user's current version covers.
            try await fixture.ingest([BadgeMutation(user: alice, path: path, operation: .increment(by: 3))])
            let version = try await fixture.scalar("SELECT version FROM user_version WHERE user_id = 'stale_alice'", as: Int64.self)
            try await fixture.pool.withConnection { connection in
                _ = try connection.query(
                    PGStatement(
                        "test.stale_delta", """
                            INSERT INTO badge_delta
                            SELECT m.user_id, d.path, d.amount, d.unseen, v.writes_through
                            FROM dirty_mark m JOIN user_version v ON v.user_id = m.user_id
                            CROSS JOIN LATERAL unnest(m.delta_paths, m.delta_amounts, m.delta_unseen) AS d(path, amount, unseen)
                            """,
                        prepared: false))
                _ = try connection.query(
                    PGStatement(
                        "test.stale_mark", """
                            INSERT INTO dirty_mark (user_id, seq, bump, recount, additive, delta_paths, delta_amounts, delta_unseen)
                            SELECT m.user_id, v.writes_through, false, true, true, m.delta_paths, m.delta_amounts, m.delta_unseen
                            FROM dirty_mark m JOIN user_version v ON v.user_id = m.user_id
                            """,
                        prepared: false))
            }
            try await fixture.drainDirtyUsers()
            let tree = try await fixture.store.tree(for: alice)
            #expect(tree.tree?.count == 5)
            #expect(tree.version == version + 1)
            #expect(try await fixture.scalar("SELECT count(*)::int FROM badge_delta", as: Int.self) == 0)
            #expect(try await fixture.scalar("SELECT count(*)::int FROM dirty_mark", as: Int.self) == 0)
        }
    }
}
