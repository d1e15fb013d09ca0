import BadgeCore
import BadgeIngest
import BadgeStore
import Foundation
import LibPQ
import TestSupport
import Testing

@Suite("Dead letters: list and replay")
struct DeadLetterTests {
    @Test("a record rejected for an unknown type is replayed exactly once after its rule is added, and stays recorded")
    func roundTrip() async throws {
        try await IngestFixture.with { fixture in
            let records = [
                record(#"{"id":"p1","type":"promo.started","users":["zoe"],"attrs":{"item":"i7"}}"#, offset: 0, key: "zoe"),
                record(#"{"id":"p2","op":"incr","user":"zoe","path":"root.a*","by":1}"#, offset: 1, key: "zoe"),
                record(#"{"id":"p3","op":"incr","user":"zoe","path":"root.chat.c1","by":2}"#, offset: 2, key: "zoe"),
            ]
            _ = try await fixture.commitOwned(PreparedBatch(records: records, rules: testRules))
            let listed = try await fixture.pool.withConnection { try DeadLetterStore.list(DeadLetterFilter(), on: $0) }
            #expect(listed.map(\.reason) == ["unknown_type", "invalid_path"])
            #expect(listed.map(\.record.offset) == [0, 1])
            #expect(listed.first?.record.payload == records[0].payload)
            #expect(try await fixture.pool.withConnection {
                try DeadLetterStore.list(DeadLetterFilter(reason: "invalid_path"), on: $0)
            }.map(\.eventID) == ["p2"])

            // Before the cause is fixed nothing changes.
            let early = try await fixture.pool.withTransaction { try DeadLetterReplay.replay(DeadLetterFilter(), rules: testRules, on: $0) }
            #expect(early.replayed.isEmpty && early.stillRejected.map(\.rejection.reason) == [.unknownType, .invalidPath])

            let fixed = try RuleSet(
                yaml: """
                    rules:
                      - type: promo.started
                        op: incr
                        path: root.promo.{item}
                    """)
            let outcome = try await fixture.pool.withTransaction { try DeadLetterReplay.replay(DeadLetterFilter(), rules: fixed, on: $0) }
            #expect(outcome.replayed == [listed[0].id])
            #expect(outcome.stillRejected.map(\.id) == [listed[1].id])
            try await fixture.drainDirtyUsers()
            let zoe = try await fixture.store.tree(for: user("zoe"))
            #expect(zoe.tree?.count == 3)

            // A second replay takes nothing again; the record stays, marked replayed.
            let again = try await fixture.pool.withTransaction { try DeadLetterReplay.replay(DeadLetterFilter(), rules: fixed, on: $0) }
            #expect(again.replayed.isEmpty && again.alreadyApplied.isEmpty)
            try await fixture.drainDirtyUsers()
            #expect(try await fixture.store.tree(for: user("zoe")).tree?.count == 3)
            let everything = try await fixture.pool.withConnection {
                try DeadLetterStore.list(DeadLetterFilter(includeReplayed: true), on: $0)
            }
            #expect(everything.count == 2)
            #expect(everything[0].replayedAt != nil && everything[1].replayedAt == nil)
            #expect(try await fixture.scalar("SELECT count(*)::int FROM \(AppliedKeys.table) WHERE event_id = 'p1'", as: Int32.self) == 1)
        }
    }

    @Test("a record whose event id was applied since (re-sent fixed) counts as done, not applied twice")
    func alreadyApplied() async throws {
        try await IngestFixture.with { fixture in
            _ = try await fixture.commitOwned(
                PreparedBatch(
                    records: [record(#"{"id":"q1","type":"promo.started","users":["yan"],"attrs":{"item":"i1"}}"#, offset: 0, key: "yan")],
                    rules: testRules))
            _ = try await fixture.commitOwned(
                PreparedBatch(records: [record(#"{"id":"q1","op":"incr","user":"yan","path":"root.promo.i1","by":1}"#, offset: 1, key: "yan")], rules: testRules))
            let fixed = try RuleSet(yaml: "rules:\n  - type: promo.started\n    op: incr\n    path: root.promo.{item}\n")
            let outcome = try await fixture.pool.withTransaction { try DeadLetterReplay.replay(DeadLetterFilter(), rules: fixed, on: $0) }
            #expect(outcome.alreadyApplied.count == 1 && outcome.replayed.isEmpty)
            try await fixture.drainDirtyUsers()
            #expect(try await fixture.store.tree(for: user("yan")).tree?.count == 1)
        }
    }

    @Test("the retention prune deletes old dead letters once published, and keeps unpublished and recent ones")
    func retention() async throws {
        try await IngestFixture.with { fixture in
            let records = (0..<4).map { record(#"{"id":"bad\#($0)","#, offset: Int64($0), key: "k\($0)") }
            _ = try await fixture.commit(PreparedBatch(records: records, rules: testRules), expected: [:])
            // bad0 and bad1 old and published, bad2 old and not published yet, bad3 published and recent.
            _ = try await fixture.rows(
                """
                UPDATE rejected_record SET
                    rejected_at = CASE WHEN payload <> convert_to('{"id":"bad3",', 'UTF8') THEN now() - interval '40 days' ELSE rejected_at END,
                    published_at = CASE WHEN payload <> convert_to('{"id":"bad2",', 'UTF8') THEN now() END
                RETURNING 1
                """)
            let pruned = try await fixture.pool.withConnection { connection in
                try DeadLetterStore.prune(olderThan: Date().addingTimeInterval(-30 * 86_400), limit: 1, on: connection)
            }
            #expect(pruned == 2)
            let left = try await fixture.rows("SELECT convert_from(payload, 'UTF8') FROM rejected_record ORDER BY id")
            #expect(left == [[#"{"id":"bad2","#], [#"{"id":"bad3","#]])
        }
    }
}
