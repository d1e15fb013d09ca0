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
        let fixture = try await StoreFixture.make()
        defer { Task { await fixture.tearDown() } }
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

/// A time set once by one task and read by another.
private final class Stamp: Sendable {
    private let instant = Mutex<ContinuousClock.Instant?>(nil)

    var value: ContinuousClock.Instant? { instant.withLock { $0 } }

    func set(_ value: ContinuousClock.Instant) { instant.withLock { $0 = value } }
}
