import BadgeCore
import BadgeIngest
import BadgeStore
import Foundation
import LibPQ
import TestSupport
import Testing

/// Issue 27: ingest deduplicates an event per user (`applied_user_event_generation`, keyed by
/// the user first) and a broadcast by its id (`applied_event`), and skips the ids a build before
/// migration 20 (or 30) recorded while any is kept. Issue 25: users' ids are kept in two dedupe
/// generations, emptied whole.
@Suite("Event ids deduplicated per user")
struct AppliedKeyTests {
    /// The count at `root.x` of `user`, once every dirty user is recomputed.
    func count(_ user: String, _ fixture: IngestFixture) async throws -> Int64? {
        try await fixture.drainDirtyUsers()
        return try await fixture.store.tree(for: TestSupport.user(user), at: path("root.x")).tree?.count
    }

    @Test("a multi-user event applies once to each user: sent again with other users, only the new ones get it", arguments: [true, false])
    func perUser(newRowsFirst: Bool) async throws {
        try await IngestFixture.with { fixture in
            let committer = SequentialBatches(fixture, newRowsFirst: newRowsFirst)
            let first = try await committer.commit([#"{"id":"m1","op":"incr","users":["ka","kb"],"path":"root.x"}"#])
            #expect(first.applied == 1 && first.duplicates == 0)
            // The same id for kb (applied) and kc (not yet), then for ka alone, in one batch.
            let second = try await committer.commit([
                #"{"id":"m1","op":"incr","users":["kb","kc"],"path":"root.x"}"#,
                #"{"id":"m1","op":"incr","user":"ka","path":"root.x"}"#,
            ])
            #expect(second.applied == 1)
            #expect(second.duplicates == 1)
            #expect(try await count("ka", fixture) == 1)
            #expect(try await count("kb", fixture) == 1)
            #expect(try await count("kc", fixture) == 1)
            let keys = try await fixture.rows("SELECT user_id, event_id FROM applied_user_event_generation ORDER BY 1")
            #expect(keys == [["ka", "m1"], ["kb", "m1"], ["kc", "m1"]])
            #expect(try await fixture.scalar("SELECT count(*)::int FROM applied_event", as: Int.self) == 0)
        }
    }

    @Test("a broadcast's id is kept once, apart from users' ids", arguments: [true, false])
    func broadcasts(newRowsFirst: Bool) async throws {
        try await IngestFixture.with { fixture in
            let committer = SequentialBatches(fixture, newRowsFirst: newRowsFirst)
            let broadcast = #"{"id":"b1","op":"set","audience":"all","path":"root.x","count":2}"#
            let first = try await committer.commit([broadcast, #"{"id":"b1","op":"incr","user":"ka","path":"root.x"}"#])
            #expect(first.applied == 2 && first.broadcasts == 1)
            let again = try await committer.commit([broadcast])
            #expect(again.applied == 0 && again.duplicates == 1)
            #expect(try await fixture.rows("SELECT event_id, audience FROM applied_event") == [["b1", "all"]])
            #expect(try await fixture.rows("SELECT user_id, event_id FROM applied_user_event_generation") == [["ka", "b1"]])
        }
    }

    @Test("ids an older build recorded are skipped, and this build records its ids where that build looks until none is kept", arguments: [true, false])
    func bridge(newRowsFirst: Bool) async throws {
        try await IngestFixture.with { fixture in
            let committer = SequentialBatches(fixture, newRowsFirst: newRowsFirst)
            // What a build before migration 20 leaves: the id alone, no audience.
            _ = try await fixture.rows("INSERT INTO applied_event (event_id) VALUES ('old1') RETURNING 1")
            let replayed = try await committer.commit([
                #"{"id":"old1","op":"incr","users":["ka","kb"],"path":"root.x"}"#,
                #"{"id":"new1","op":"incr","user":"ka","path":"root.x"}"#,
            ])
            #expect(replayed.applied == 1)
            #expect(replayed.duplicates == 1)
            #expect(try await count("ka", fixture) == 1)
            #expect(try await count("kb", fixture) == nil)
            // While the old id is kept, the new one is also where the old build looks.
            #expect(try await fixture.rows("SELECT event_id, audience FROM applied_event ORDER BY 1") == [["new1", "users"], ["old1", nil]])
            #expect(try await fixture.rows("SELECT user_id, event_id FROM applied_user_event_generation") == [["ka", "new1"]])
            let repeated = try await committer.commit([#"{"id":"new1","op":"incr","user":"ka","path":"root.x"}"#])
            #expect(repeated.duplicates == 1)

            // Once the retention has pruned the older build's ids, this build's ids stay in its own table.
            _ = try await fixture.rows("UPDATE applied_event SET applied_at = now() - interval '8 days' WHERE event_id = 'old1' RETURNING 1")
            _ = try await fixture.pool.withConnection { connection in
                try IngestTransaction.pruneAppliedEvents(olderThan: Date().addingTimeInterval(-7 * 86_400), limit: 100, on: connection)
            }
            let later = try await committer.commit([#"{"id":"new2","op":"incr","user":"kb","path":"root.x"}"#])
            #expect(later.applied == 1)
            #expect(try await fixture.rows("SELECT event_id FROM applied_event ORDER BY 1") == [["new1"]])
            #expect(try await fixture.rows("SELECT user_id, event_id FROM applied_user_event_generation ORDER BY 2") == [["ka", "new1"], ["kb", "new2"]])
            #expect(try await count("kb", fixture) == 1)
        }
    }

    @Test("an id stays a duplicate for the generation after its own, and counts again once its generation is emptied", arguments: [true, false])
    func generations(newRowsFirst: Bool) async throws {
        try await IngestFixture.with { fixture in
            let committer = SequentialBatches(fixture, newRowsFirst: newRowsFirst)
            func rotate() async throws -> Bool {
                try await fixture.pool.withConnection { connection in
                    try IngestTransaction.rotateDedupeGeneration(startedBefore: Date().addingTimeInterval(60), on: connection)
                }
            }
            func slots() async throws -> [[String?]] {
                try await fixture.rows("SELECT event_id, slot::text FROM applied_user_event_generation ORDER BY 1")
            }
            #expect(try await committer.commit([#"{"id":"g1","op":"incr","user":"ka","path":"root.x"}"#]).applied == 1)
            #expect(try await slots() == [["g1", "0"]])
            // Not due: the current generation started after the cutoff.
            let notDue = try await fixture.pool.withConnection { connection in
                try IngestTransaction.rotateDedupeGeneration(startedBefore: Date().addingTimeInterval(-60), on: connection)
            }
            #expect(!notDue)

            #expect(try await rotate())
            // g1 is in the generation before the current one: still a duplicate, alone or beside a new id.
            let again = try await committer.commit([
                #"{"id":"g1","op":"incr","user":"ka","path":"root.x"}"#, #"{"id":"g2","op":"incr","user":"ka","path":"root.x"}"#,
            ])
            #expect(again.applied == 1 && again.duplicates == 1)
            #expect(try await committer.commit([#"{"id":"g1","op":"incr","user":"ka","path":"root.x"}"#]).duplicates == 1)
            #expect(try await slots() == [["g1", "0"], ["g2", "1"]])
            #expect(try await count("ka", fixture) == 2)

            // The next generation empties g1's; g2's is kept, and g1 counts again.
            #expect(try await rotate())
            #expect(try await slots() == [["g2", "1"]])
            #expect(try await committer.commit([#"{"id":"g2","op":"incr","user":"ka","path":"root.x"}"#]).duplicates == 1)
            #expect(try await committer.commit([#"{"id":"g1","op":"incr","user":"ka","path":"root.x"}"#]).applied == 1)
            #expect(try await slots() == [["g1", "0"], ["g2", "1"]])
            #expect(try await count("ka", fixture) == 3)
            #expect(try await fixture.rows("SELECT generation::text FROM dedupe_generation") == [["2"]])
            // The age ingest reports (`reddot_ingest_dedupe_generation_age_seconds`).
            func age() async throws -> Double {
                try await fixture.pool.withConnection { try IngestTransaction.dedupeGenerationAge(on: $0) }
            }
            #expect(try await age() < 60)
            _ = try await fixture.rows("UPDATE dedupe_generation SET started_at = now() - interval '8 days' RETURNING 1")
            #expect(abs(try await age() - 8 * 86_400) < 60)
        }
    }

    @Test("ids a build before migration 30 recorded per user are skipped, and pruned row by row", arguments: [true, false])
    func earlierTable(newRowsFirst: Bool) async throws {
        try await IngestFixture.with { fixture in
            let committer = SequentialBatches(fixture, newRowsFirst: newRowsFirst)
            // An ingest of a build before migration 30, still running: its insert is refused with
            // a sentence, so its batch rolls back with its offsets.
            do {
                _ = try await fixture.rows("INSERT INTO applied_user_event (user_id, event_id) VALUES ('ka', 'late1') ON CONFLICT (user_id, event_id) DO NOTHING")
                Issue.record("an older build's insert into applied_user_event was taken")
            } catch let error as PGError {
                #expect(error.sqlState == "55000", "\(error)")
                #expect(error.message.contains("upgrade it"), "\(error.message)")
            }
            #expect(try await fixture.scalar("SELECT count(*)::int FROM applied_user_event", as: Int.self) == 0)
            // As a build before migration 30 left them (its trigger stops such a build's inserts now).
            try await fixture.pool.withConnection { connection in
                try connection.execute(script: "ALTER TABLE applied_user_event DISABLE TRIGGER applied_user_event_closed", name: "test.open")
            }
            _ = try await fixture.rows(
                "INSERT INTO applied_user_event (user_id, event_id, applied_at) VALUES ('ka', 'old1', now() - interval '8 days'), ('ka', 'old2', now()) RETURNING 1")
            let replayed = try await committer.commit([
                #"{"id":"old1","op":"incr","users":["ka","kb"],"path":"root.x"}"#, #"{"id":"old2","op":"incr","user":"ka","path":"root.x"}"#,
            ])
            #expect(replayed.applied == 1 && replayed.duplicates == 1)
            #expect(try await count("ka", fixture) == nil)
            #expect(try await count("kb", fixture) == 1)
            let pruned = try await fixture.pool.withConnection { connection in
                try IngestTransaction.pruneAppliedEvents(olderThan: Date().addingTimeInterval(-7 * 86_400), limit: 100, on: connection)
            }
            #expect(pruned == 1)
            #expect(try await fixture.rows("SELECT event_id FROM applied_user_event") == [["old2"]])
            let keys = try await fixture.pool.withConnection { connection in
                try IngestTransaction.appliedAmong(
                    [AppliedKey(user: "ka", eventID: "old2"), AppliedKey(user: "kb", eventID: "old1"), AppliedKey(user: "ka", eventID: "old1")], on: connection)
            }
            #expect(keys == [AppliedKey(user: "ka", eventID: "old2"), AppliedKey(user: "kb", eventID: "old1")])
        }
    }

    @Test("a new generation waits for the batch that holds the current one, and a batch that comes meanwhile waits for it, then finds that batch's ids")
    func rotationFencesWriters() async throws {
        try await MigratedDatabase.with(prefix: "generation", connections: 4) { migrated in
            let pool = migrated.pool
            let event = MappedOperation(
                eventID: try EventID(validating: "f1"), audience: .users([user("fa")]), path: path("root.x"), operation: .increment(by: 1),
                expiresAt: nil, occurredAt: Date())

            // A batch writes f1 and stays open.
            let first = try PGConnection.connect(pool.configuration, logger: TestServer.logger)
            defer { first.close() }
            try first.execute(script: "BEGIN", name: "test.begin")
            var outcome = BatchOutcome()
            try IngestTransaction.applyEvents([event], into: &outcome, on: first)
            #expect(outcome.applied == 1)

            let rotation = Task {
                try await pool.withConnection { connection in
                    try IngestTransaction.rotateDedupeGeneration(startedBefore: Date().addingTimeInterval(60), lockTimeout: .seconds(60), on: connection)
                }
            }
            func waiting(_ pattern: String) async throws -> Bool {
                for _ in 0..<100 {
                    let rows = try await pool.withConnection { connection in
                        try connection.query(
                            PGStatement(
                                "test.waiting", "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1", prepared: false),
                            [pattern]
                        ).rows.first?.decode(0, as: Int64.self)
                    }
                    if rows == 1 { return true }
                    try await Task.sleep(for: .milliseconds(50))
                }
                return false
            }
            #expect(try await waiting("LOCK TABLE dedupe_generation%"), "the rotation did not wait for the open batch")

            // A second batch with the same id queues behind the rotation.
            let second = Task {
                try await pool.withTransaction { connection in
                    var outcome = BatchOutcome()
                    try IngestTransaction.applyEvents([event], into: &outcome, on: connection)
                    return outcome
                }
            }
            #expect(try await waiting("%dedupe_generation FOR SHARE%"), "the second batch did not wait for the rotation")

            try first.execute(script: "COMMIT", name: "test.commit")
            #expect(try await rotation.value)
            let repeated = try await second.value
            #expect(repeated.applied == 0 && repeated.duplicates == 1, "\(repeated)")
            let keys = try await pool.withConnection { connection in
                try connection.query(PGStatement("test.keys", "SELECT event_id, slot FROM applied_user_event_generation", prepared: false)).rows.map {
                    "\(try $0.decode(0, as: String.self))@\(try $0.decode(1, as: Int32.self))"
                }
            }
            #expect(keys == ["f1@0"])
        }
    }
}
