import BadgeCore
import BadgeStore
import Foundation
import LibPQ
import Synchronization
import Testing
import TestSupport

/// Ingest never waits for a rollup round (DESIGN §5): a round holding the same users open does
/// not hold up an ingest batch, and a clear at the version that round makes stays exact.
@Suite("Ingest while a rollup round of the same users is open")
struct IngestDuringRollupTests {
    @Test("an ingest batch for users a rollup round holds commits before the round ends, and shows in the next version")
    func ingestCommitsWhileRoundIsOpen() async throws {
        // The shipped schema: one claim takes every dirty user (a partitioned queue gives one partition's).
        let fixture = try await StoreFixture.make(layout: .plain)
        try await tearingDown({ await fixture.tearDown() }) {
            let alice = user("held_alice"), bob = user("held_bob"), carol = user("held_carol")
            let chat = try BadgePath(validating: "root.chat.c1")
            try await fixture.ingest([
                BadgeMutation(user: alice, path: chat, operation: .increment(by: 2)),
                BadgeMutation(user: bob, path: chat, operation: .set(count: 1, icon: nil)),
                BadgeMutation(user: carol, path: chat, operation: .increment(by: 1)),
            ])

            // A rollup round claims both users and recomputes them, on a connection of its own,
            // and stays open (its marks and its per-user locks held) while ingest writes them again.
            let round = try PGConnection.connect(fixture.pool.configuration, logger: TestServer.logger)
            defer { round.close() }
            try round.execute(script: "BEGIN", name: "test.begin")
            let claimed = try BadgeStore.claimDirtyUsers(limit: 100, on: round).map(\.user)
            #expect(Set(claimed) == [alice, bob, carol])
            let versions = try BadgeStore.rollUp(claimed, on: round).versions
            #expect(versions[alice] == 1 && versions[bob] == 1)

            // An HTTP clear of carol waits for the round (it recounts carol itself), holding nothing
            // that ingest needs meanwhile.
            let action = Task { try await fixture.store.act(.clear(force: true), at: .root, for: carol, seenVersion: nil) }
            try await Task.sleep(for: .milliseconds(500))

            let committedAt = Stamp()
            let ingested = Task {
                try await fixture.ingest([
                    BadgeMutation(user: alice, path: chat, operation: .increment(by: 3)),
                    BadgeMutation(user: bob, path: chat, operation: .set(count: 4, icon: nil)),
                    // Dated after any clear of this test, so no clear takes it.
                    BadgeMutation(user: carol, path: chat, operation: .increment(by: 5), occurredAt: Date().addingTimeInterval(3_600)),
                ])
                committedAt.set(ContinuousClock.now)
            }
            // The batch must commit with the round still open. If it waited for the round, it
            // would wait for ever: after 30 s the test records the failure and ends the round.
            var waited = 0
            while committedAt.value == nil, waited < 300 {
                try await Task.sleep(for: .milliseconds(100))
                waited += 1
            }
            let roundEnded = ContinuousClock.now
            let committed = committedAt.value
            #expect(committed != nil, "the ingest batch waited for the open rollup round")
            try round.execute(script: "COMMIT", name: "test.commit")
            if let committed { #expect(committed < roundEnded) }
            _ = try await ingested.value
            // The clear took what occurred before it: the first increment, not the later-dated one.
            guard case .applied(let cleared) = try await action.value else {
                Issue.record("the clear of carol was not applied")
                return
            }
            #expect(cleared != nil)
            let carolTree = try await fixture.store.tree(for: carol)
            #expect(carolTree.tree?.count == 5, "\(carolTree)")

            // The round's version covers only what it saw; the batch shows in the next one.
            var shown = try await fixture.store.tree(for: alice)
            #expect(shown.version == 1 && shown.tree?.count == 2)
            #expect(try await fixture.scalar("SELECT count(DISTINCT user_id)::int FROM dirty_mark", as: Int.self) == 2)
            try await fixture.drainDirtyUsers()
            shown = try await fixture.store.tree(for: alice)
            #expect(shown.version == 2 && shown.tree?.count == 5)
            #expect(try await fixture.store.tree(for: bob).tree?.count == 4)

            // A clear at version 1 (what the round showed) takes only what version 1 showed.
            #expect(try await fixture.store.act(.clear(force: false), at: chat, for: alice, seenVersion: 1) == .applied(3))
            #expect(try await fixture.store.tree(for: alice).tree?.count == 3)
            #expect(try await fixture.store.act(.clear(force: false), at: chat, for: bob, seenVersion: 1) == .applied(nil))
            #expect(try await fixture.store.tree(for: bob).tree?.count == 4)
            #expect(try await BadgeVerifier(store: fixture.store).run(repair: false).mismatches == 0)
        }
    }
}

/// Ingest brings its batch's users current in the batch's own transaction
/// (`IngestBatchWrite.rollUp`, on by default in `reddot ingest`), and leaves to the rollup every
/// user another transaction holds, without waiting for it.
@Suite("Ingest rolls up its own users where nothing holds them")
struct IngestRollsUpTests {
    static let chat = try! BadgePath(validating: "root.chat.c1")

    /// One ingest batch of `increments` (user, amount), ids `prefix-N`, committed with `rollUp`.
    static func commit(
        _ increments: [(UserID, Int64)], prefix: String, rollUp: Bool, rollUpLimit: Int = IngestTransaction.rollUpLimit,
        on connection: PGConnection
    ) throws -> BatchOutcome {
        let events = try increments.enumerated().map { index, increment in
            MappedOperation(
                eventID: try EventID(validating: "\(prefix)-\(index)"), audience: .users([increment.0]), path: chat,
                operation: .increment(by: increment.1), expiresAt: nil)
        }
        try connection.execute(script: "BEGIN", name: "test.begin")
        do {
            let outcome = try IngestTransaction.commit(
                IngestBatchWrite(group: "g", offsets: [], events: events, rejected: [], rollUp: rollUp, rollUpLimit: rollUpLimit),
                on: connection)
            try connection.execute(script: "COMMIT", name: "test.commit")
            return outcome
        } catch {
            try? connection.execute(script: "ROLLBACK", name: "test.rollback")
            throw error
        }
    }

    @Test("a batch makes its users' versions itself, logged and notified; a user a round holds, and everyone while a broadcast writer holds its lock, waits for the rollup")
    func batchRollsUpItsUsers() async throws {
        try await batchRollsUpItsUsers(layout: .fromEnvironment)
    }

    @Test(
        "on tables distributed by Citus, a batch makes its users' versions itself, or leaves them to the rollup, OnCitus",
        .enabled(if: !SchemaLayout.citusWorkers.isEmpty, "no Citus cluster (REDDOT_TEST_CITUS_WORKERS)"))
    func batchRollsUpItsUsersOnCitus() async throws {
        try await batchRollsUpItsUsers(layout: .citus)
    }

    func batchRollsUpItsUsers(layout: SchemaLayout) async throws {
        let fixture = try await StoreFixture.make(layout: layout)
        try await tearingDown({ await fixture.tearDown() }) {
            let alice = user("own_alice"), bob = user("own_bob"), carol = user("own_carol")
            let writer = try PGConnection.connect(fixture.pool.configuration, logger: TestServer.logger)
            defer { writer.close() }
            let listener = try PGConnection.connect(fixture.pool.configuration, logger: TestServer.logger)
            defer { listener.close() }
            try listener.execute(script: "LISTEN \(BadgeStore.changeChannel)", name: "test.listen")

            // Bob has a change waiting, and a rollup round holds him (claimed, not yet committed).
            _ = try Self.commit([(bob, 1)], prefix: "first", rollUp: false, on: writer)
            let round = try PGConnection.connect(fixture.pool.configuration, logger: TestServer.logger)
            defer { round.close() }
            try round.execute(script: "BEGIN", name: "test.begin")
            #expect(try BadgeStore.claimDirtyUsers(limit: 10, on: round).map(\.user) == [bob])

            // The batch commits at once; alice and carol are current when it does, bob is not.
            let outcome = try Self.commit([(alice, 2), (bob, 3), (carol, 4), (alice, 1)], prefix: "second", rollUp: true, on: writer)
            #expect(outcome.users == 3 && outcome.rolledUp == 2)
            for (who, count) in [(alice, Int64(3)), (carol, 4)] {
                let shown = try await fixture.store.tree(for: who)
                #expect(shown.version == 1 && shown.tree?.count == count, "\(who): \(shown)")
                #expect(try await fixture.scalar("SELECT count(*)::int FROM dirty_mark WHERE user_id = $1", [who.rawValue], as: Int.self) == 0)
                #expect(try await fixture.scalar("SELECT count(*)::int FROM badge_delta WHERE user_id = $1", [who.rawValue], as: Int.self) == 0)
                #expect(
                    try await fixture.scalar("SELECT root_count FROM badge_change WHERE user_id = $1 AND version = 1", [who.rawValue], as: Int64.self)
                        == count)
            }
            var notified: Set<ChangeNotification> = []
            for _ in 0..<50 where notified.count < 2 {
                notified.formUnion(try listener.waitForNotifications(timeoutMilliseconds: 100).compactMap { ChangeNotification(payload: $0.payload) })
            }
            #expect(notified == [.user(alice, version: 1), .user(carol, version: 1)], "\(notified)")
            let waiting = try await fixture.store.tree(for: bob)
            #expect(waiting.version == 0 && (waiting.tree?.count ?? 0) == 0, "\(waiting)")
            #expect(try await fixture.scalar("SELECT count(*)::int FROM dirty_mark WHERE user_id = $1", [bob.rawValue], as: Int.self) == 2)
            try round.execute(script: "ROLLBACK", name: "test.rollback")

            // A writer of the set of broadcasts holds its lock: the batch waits for neither it nor
            // the rollup, and leaves everyone marked.
            try round.execute(script: "BEGIN", name: "test.begin")
            try BadgeStore.lockBroadcastsExclusive(on: round)
            let held = try Self.commit([(alice, 5), (carol, 6)], prefix: "third", rollUp: true, on: writer)
            #expect(held.users == 2 && held.rolledUp == 0)
            #expect(try await fixture.store.tree(for: alice).tree?.count == 3)
            // The deltas the batch held for its round are stored for the rollup instead.
            #expect(
                try await fixture.scalar(
                    "SELECT coalesce(sum(amount), 0)::bigint FROM badge_delta WHERE user_id = ANY($1)", [[alice.rawValue, carol.rawValue]],
                    as: Int64.self) == 11)
            try round.execute(script: "COMMIT", name: "test.commit")

            try await fixture.drainDirtyUsers()
            #expect(try await fixture.store.tree(for: alice).tree?.count == 8)
            #expect(try await fixture.store.tree(for: bob).tree?.count == 4)
            #expect(try await fixture.store.tree(for: carol).tree?.count == 10)
            #expect(try await BadgeVerifier(store: fixture.store).run(repair: false).mismatches == 0)
        }
    }

    @Test("a batch brings at most 1,000 of its users current itself (each holds an entry of the server's lock table); the rest wait for the rollup")
    func batchRollsUpAtMostTheLimit() async throws {
        let fixture = try await StoreFixture.make()
        try await tearingDown({ await fixture.tearDown() }) {
            let writer = try PGConnection.connect(fixture.pool.configuration, logger: TestServer.logger)
            defer { writer.close() }
            let users = (0..<(IngestTransaction.rollUpLimit + 200)).map { user("many_\($0)") }
            let outcome = try Self.commit(users.map { ($0, 1) }, prefix: "many", rollUp: true, on: writer)
            #expect(outcome.users == users.count && outcome.rolledUp == IngestTransaction.rollUpLimit)
            #expect(try await fixture.scalar("SELECT count(DISTINCT user_id)::int FROM dirty_mark", as: Int.self) == 200)
            #expect(try await fixture.scalar("SELECT count(*)::int FROM user_version", as: Int.self) == IngestTransaction.rollUpLimit)
            try await fixture.drainDirtyUsers()
            #expect(try await fixture.scalar("SELECT count(*)::int FROM user_version", as: Int.self) == users.count)
        }
    }

    @Test("a batch's limit is the one it is given: the first users in user order are brought current, the others wait for the rollup")
    func batchRollsUpItsGivenLimit() async throws {
        let fixture = try await StoreFixture.make()
        try await tearingDown({ await fixture.tearDown() }) {
            let writer = try PGConnection.connect(fixture.pool.configuration, logger: TestServer.logger)
            defer { writer.close() }
            let users = (0..<5).map { user("given_\($0)") }
            let outcome = try Self.commit(users.reversed().map { ($0, 2) }, prefix: "given", rollUp: true, rollUpLimit: 3, on: writer)
            #expect(outcome.users == 5 && outcome.rolledUp == 3)
            for (index, who) in users.enumerated() {
                let shown = try await fixture.store.tree(for: who)
                #expect(shown.version == (index < 3 ? 1 : 0), "\(who): \(shown)")
            }
            #expect(try await fixture.scalar("SELECT string_agg(DISTINCT user_id, ' ' ORDER BY user_id) FROM dirty_mark", as: String.self) == "given_3 given_4")
            try await fixture.drainDirtyUsers()
            for who in users { #expect(try await fixture.store.tree(for: who).tree?.count == 2) }
        }
    }

    @Test("by default a batch's limit is a quarter of the server's lock table shared among the writers, from 1,000 to 100,000")
    func limitFollowsTheLockTable() async throws {
        let fixture = try await StoreFixture.make()
        try await tearingDown({ await fixture.tearDown() }) {
            let connection = try PGConnection.connect(fixture.pool.configuration, logger: TestServer.logger)
            defer { connection.close() }
            let locks = try await fixture.scalar("SELECT current_setting('max_locks_per_transaction')::bigint", as: Int64.self)
            let connections = try await fixture.scalar("SELECT current_setting('max_connections')::bigint", as: Int64.self)
            for writers in [1, 2, 16] {
                let expected = min(max(locks * connections / 4 / Int64(writers), 1_000), 100_000)
                #expect(try IngestTransaction.rollUpLimit(writers: writers, on: connection) == Int(expected), "\(writers) writers")
            }
            // PostgreSQL's defaults (64 × 100) give the floor to two writers.
            #expect(64 * 100 / 4 / 2 < IngestTransaction.rollUpLimit)
        }
    }
}

/// A time set once by one task and read by another.
private final class Stamp: Sendable {
    private let instant = Mutex<ContinuousClock.Instant?>(nil)

    var value: ContinuousClock.Instant? { instant.withLock { $0 } }

    func set(_ value: ContinuousClock.Instant) { instant.withLock { $0 = value } }
}
