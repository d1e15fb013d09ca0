import BadgeCore
import BadgeStore
import Foundation
import LibPQ
import Synchronization
import Testing
import TestSupport

/// The fold of old increments into their counts (`BadgeStore.foldIncrements`, run by ingest's
/// retention prune) changes how counters are stored, never what a tree shows: it leaves no work
/// for the rollup, and it keeps the writers of its users out while it runs.
@Suite("The fold of old increments")
struct FoldTests {
    @Test("a fold keeps every tree and version and leaves no dirty mark; a batch for a user it folds waits for it, and the fold for the batch")
    func foldIsQuiet() async throws {
        let fixture = try await StoreFixture.make()
        try await tearingDown({ await fixture.tearDown() }) {
            let alice = user("fold_alice"), bob = user("fold_bob")
            let (y, z, w) = (path("root.x.y"), path("root.x.z"), path("root.w"))
            let start = Date().addingTimeInterval(-600)
            func at(_ seconds: Double) -> Date { start.addingTimeInterval(seconds) }
            try await fixture.ingest([
                BadgeMutation(user: alice, path: y, operation: .increment(by: 2), occurredAt: at(1)),
                BadgeMutation(user: alice, path: y, operation: .increment(by: 3), occurredAt: at(2)),
                BadgeMutation(user: alice, path: z, operation: .set(count: 4, icon: nil), occurredAt: at(1)),
                BadgeMutation(user: alice, path: z, operation: .increment(by: 1), occurredAt: at(2)),
                // A decremented counter folds in time order (`debited`).
                BadgeMutation(user: bob, path: w, operation: .increment(by: 5), occurredAt: at(1)),
                BadgeMutation(user: bob, path: w, operation: .decrement(by: 1), occurredAt: at(2)),
            ])
            try await fixture.drainDirtyUsers()
            let before = [try await fixture.store.tree(for: alice), try await fixture.store.tree(for: bob)]
            #expect(before[0].tree?.count == 10 && before[1].tree?.count == 4, "\(before)")

            func count(_ sql: String) async throws -> Int64 {
                try await fixture.pool.withConnection { connection in
                    try connection.query(PGStatement("test.count", sql, prepared: false)).rows.first?.decode(0, as: Int64.self) ?? -1
                }
            }
            func fold() async throws -> Int {
                try await fixture.pool.withConnection { connection in
                    try BadgeStore.foldIncrements(storedBefore: Date().addingTimeInterval(3_600), limit: 100, on: connection).increments
                }
            }
            #expect(try await fold() == 5)
            #expect(try await count("SELECT count(*) FROM badge_increment") == 0)
            #expect(try await count("SELECT count(*) FROM dirty_mark") == 0, "the fold left work for the rollup")
            let after = [try await fixture.store.tree(for: alice), try await fixture.store.tree(for: bob)]
            #expect(after == before)

            // A batch for alice stays open: the fold waits for it (it would fold alice's next
            // increment, which that batch may be clearing or setting).
            try await fixture.ingest([BadgeMutation(user: alice, path: y, operation: .increment(by: 7), occurredAt: at(3))])
            try await fixture.drainDirtyUsers()
            let open = try PGConnection.connect(fixture.pool.configuration, logger: TestServer.logger)
            defer { open.close() }
            try open.execute(script: "BEGIN", name: "test.begin")
            var batch = BadgeBatch()
            batch.append(contentsOf: [BadgeMutation(user: alice, path: y, operation: .set(count: 1, icon: nil), occurredAt: at(4))])
            _ = try BadgeStore.applyMarked(batch, conflicts: .merge, on: open)
            let folding = Task { try await fold() }
            var waited = false
            for _ in 0..<100 where !waited {
                waited = try await count(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%FOR NO KEY UPDATE%'") == 1
                if !waited { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(waited, "the fold did not wait for the open batch of the same user")
            try open.execute(script: "COMMIT", name: "test.commit")
            // The set took the increment the fold was waiting to fold.
            #expect(try await folding.value == 0)
            try await fixture.drainDirtyUsers()
            let set = try await fixture.store.tree(for: alice, at: y)
            #expect(set.tree?.count == 1 && set.version == before[0].version + 2, "\(set)")
        }
    }

    @Test("a fold goes in transactions of about its limit: thirty users with six increments each, twenty a transaction, every tree kept")
    func foldIsChunkedByIncrements() async throws {
        let fixture = try await StoreFixture.make()
        try await tearingDown({ await fixture.tearDown() }) {
            let users = (0..<30).map { user("fold_chunk_\($0)") }
            let start = Date().addingTimeInterval(-600)
            var mutations: [BadgeMutation] = []
            for (index, id) in users.enumerated() {
                for step in 0..<6 {
                    mutations.append(BadgeMutation(
                        user: id, path: path("root.p\(step % 3)"), operation: .increment(by: 1),
                        occurredAt: start.addingTimeInterval(Double(step * 30 + index))))
                }
            }
            try await fixture.ingest(mutations)
            try await fixture.drainDirtyUsers()
            var before: [UserBadgeTree] = []
            for id in users { before.append(try await fixture.store.tree(for: id)) }
            #expect(before.allSatisfy { $0.tree?.count == 6 })

            let report = try await fixture.pool.withConnection { connection in
                try BadgeStore.foldIncrements(storedBefore: Date().addingTimeInterval(3_600), limit: 20, on: connection)
            }
            #expect(report.increments == 180, "\(report)")
            // Six a user, so at most three users (18 increments) a transaction once the first
            // one (a single user, a 64th of the limit rounded up to 1) has told the size.
            #expect(report.largestTransaction <= 20 && report.transactions >= 9, "\(report)")
            var after: [UserBadgeTree] = []
            for id in users { after.append(try await fixture.store.tree(for: id)) }
            #expect(after == before)
            let left = try await fixture.pool.withConnection { connection in
                try connection.query(PGStatement("test.count", "SELECT count(*) FROM badge_increment", prepared: false)).rows.first?
                    .decode(0, as: Int64.self)
            }
            #expect(left == 0)
        }
    }

    @Test("an old increment that cannot fold yet (one of its node that occurred before it is not shown) ends the fold, and the users after it still fold")
    func unfoldableIncrementEndsTheFold() async throws {
        let fixture = try await StoreFixture.make()
        try await tearingDown({ await fixture.tearDown() }) {
            let early = user("fold_blocked"), later = user("fold_after")
            let node = path("root.a")
            let start = Date().addingTimeInterval(-600)
            try await fixture.ingest([BadgeMutation(user: early, path: node, operation: .increment(by: 1), occurredAt: start.addingTimeInterval(5))])
            try await fixture.ingest([BadgeMutation(user: later, path: node, operation: .increment(by: 1), occurredAt: start.addingTimeInterval(1))])
            try await fixture.drainDirtyUsers()
            // An increment of the same node that occurred before the shown one arrives and is not
            // rolled up yet: the shown one cannot fold while it is not.
            try await fixture.ingest([BadgeMutation(user: early, path: node, operation: .increment(by: 1), occurredAt: start.addingTimeInterval(1))])
            let shownLater = try await fixture.store.tree(for: later)

            let finished = FinishedFlag()
            let folding = Task {
                defer { finished.flag.withLock { $0 = true } }
                return try await fixture.pool.withConnection { connection in
                    try BadgeStore.foldIncrements(storedBefore: Date().addingTimeInterval(3_600), limit: 100, on: connection)
                }
            }
            // A fold that kept finding the same user would never end: give it 30 s, then end its
            // session so that the test fails instead of hanging.
            var ended = false
            for _ in 0..<300 where !ended {
                try await Task.sleep(for: .milliseconds(100))
                ended = finished.flag.withLock { $0 }
            }
            if !ended {
                Issue.record("the fold did not end within 30 s")
                try await fixture.pool.withConnection { connection in
                    _ = try connection.query(PGStatement("test.end_fold", """
                        SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                        WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
                        """, prepared: false))
                }
            }
            let report = try await folding.value
            #expect(report.increments == 1, "only the other user's increment folds: \(report)")
            let left = try await fixture.pool.withConnection { connection in
                try connection.query(PGStatement("test.count", "SELECT count(*) FROM badge_increment", prepared: false)).rows.first?
                    .decode(0, as: Int64.self)
            }
            #expect(left == 2, "both of the blocked user's increments stay")
            #expect(try await fixture.store.tree(for: later) == shownLater)
            try await fixture.drainDirtyUsers()
            #expect(try await fixture.store.tree(for: early).tree?.count == 2)
        }
    }
}

/// Set once a task has ended, read by the test that waits for it.
private final class FinishedFlag: Sendable {
    let flag = Mutex(false)
}
