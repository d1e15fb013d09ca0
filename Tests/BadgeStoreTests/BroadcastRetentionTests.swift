import BadgeCore
import BadgeStore
import Foundation
import LibPQ
import TestSupport
import Testing

/// Issue 28: withdrawn broadcasts and users' dismissals of them do not stay forever.
@Suite("The retention of withdrawn broadcasts and their dismissals")
struct BroadcastRetentionTests {
    static func broadcast(_ id: String, _ path: String, _ operation: BadgeOperation) throws -> MappedOperation {
        MappedOperation(eventID: try EventID(validating: id), audience: .everyone, path: try BadgePath(validating: path), operation: operation, expiresAt: nil)
    }

    static func own(_ id: String, _ who: String, _ path: String, _ operation: BadgeOperation) throws -> MappedOperation {
        MappedOperation(eventID: try EventID(validating: id), audience: .users([user(who)]), path: try BadgePath(validating: path), operation: operation, expiresAt: nil)
    }

    @Test("a broadcast withdrawn before the cutoff goes with every dismissal of it, in steps; a recent or active one stays with its dismissals; no user's tree or version changes")
    func prunesOnlyOldWithdrawn() async throws {
        let fixture = try await StoreFixture.make()
        try await tearingDown({ await fixture.tearDown() }) {
            func apply(_ events: [MappedOperation]) async throws {
                try await fixture.pool.withTransaction { connection in
                    var outcome = BatchOutcome()
                    try IngestTransaction.applyEvents(events, into: &outcome, on: connection)
                }
                try await fixture.drainDirtyUsers()
            }
            try await apply([
                Self.broadcast("old", "root.promo.a", .set(count: 1, icon: nil)),
                Self.broadcast("recent", "root.promo.b", .set(count: 2, icon: nil)),
                Self.broadcast("live", "root.news", .set(count: 3, icon: nil)),
            ])
            try await Task.sleep(for: .milliseconds(20))
            // u1 clears the whole promo subtree (both), u2 and u3 mark them seen, u3 clears the news.
            try await apply([
                Self.own("c1", "u1", "root.promo", .clear(force: true)), Self.own("s2", "u2", "root.promo", .seen),
                Self.own("s3", "u3", "root.promo", .seen), Self.own("c3", "u3", "root.news", .clear(force: true)),
                Self.own("i4", "u4", "root.chat", .increment(by: 1)),
            ])
            try await Task.sleep(for: .milliseconds(20))
            // Withdrawn for everyone: the promo broadcasts; the news stays.
            try await apply([Self.broadcast("w", "root.promo", .clear(force: true))])
            let users = ["u1", "u2", "u3", "u4"].map(user)
            var before: [UserBadgeTree] = []
            for id in users { before.append(try await fixture.store.tree(for: id)) }

            func count(_ sql: String) async throws -> Int {
                try await fixture.pool.withConnection { try $0.query(PGStatement("test.count", sql, prepared: false)).singleRow().decode(0, as: Int.self) }
            }
            #expect(try await count("SELECT count(*)::int FROM broadcast WHERE withdrawn_at IS NOT NULL") == 2)
            #expect(try await count("SELECT count(*)::int FROM broadcast_clear") == 3)
            #expect(try await count("SELECT count(*)::int FROM broadcast_seen") == 4)
            try await fixture.pool.withConnection { connection in
                _ = try connection.query(
                    PGStatement("test.backdate", "UPDATE broadcast SET withdrawn_at = now() - interval '40 days' WHERE event_id = 'old'", prepared: false))
            }

            // One dismissal of each kind per step: the old broadcast goes in the step that takes its
            // last one.
            let cutoff = Date().addingTimeInterval(-30 * 86_400)
            var steps: [BadgeStore.WithdrawnPrune] = []
            repeat {
                steps.append(try await fixture.pool.withTransaction { try BadgeStore.pruneWithdrawnBroadcasts(olderThan: cutoff, limit: 1, on: $0) })
            } while steps.last!.dismissals > 0 && steps.count < 10
            #expect(steps.map(\.dismissals) == [2, 1, 0], "old: u1's clear, u2's and u3's seens")
            #expect(steps.map(\.broadcasts) == [0, 1, 0])
            #expect(try await count("SELECT count(*)::int FROM broadcast") == 2)
            #expect(try await count("SELECT count(*)::int FROM broadcast WHERE event_id = 'old'") == 0)
            #expect(try await count("SELECT count(*)::int FROM broadcast_clear") == 2, "u1's of the recent one, u3's of the news")
            #expect(try await count("SELECT count(*)::int FROM broadcast_seen") == 2, "u2's and u3's of the recent one")

            for (index, id) in users.enumerated() {
                #expect(try await fixture.store.tree(for: id) == before[index], "\(id.rawValue)")
            }
            // Nothing more to do.
            let again = try await fixture.pool.withTransaction { try BadgeStore.pruneWithdrawnBroadcasts(olderThan: cutoff, limit: 1, on: $0) }
            #expect(again.dismissals == 0 && again.broadcasts == 0)
        }
    }
}
