import BadgeCore
import BadgeIngest
import BadgeStore
import Foundation
import LibPQ
import TestSupport
import Testing

@Suite("Committing batches to a real PostgreSQL")
struct IngestStoreTests {
    @Test("a committed batch gives every user the tree of the in-memory model")
    func batchEqualsModel() async throws {
        try await IngestFixture.with { fixture in
            let users = (0..<25).map { user("m_u\($0)") }
            var generator = RandomBadgeOperations(users: users, seed: 11)
            let mutations = generator.sequence(count: 400)
            var records = mutations.enumerated().map { index, mutation in
                mutationRecord(mutation, id: "m\(index)", offset: Int64(index))
            }
            // A content event for two users, mapped by the rules, at the end.
            records.append(
                record(
                    #"{"id":"chat1","type":"chat.message","users":["m_u0","m_u1"],"attrs":{"conversation":"c7"}}"#,
                    offset: Int64(records.count)))
            let now = Date()
            var models: [UserID: BadgeTree] = [:]
            for mutation in mutations {
                models[mutation.user, default: BadgeTree()].apply(mutation, now: now)
            }
            for name in ["m_u0", "m_u1"] {
                models[user(name), default: BadgeTree()].apply(.increment(by: 1), at: path("root.chat.c7"), now: now)
            }

            let batch = PreparedBatch(records: records, rules: testRules)
            #expect(batch.rejected.isEmpty)
            let outcome = try await fixture.commit(batch, expected: [:])
            #expect(outcome.applied == records.count)
            #expect(outcome.duplicates == 0)
            #expect(outcome.rejected.isEmpty)
            #expect(outcome.users == Set(mutations.map(\.user)).count)
            #expect(try await fixture.scalar("SELECT count(DISTINCT user_id)::int FROM dirty_mark", as: Int.self) == outcome.users)

            try await fixture.drainDirtyUsers()
            for id in users {
                let stored = try await fixture.store.tree(for: id)
                #expect(stored.tree == models[id, default: BadgeTree()].node(at: .root, now: now), "user \(id)")
            }
        }
    }

    @Test("an event id at two offsets counts once, in one batch and across batches")
    func duplicates() async throws {
        try await IngestFixture.with { fixture in
            func incr(_ id: String, _ offset: Int64, by: Int = 1) -> IngestRecord {
                record(#"{"id":"\#(id)","op":"incr","user":"d1","path":"root.a","by":\#(by)}"#, offset: offset)
            }
            let first = PreparedBatch(records: [incr("e1", 0), incr("e1", 1, by: 50), incr("e2", 2)], rules: testRules)
            let outcome1 = try await fixture.commit(first, expected: [:])
            #expect(outcome1.applied == 2)
            #expect(outcome1.duplicates == 1)
            #expect(outcome1.users == 1)
            #expect(outcome1.rewrites == 1)  // the plain insert met e1 twice, so the merging one wrote it

            let partition = TopicPartition(topic: topic, partition: 0)
            // e1 applied before and given twice, e4 new and given twice: only e3 and e4's first.
            let second = PreparedBatch(
                records: [incr("e1", 3), incr("e3", 4), incr("e2", 5), incr("e4", 6), incr("e1", 7, by: 20), incr("e4", 8, by: 30)],
                rules: testRules)
            let outcome2 = try await fixture.commit(second, expected: [partition: 3])
            #expect(outcome2.applied == 2)
            #expect(outcome2.duplicates == 4)
            #expect(outcome2.rewrites == 1)

            // A batch of only duplicates still moves the offset and touches no user.
            let third = PreparedBatch(records: [incr("e3", 9)], rules: testRules)
            let outcome3 = try await fixture.commit(third, expected: [partition: 9])
            #expect(outcome3 == BatchOutcome(applied: 0, duplicates: 1, rewrites: 1))
            #expect(try await fixture.storedOffsets([partition]) == [partition: 10])

            try await fixture.drainDirtyUsers()
            #expect(try await fixture.store.tree(for: user("d1"), at: path("root.a")).tree?.count == 4)
            #expect(try await fixture.scalar("SELECT count(*)::int FROM \(AppliedKeys.table)", as: Int.self) == 4)
        }
    }

    @Test(
        "plain inserts first: new rows are written once; an increment at a stored time, an item added again or an id applied before rewrites the batch with merging inserts, to the model's tree"
    )
    func newRowsFirst() async throws {
        try await IngestFixture.with { fixture in
            let at = Date(timeIntervalSince1970: 1_750_000_000)  // in the past: a later time would count as read time
            func op(_ operation: BadgeOperation, _ node: String, at time: Date? = at) -> BadgeMutation {
                BadgeMutation(user: user("n1"), path: path(node), operation: operation, occurredAt: time)
            }
            let item = try ItemID(validating: "m1")
            let batches: [[BadgeMutation]] = [
                [op(.increment(by: 2), "root.a"), op(.addItem(item), "root.b"), op(.increment(by: 1), "root.c", at: nil)],
                // The same time at root.a, the same item at root.b: both stored already.
                [op(.increment(by: 3), "root.a"), op(.addItem(item), "root.b"), op(.addItem(try ItemID(validating: "m2")), "root.b")],
                [op(.increment(by: 4), "root.a", at: at.addingTimeInterval(1))],
                // Only an item is stored already (its increment is at a new time).
                [op(.increment(by: 1), "root.a", at: at.addingTimeInterval(2)), op(.addItem(try ItemID(validating: "m2")), "root.b")],
            ]
            var models: [UserID: BadgeTree] = [:]
            let now = Date()
            var offset: Int64 = 0
            var expected: [TopicPartition: Int64] = [:]
            var rewrites: [Int] = []
            for (number, mutations) in batches.enumerated() {
                var records = mutations.enumerated().map { index, mutation in
                    mutationRecord(mutation, id: "n\(number)-\(index)", offset: offset + Int64(index))
                }
                if number == 2 { records.append(mutationRecord(batches[0][0], id: "n0-0", offset: offset + 1)) }
                for mutation in mutations { models[mutation.user, default: BadgeTree()].apply(mutation, now: now) }
                let batch = PreparedBatch(records: records, rules: testRules)
                let outcome = try await fixture.commit(batch, expected: expected)
                #expect(outcome.applied == mutations.count)
                #expect(outcome.duplicates == (number == 2 ? 1 : 0))
                rewrites.append(outcome.rewrites)
                expected = batch.nextOffsets
                offset += Int64(records.count)
            }
            #expect(rewrites == [0, 1, 1, 1])

            // Without plain inserts first, the same batch is written once, merging.
            let merged = PreparedBatch(
                records: [mutationRecord(op(.increment(by: 5), "root.a"), id: "n4-0", offset: offset)], rules: testRules)
            models[user("n1"), default: BadgeTree()].apply(op(.increment(by: 5), "root.a"), now: now)
            let outcome = try await fixture.commit(merged, expected: expected, newRowsFirst: false)
            #expect(outcome == BatchOutcome(applied: 1, users: 1))

            try await fixture.drainDirtyUsers()
            let stored = try await fixture.store.tree(for: user("n1"))
            #expect(stored.tree == models[user("n1")]?.node(at: .root, now: now))
            #expect(try await fixture.store.tree(for: user("n1"), at: path("root.a")).tree?.count == 15)
            #expect(try await fixture.store.tree(for: user("n1"), at: path("root.b")).tree?.count == 2)
            #expect(try await fixture.scalar("SELECT count(*)::int FROM \(AppliedKeys.table)", as: Int.self) == 10)
        }
    }

    @Test("a stale consumer is fenced before any write, and its transaction changes nothing")
    func fencing() async throws {
        try await IngestFixture.with { fixture in
            let p0 = TopicPartition(topic: topic, partition: 0)
            let p1 = TopicPartition(topic: topic, partition: 1)
            let records = [
                record(#"{"id":"f1","op":"incr","user":"f","path":"root.a"}"#, offset: 10, partition: 0),
                record(#"{"id":"f2","op":"incr","user":"f","path":"root.b"}"#, offset: 4, partition: 1),
                record(bytes: Array("nope".utf8), offset: 11, partition: 0),
            ]
            let batch = PreparedBatch(records: records, rules: testRules)
            #expect(try await fixture.storedOffsets([p0, p1]).isEmpty)
            _ = try await fixture.commit(batch, expected: [:])
            #expect(try await fixture.storedOffsets([p0, p1]) == batch.nextOffsets)
            #expect(batch.nextOffsets == [p0: 12, p1: 5])

            let snapshot = """
                SELECT (SELECT count(*) FROM \(AppliedKeys.table)) || '/' || (SELECT count(*) FROM badge_state) || '/'
                    || (SELECT count(*) FROM rejected_record) || '/' || (SELECT count(DISTINCT user_id) FROM dirty_mark) || '/'
                    || (SELECT string_agg(partition || ':' || next_offset, ',' ORDER BY partition) FROM consumer_offset)
                """
            let before = try await fixture.scalar(snapshot, as: String.self)

            // Re-committing with the old expectation (no rows yet) and with a wrong offset.
            let stale: [[TopicPartition: Int64]] = [[:], [p0: 12, p1: 4], [p0: 9, p1: 5]]
            for expected in stale {
                let (error, inside) = try await fixture.pool.withTransaction { connection in
                    var caught: IngestError?
                    do {
                        _ = try IngestStore.commit(batch, group: "g", expectedOffsets: expected, on: connection)
                    } catch {
                        caught = error as? IngestError
                    }
                    // Nothing but the compare ran: the same counts inside the transaction.
                    let inside = try connection.query(PGStatement("test.snapshot", snapshot, prepared: false))
                        .singleRow().decode(0, as: String.self)
                    return (caught, inside)
                }
                #expect(inside == before)
                let code = try #require(error).code
                switch code {
                case .fenced(let partition, let expectedOffset, let found):
                    #expect(expectedOffset == expected[partition])
                    #expect(found == [p0: 12, p1: 5][partition])
                    #expect(expectedOffset != found)
                }
            }
            // The rolled-back form the service uses: the error escapes, nothing changed.
            await #expect(throws: IngestError.self) {
                _ = try await fixture.commit(batch, expected: [p0: 11, p1: 5])
            }
            #expect(try await fixture.scalar(snapshot, as: String.self) == before)

            // Another group keeps its own offsets.
            _ = try await fixture.commit(batch, group: "other", expected: [:])
            #expect(try await fixture.storedOffsets(group: "other", [p0, p1]) == [p0: 12, p1: 5])
            // A row expected but missing is fenced with found nil.
            do {
                _ = try await fixture.commit(batch, group: "third", expected: [p0: 3])
                Issue.record("expected a fence")
            } catch {
                #expect((error as? IngestError)?.code == .fenced(p0, expected: 3, found: nil))
            }
        }
    }

    @Test("a poison record at every position of a 10-record batch: the others apply once, it is stored exactly")
    func poisonAtEveryPosition() async throws {
        try await IngestFixture.with { fixture in
            var invalidUTF8 = Array(#"{"id":"bad-utf8","op":"set","user":"x","path":"root.a","note":""#.utf8)
            invalidUTF8 += [0xC3, 0x28, 0x00, 0xFF, 0x80]
            invalidUTF8 += Array(#""}"#.utf8)
            var large = [UInt8]()
            for index in 0..<(EventDecoder.maximumRecordSize + 1_000) { large.append(UInt8(truncatingIfNeeded: index &* 7)) }
            let kinds: [([UInt8]?, RejectionReason)] = [
                (invalidUTF8, .invalidEncoding),
                (large, .tooLarge),
                (nil, .malformedJSON),
                (Array(#"{"id":"p-type","type":"nope","user":"u1"}"#.utf8), .unknownType),
                (Array(#"{"id":"p-path","op":"set","user":"u1","path":"root.a.*"}"#.utf8), .invalidPath),
            ]
            for position in 0..<10 {
                let partition = Int32(position)
                let (poison, reason) = kinds[position % kinds.count]
                var records: [IngestRecord] = []
                for index in 0..<10 {
                    if index == position {
                        let key: [UInt8]? = position.isMultiple(of: 2) ? [0x00, 0xFF, 0x2A] : nil
                        records.append(record(bytes: poison, offset: Int64(index), partition: partition, key: key))
                    } else {
                        records.append(
                            record(
                                #"{"id":"pos\#(position)-\#(index)","op":"incr","user":"p\#(position)_\#(index)","path":"root.a.b"}"#,
                                offset: Int64(index), partition: partition, key: "p\(position)_\(index)"))
                    }
                }
                let batch = PreparedBatch(records: records, rules: testRules)
                let outcome = try await fixture.commit(batch, expected: [:])
                #expect(outcome.applied == 9)
                #expect(outcome.rejected == [reason: 1])
                #expect(outcome.users == 9)

                // Another group reading the same records: every event a duplicate, the dead letter kept once.
                let again = try await fixture.commit(batch, group: "replay", expected: [:])
                #expect(again.applied == 0)
                #expect(again.duplicates == 9)

                let stored = try await fixture.pool.withConnection { connection in
                    try DeadLetterStore.unpublished(limit: 100, on: connection)
                }.filter { $0.record.partition == partition }
                #expect(stored.count == 1)
                let rejection = try #require(stored.first)
                #expect(rejection.record == StoredRecord(records[position]))
                #expect(rejection.record.payload == poison)
                #expect(rejection.reason == reason.rawValue)
                #expect(rejection.record.topic == topic)
                #expect(rejection.record.offset == Int64(position))
                #expect(rejection.eventID == batch.rejected.first?.eventID)
                #expect(rejection.message == batch.rejected.first?.rejection.message)
            }
            try await fixture.drainDirtyUsers()
            for position in 0..<10 {
                for index in 0..<10 where index != position {
                    let tree = try await fixture.store.tree(for: user("p\(position)_\(index)"))
                    #expect(tree.tree?.count == 1, "position \(position) record \(index)")
                }
            }
            let nodes = "SELECT count(*)::int FROM (SELECT user_id, path FROM badge_state UNION SELECT user_id, path FROM badge_increment) AS n"
            #expect(try await fixture.scalar(nodes, as: Int.self) == 90)
            #expect(try await fixture.scalar("SELECT count(*)::int FROM rejected_record", as: Int.self) == 10)
            #expect(
                try await fixture.scalar(
                    "SELECT octet_length(payload) FROM rejected_record WHERE reason = 'too_large' LIMIT 1", as: Int.self)
                    == large.count)
        }
    }

    @Test("a broadcast is stored once, with no per-user rows; clears withdraw it")
    func broadcasts() async throws {
        try await IngestFixture.with { fixture in
            let partition = TopicPartition(topic: topic, partition: 0)
            let launch = PreparedBatch(
                records: [
                    record(
                        #"{"id":"b1","type":"feature.launched","audience":"all","attrs":{"feature":"dark_mode"}}"#,
                        offset: 0, key: "*"),
                    record(#"{"id":"b2","op":"incr","audience":"all","path":"root.news","by":4}"#, offset: 1, key: "*"),
                    record(
                        #"{"id":"b3","op":"set","audience":"all","path":"root.settings.beta.x","count":2,"expires_at":"2100-01-01T00:00:00Z"}"#,
                        offset: 2, key: "*"),
                ], rules: testRules)
            let outcome = try await fixture.commit(launch, expected: [:])
            #expect(outcome == BatchOutcome(applied: 3, broadcasts: 3))
            let rows = try await fixture.rows(
                "SELECT event_id, path::text, count::text, icon, (expires_at IS NOT NULL)::text FROM broadcast WHERE withdrawn_at IS NULL ORDER BY id")
            #expect(
                rows == [
                    ["b1", "root.settings.dark_mode", "0", "new", "false"],
                    ["b2", "root.news", "4", nil, "false"],
                    ["b3", "root.settings.beta.x", "2", nil, "true"],
                ])
            for table in ["badge_state", "dirty_mark", "badge_aggregate"] {
                #expect(try await fixture.scalar("SELECT count(*)::int FROM \(table)", as: Int.self) == 0, "\(table)")
            }

            // A plain clear withdraws only its path; a forced clear its subtree. In one batch, a
            // broadcast set then cleared is stored withdrawn, and one set after a clear stays.
            let clears = PreparedBatch(
                records: [
                    record(#"{"id":"c1","op":"clear","audience":"all","path":"root.settings"}"#, offset: 3, key: "*"),
                    record(#"{"id":"c2","op":"clear","audience":"all","path":"root.news"}"#, offset: 4, key: "*"),
                    record(#"{"id":"b4","op":"set","audience":"all","path":"root.promo.p1"}"#, offset: 5, key: "*"),
                    record(#"{"id":"c3","op":"clear","audience":"all","path":"root.promo","force":true}"#, offset: 6, key: "*"),
                    record(#"{"id":"b5","op":"set","audience":"all","path":"root.promo.p2"}"#, offset: 7, key: "*"),
                ], rules: testRules)
            _ = try await fixture.commit(clears, expected: [partition: 3])
            let active = try await fixture.rows("SELECT event_id FROM broadcast WHERE withdrawn_at IS NULL ORDER BY id")
            #expect(active == [["b1"], ["b3"], ["b5"]])
            #expect(try await fixture.scalar("SELECT count(*)::int FROM broadcast", as: Int.self) == 5)

            let force = PreparedBatch(
                records: [record(#"{"id":"c4","op":"clear","audience":"all","path":"root.settings","force":true}"#, offset: 8)],
                rules: testRules)
            _ = try await fixture.commit(force, expected: [partition: 8])
            let left = try await fixture.rows("SELECT event_id FROM broadcast WHERE withdrawn_at IS NULL ORDER BY id")
            #expect(left == [["b5"]])
            #expect(try await fixture.scalar("SELECT count(*)::int FROM badge_state", as: Int.self) == 0)
        }
    }

    @Test("dead letters: oldest first, marked published once; old event ids pruned in chunks")
    func deadLettersAndPruning() async throws {
        try await IngestFixture.with { fixture in
            let poisons = poisonRecords(offset: 100)
            let batch = PreparedBatch(records: poisons.map(\.record), rules: testRules)
            _ = try await fixture.commit(batch, expected: [:])
            let all = try await fixture.pool.withConnection { connection in
                try DeadLetterStore.unpublished(limit: 100, on: connection)
            }
            #expect(all.map(\.record) == poisons.map { StoredRecord($0.record) })
            #expect(all.map(\.reason) == poisons.map(\.reason.rawValue))
            #expect(all.map(\.id) == all.map(\.id).sorted())
            #expect(all.allSatisfy { abs($0.rejectedAt.timeIntervalSinceNow) < 600 })

            let firstFive = try await fixture.pool.withConnection { connection in
                try DeadLetterStore.unpublished(limit: 5, on: connection)
            }
            #expect(firstFive == Array(all.prefix(5)))
            try await fixture.pool.withConnection { connection in
                try DeadLetterStore.markPublished(ids: firstFive.map(\.id), on: connection)
                try DeadLetterStore.markPublished(ids: [], on: connection)
            }
            let rest = try await fixture.pool.withConnection { connection in
                try DeadLetterStore.unpublished(limit: 100, on: connection)
            }
            #expect(rest == Array(all.dropFirst(5)))
            let published = try await fixture.scalar(
                "SELECT count(*)::int FROM rejected_record WHERE published_at IS NOT NULL", as: Int.self)
            #expect(published == 5)

            // Pruning, of the ids builds before migration 30 recorded: 7 old ids and 3 recent ones.
            // (This build's go a generation at a time: `AppliedKeyTests.generations`.)
            try await fixture.pool.withConnection { connection in
                try connection.execute(script: "ALTER TABLE applied_user_event DISABLE TRIGGER applied_user_event_closed", name: "test.open")
            }
            _ = try await fixture.rows(
                "INSERT INTO applied_user_event (user_id, event_id) SELECT 'pr', 'old' || i FROM generate_series(0, 9) i RETURNING 1")
            _ = try await fixture.rows(
                "UPDATE applied_user_event SET applied_at = now() - interval '8 days' WHERE event_id = ANY($1::text[]) RETURNING 1",
                [(0..<7).map { "old\($0)" }])
            let pruned = try await fixture.pool.withConnection { connection in
                try IngestTransaction.pruneAppliedEvents(olderThan: Date().addingTimeInterval(-7 * 86_400), limit: 3, on: connection)
            }
            #expect(pruned == 7)
            let left = try await fixture.rows("SELECT event_id FROM applied_user_event ORDER BY event_id")
            #expect(left == [["old7"], ["old8"], ["old9"]])
        }
    }
}
