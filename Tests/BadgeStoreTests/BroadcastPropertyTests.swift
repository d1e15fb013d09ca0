import BadgeCore
import BadgeStore
import Foundation
import LibPQ
import TestSupport
import Testing

/// Broadcasts, their dismissals and seens with every per-user operation (mutes and modes
/// included), in random arrival orders and batches, through ingest and the rollup: every user's
/// visible tree is the in-order model's own tree with the broadcasts the user did not dismiss
/// merged in under the model's mutes and the modes.
@Suite("Broadcasts with every operation in random arrival orders: PostgreSQL against the model")
struct BroadcastPropertyTests {
    /// The same on tables distributed by Citus (docs/SHARDING.md, "Running the tests on Citus"),
    /// one seed with aggregation modes and one without; skipped where no Citus cluster is named.
    @Test(
        "on tables distributed by Citus, random broadcasts and operations: each visible tree and the change log's root equal the model's, OnCitus",
        .enabled(if: !SchemaLayout.citusWorkers.isEmpty, "no Citus cluster (REDDOT_TEST_CITUS_WORKERS)"),
        arguments: [UInt64(5), 6])
    func randomArrivalOrdersOnCitus(seed: UInt64) async throws {
        try await randomArrivalOrders(seed: seed, layout: .citus)
    }

    @Test("random broadcasts, then random operations of 30 users shuffled into batches: each visible tree and the change log's root equal the model's", arguments: [(UInt64(1), SchemaLayout.plain), (2, .plain), (3, .plain), (4, .plain)])
    func randomArrivalOrders(seed: UInt64, layout: SchemaLayout) async throws {
        let fixture = try await StoreFixture.make(layout: layout)
        try await tearingDown({ await fixture.tearDown() }) {
            let modes = AggregationModes(entries: [
                try AggregationModes.entry(pattern: "root.a", mode: .children),
                try AggregationModes.entry(pattern: "root.b.*", mode: .dot),
                try AggregationModes.entry(pattern: "root.c.a", mode: .exclude),
            ])
            if seed % 2 == 1 { _ = try await fixture.store.storeAggregationModes(modes) }
            let modesInForce = seed % 2 == 1 ? modes : .none
            var random = SeededRandom(seed: seed &* 104_729)
            let labels = ["a", "b", "c", "d"]
            func randomPath(_ random: inout SeededRandom) throws -> BadgePath {
                var text = "root"
                for _ in 0..<Int.random(in: 1...3, using: &random) { text += "." + labels.randomElement(using: &random)! }
                return try BadgePath(validating: text)
            }

            // The broadcasts come first, so that every user's clear and seen (which occur later)
            // can take them.
            var broadcasts: [MappedOperation] = []
            for index in 0..<6 {
                broadcasts.append(
                    MappedOperation(
                        eventID: try EventID(validating: "b\(seed)-\(index)"), audience: .everyone, path: try randomPath(&random),
                        operation: .set(count: Int64.random(in: 0...3, using: &random), icon: nil), expiresAt: nil))
            }
            try await apply(broadcasts, fixture)
            try await Task.sleep(for: .milliseconds(20))

            let users = (0..<30).map { user("bp\(seed)_u\($0)") }
            var generator = RandomBadgeOperations(users: users, seed: seed)
            generator.labels = labels
            generator.maximumDepth = 3
            generator.weights = .orderFree
            generator.weights.mute = 3
            // After the broadcasts were stored; the events occur a millisecond apart, so they are all
            // past before ingest applies them (a time in the future would be read as now).
            generator.firstTime = Date()
            let mutations = generator.sequence(count: 1_200)
            try await Task.sleep(for: .milliseconds(1_300))
            let now = Date().addingTimeInterval(60)
            var models: [UserID: BadgeTree] = [:]
            for mutation in mutations { models[mutation.user, default: BadgeTree()].apply(mutation, now: now) }

            var shuffled = mutations.enumerated().map { index, mutation in
                MappedOperation(
                    eventID: try! EventID(validating: "e\(seed)-\(index)"), audience: .users([mutation.user]), path: mutation.path,
                    operation: mutation.operation, expiresAt: mutation.expiresAt, occurredAt: mutation.occurredAt)
            }.shuffled(using: &random)
            while !shuffled.isEmpty {
                let size = min(Int.random(in: 1...150, using: &random), shuffled.count)
                try await apply(Array(shuffled.prefix(size)), fixture)
                shuffled.removeFirst(size)
                if Bool.random(using: &random) { _ = try await fixture.store.recomputeDirtyUsers(limit: 10) }
            }
            try await fixture.drainDirtyUsers()

            let stored = try await fixture.pool.withConnection { connection in try BadgeStore.readBroadcastSet(on: connection) }
            #expect(!stored.active.isEmpty)
            for id in users {
                let model = models[id, default: BadgeTree()]
                let userMutations = mutations.filter { $0.user == id }
                // A clear takes the broadcasts at its node (a forced one, within it too); a seen marks
                // those within it seen.
                let dismissed = Set(stored.active.values.filter { broadcast in
                    userMutations.contains { mutation in
                        guard case .clear(let force) = mutation.operation else { return false }
                        return broadcast.path == mutation.path || (force && broadcast.path.isWithin(mutation.path))
                    }
                }.map(\.id))
                let seen = Set(stored.active.values.filter { broadcast in
                    userMutations.contains { $0.operation == .seen && broadcast.path.isWithin($0.path) }
                }.map(\.id))
                var expected = model.aggregates(now: now, modes: modesInForce)
                BadgeAggregate.merge(
                    stored.active.values.filter { !dismissed.contains($0.id) }, seen: seen, into: &expected, modes: modesInForce,
                    muted: model.mutedPaths(at: now))
                let read = try await fixture.pool.withConnection { connection in try BadgeStore.readAggregates(for: id, on: connection) }
                #expect(read.aggregates == expected, "user \(id) (seed \(seed))")
                let logged = try await fixture.rows(
                    "SELECT root_count, root_unseen FROM badge_change WHERE user_id = $1 ORDER BY version DESC LIMIT 1", [id.rawValue])
                if let last = logged.first {
                    let root = expected[.root] ?? BadgeAggregate(count: 0)
                    #expect(last == [String(root.count), String(root.unseen)], "the change log's root of \(id) (seed \(seed))")
                }
            }
            #expect(try await BadgeVerifier(store: fixture.store).run(repair: false).mismatches == 0)
        }
    }

    /// Applies `events` as ingest does, in one transaction.
    func apply(_ events: [MappedOperation], _ fixture: StoreFixture) async throws {
        try await fixture.pool.withTransaction { connection in
            var outcome = BatchOutcome()
            try IngestTransaction.applyEvents(events, into: &outcome, on: connection)
        }
    }
}
