import BadgeCore
@testable import BadgeStore
import Foundation
import LibPQ
import Testing
import TestSupport

/// The change feed follows a cursor (migrations 0016–0019): the highest `seq` it published and the
/// snapshot it read them in. Records that commit out of `seq` order, refused sends and a lost
/// lease must never cost a record, and no round may read the whole log.
@Suite("The change feed's cursor")
struct FeedCursorTests {
    private static let holder = "feed-cursor-test"

    @Test("a version whose round commits after a later version was published is published next, once")
    func lateCommitIsPublished() async throws {
        let fixture = try await StoreFixture.make()
        try await tearingDown({ await fixture.tearDown() }) {
            let early = user("cursor_early"), later = user("cursor_later")
            let chat = try BadgePath(validating: "root.chat.c1")
            try await fixture.ingest([BadgeMutation(user: early, path: chat, operation: .increment(by: 2))])

            // A rollup round logs `early`'s version and stays open.
            let round = try PGConnection.connect(fixture.pool.configuration, logger: TestServer.logger)
            defer { round.close() }
            try round.execute(script: "BEGIN", name: "test.begin")
            let claimed = try BadgeStore.claimDirtyUsers(limit: 100, on: round).map(\.user)
            #expect(claimed == [early])
            #expect(try BadgeStore.rollUp(claimed, on: round).versions[early] == 1)

            // Another round logs `later`'s version (a higher seq) and commits; the feed publishes it.
            try await fixture.ingest([BadgeMutation(user: later, path: chat, operation: .increment(by: 1))])
            try await fixture.drainDirtyUsers()
            try await takeLease(fixture)
            #expect(try await publish(fixture) == [later.rawValue])
            #expect(try await publish(fixture) == [], "the open round's version is not visible yet")

            try round.execute(script: "COMMIT", name: "test.commit")
            #expect(try await publish(fixture) == [early.rawValue], "the version below the cursor that committed since")
            #expect(try await publish(fixture) == [], "published once")
            #expect(try await fixture.pool.withConnection { try BadgeStore.unpublishedChanges(on: $0) } == 0)
        }
    }

    @Test("a record whose seq was drawn before a round was read, and whose transaction id came after it, is published")
    func seqBeforeTransactionID() async throws {
        let fixture = try await StoreFixture.make()
        try await tearingDown({ await fixture.tearDown() }) {
            // A writer draws its seq first (a sequence takes no transaction id, mostly) …
            let writer = try PGConnection.connect(fixture.pool.configuration, logger: TestServer.logger)
            defer { writer.close() }
            try writer.execute(script: "BEGIN", name: "test.begin")
            let drawn = try writer.query(
                PGStatement("test.draw", "SELECT nextval(pg_get_serial_sequence('badge_change', 'seq'))", prepared: false)
            ).rows[0].decode(0, as: Int64.self)

            // … a later version is logged and published meanwhile …
            let later = user("cursor_next")
            try await fixture.ingest([BadgeMutation(user: later, path: try BadgePath(validating: "root.a"), operation: .increment(by: 1))])
            try await fixture.drainDirtyUsers()
            try await takeLease(fixture)
            #expect(try await publish(fixture) == [later.rawValue])

            // … and only then does the writer log its record, under the seq it drew, and commit.
            try writer.query(
                PGStatement(
                    "test.log",
                    """
                    INSERT INTO badge_change (user_id, version, broadcast_version, nodes, root_count, root_unseen, seq)
                    VALUES ('cursor_drawn', 1, 0, '[]', 0, 0, $1)
                    """, prepared: false), [drawn])
            try writer.execute(script: "COMMIT", name: "test.commit")
            #expect(try await publish(fixture) == ["cursor_drawn"])
            #expect(try await publish(fixture) == [])
        }
    }

    @Test("a record Kafka refused, and every record after it, are read again; the ones before it are not")
    func refusedRecordIsReadAgain() async throws {
        let fixture = try await StoreFixture.make()
        try await tearingDown({ await fixture.tearDown() }) {
            let users = (1...4).map { user("cursor_r\($0)") }
            for id in users {
                try await fixture.ingest([BadgeMutation(user: id, path: try BadgePath(validating: "root.a"), operation: .increment(by: 1))])
                try await fixture.drainDirtyUsers()
            }
            try await takeLease(fixture)
            let first = try await fixture.pool.withConnection { try BadgeStore.pendingFeedRecords(limit: 100, countCap: 99, on: $0) }
            #expect(first.records.map(\.key) == users.map(\.rawValue))
            let held = try await fixture.pool.withConnection { try BadgeStore.finishFeedRound(first, failed: [2], holder: Self.holder, on: $0) }
            #expect(held)
            #expect(try await publish(fixture) == users[2...].map(\.rawValue))
            #expect(try await publish(fixture) == [])
        }
    }

    @Test("a process that no longer holds the lease leaves the cursor where it was")
    func lostLeaseKeepsCursor() async throws {
        let fixture = try await StoreFixture.make()
        try await tearingDown({ await fixture.tearDown() }) {
            let id = user("cursor_lease")
            try await fixture.ingest([BadgeMutation(user: id, path: try BadgePath(validating: "root.a"), operation: .increment(by: 1))])
            try await fixture.drainDirtyUsers()
            try await takeLease(fixture)
            let round = try await fixture.pool.withConnection { try BadgeStore.pendingFeedRecords(limit: 100, countCap: 99, on: $0) }
            let moved = try await fixture.pool.withConnection { try BadgeStore.finishFeedRound(round, failed: [], holder: "someone-else", on: $0) }
            #expect(!moved)
            #expect(try await publish(fixture) == [id.rawValue], "the next holder sends it")
        }
    }

    @Test("over a large log with statistics, a round reads the records after the cursor by index, never the whole log")
    func roundReadsByIndex() async throws {
        // The shipped schema's index names and plan.
        let fixture = try await StoreFixture.make(layout: .plain)
        try await tearingDown({ await fixture.tearDown() }) {
            // 50,000 published versions, each its own transaction's as far as the feed can tell.
            try await fixture.execute(
                """
                INSERT INTO badge_change (user_id, version, broadcast_version, nodes, root_count, root_unseen)
                SELECT 'cursor_u' || u, 1, 0, '[]', 1, 1 FROM generate_series(1, 50000) u
                """)
            try await fixture.execute(
                "UPDATE change_feed_lease SET published_seq = (SELECT max(seq) - 10 FROM badge_change), published_snapshot = pg_current_snapshot()")
            try await fixture.execute("ANALYZE badge_change")
            let head = try await fixture.rows(BadgeSQL.feedHead.sql)[0]
            let seq = try #require(head[0].flatMap { Int64($0) }), snapshot = try #require(head[1])
            let first = try #require(head[3].flatMap { Int64($0) })
            #expect(first == seq + 1)
            let plan = try await fixture.rows("EXPLAIN " + BadgeSQL.pendingUserChanges.sql, [first, first + 4_999, seq, snapshot])
                .compactMap { $0.first ?? nil }
            let text = plan.joined(separator: "\n")
            #expect(!text.contains("Seq Scan on badge_change"), "a round scans the log:\n\(text)")
            #expect(text.contains("badge_change_seq") && text.contains("badge_change_xid"), "\(text)")
            let round = try await fixture.pool.withConnection { try BadgeStore.pendingFeedRecords(limit: 5_000, countCap: 99, on: $0) }
            #expect(round.records.count == 10)
            #expect(try await fixture.pool.withConnection { try BadgeStore.unpublishedChanges(on: $0) } == 10)
        }
    }

    private func takeLease(_ fixture: StoreFixture) async throws {
        let held = try await fixture.pool.withConnection { try BadgeStore.takeFeedLease(holder: Self.holder, seconds: 60, on: $0) }
        try #require(held)
    }

    /// One feed round as the feed runs it, every record acknowledged: the keys read, in order.
    private func publish(_ fixture: StoreFixture) async throws -> [String] {
        try await fixture.pool.withConnection { connection in
            let round = try BadgeStore.pendingFeedRecords(limit: 100, countCap: 99, on: connection)
            #expect(try BadgeStore.finishFeedRound(round, failed: [], holder: Self.holder, on: connection))
            return round.records.map(\.key)
        }
    }
}
