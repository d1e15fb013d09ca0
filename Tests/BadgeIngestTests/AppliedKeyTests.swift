import BadgeCore
import BadgeIngest
import BadgeStore
import Foundation
import LibPQ
import TestSupport
import Testing

/// Issue 27: ingest deduplicates an event per user (`applied_user_event`, keyed by the user
/// first) and a broadcast by its id (`applied_event`), and skips the ids a build before
/// migration 20 recorded while any is kept.
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
            let keys = try await fixture.rows("SELECT user_id, event_id FROM applied_user_event ORDER BY 1")
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
            #expect(try await fixture.rows("SELECT user_id, event_id FROM applied_user_event") == [["ka", "b1"]])
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
            #expect(try await fixture.rows("SELECT user_id, event_id FROM applied_user_event") == [["ka", "new1"]])
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
            #expect(try await fixture.rows("SELECT user_id, event_id FROM applied_user_event ORDER BY 2") == [["ka", "new1"], ["kb", "new2"]])
            #expect(try await count("kb", fixture) == 1)
        }
    }
}
