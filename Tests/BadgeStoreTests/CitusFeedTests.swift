import BadgeCore
@testable import BadgeStore
import Foundation
import LibPQ
import TestSupport
import Testing

/// Issue 27: the change feed on a Citus cluster (docs/SHARDING.md, "The change feed on Citus").
/// Its cursor (a `seq` and a snapshot) orders transactions on one server only, so on Citus each
/// rollup round writes the versions it logged to an outbox on the coordinator, and the feed
/// reads their order there and their records from the distributed log. Skipped where no Citus
/// cluster is named (`deploy/citus/test.sh` names one).
@Suite(
    "The change feed on tables distributed by Citus", .serialized,
    .enabled(if: !SchemaLayout.citusWorkers.isEmpty, "no Citus cluster (REDDOT_TEST_CITUS_WORKERS)"))
struct CitusFeedTests {
    private static let holder = "citus-feed-test"

    @Test("every version of users on every shard is published once in each user's order; a round held open is published after it commits; a refused record and those after it are read again, OnCitus")
    func feedOnCitus() async throws {
        let fixture = try await StoreFixture.make(layout: .citus)
        try await tearingDown({ await fixture.tearDown() }) {
            let users = (1...40).map { user("feed_u\($0)") }
            let path = try BadgePath(validating: "root.chat.c1")
            try await takeLease(fixture)
            var expected: [String: [Int64]] = [:]
            var published: [String: [Int64]] = [:]
            func record(_ records: [FeedRecord]) throws {
                for record in records where record.kind == .user {
                    published[record.key, default: []].append(try version(of: record))
                }
            }
            for round in 1...3 {
                try await fixture.ingest(users.map { BadgeMutation(user: $0, path: path, operation: .increment(by: Int64(round))) })
                try await fixture.drainDirtyUsers()
                for id in users { expected[id.rawValue, default: []].append(Int64(round)) }
                if round == 2 {
                    // Kafka refuses the sixth record: it and every one after it are read again.
                    let first = try await fixture.pool.withConnection { try BadgeStore.pendingFeedRecords(limit: 100, countCap: 99, on: $0) }
                    #expect(first.records.count == 80)
                    let held = try await fixture.pool.withConnection { try BadgeStore.finishFeedRound(first, failed: [5], holder: Self.holder, on: $0) }
                    #expect(held)
                    try record(Array(first.records.prefix(5)))
                    let again = try await fixture.pool.withConnection { try BadgeStore.pendingFeedRecords(limit: 100, countCap: 99, on: $0) }
                    #expect(again.records.map(\.number) == first.records.dropFirst(5).map(\.number))
                    #expect(try await fixture.pool.withConnection { try BadgeStore.finishFeedRound(again, failed: [], holder: Self.holder, on: $0) })
                    try record(again.records)
                }
            }

            // A round logs `late`'s version and stays open while later versions are published.
            let late = user("feed_late")
            try await fixture.ingest([BadgeMutation(user: late, path: path, operation: .increment(by: 1))])
            let open = try PGConnection.connect(fixture.pool.configuration, logger: TestServer.logger)
            defer { open.close() }
            try open.execute(script: "BEGIN", name: "test.begin")
            let claimed = try BadgeStore.claimDirtyUsers(limit: 100, on: open).map(\.user)
            #expect(claimed == [late])
            #expect(try BadgeStore.rollUp(claimed, on: open).versions[late] == 1)
            try record(try await publishAll(fixture))
            #expect(published[late.rawValue] == nil, "the open round's version is not visible yet")
            try open.execute(script: "COMMIT", name: "test.commit")
            expected[late.rawValue] = [1]
            try record(try await publishAll(fixture))

            #expect(published == expected)
            #expect(try await fixture.pool.withConnection { try BadgeStore.unpublishedChanges(on: $0) } == 0)
            // The outbox keeps no published entry.
            #expect(try await fixture.rows("SELECT count(*) FROM change_feed_outbox") == [["0"]])
        }
    }

    @Test("an outbox entry whose record its worker has not committed yet holds the feed's cursor before it until the record is there, OnCitus")
    func entryBeforeItsRecord() async throws {
        let fixture = try await StoreFixture.make(layout: .citus)
        try await tearingDown({ await fixture.tearDown() }) {
            let path = try BadgePath(validating: "root.a")
            let (before, after) = (user("feed_before"), user("feed_after"))
            try await takeLease(fixture)
            try await fixture.ingest([BadgeMutation(user: before, path: path, operation: .increment(by: 1))])
            try await fixture.drainDirtyUsers()
            // The coordinator's part of a round committed, its worker's not yet: an entry
            // without its record, then a later version with its record.
            try await fixture.execute("INSERT INTO change_feed_outbox (user_id, version) VALUES ('feed_pending', 1)")
            try await fixture.ingest([BadgeMutation(user: after, path: path, operation: .increment(by: 1))])
            try await fixture.drainDirtyUsers()
            #expect(try await publish(fixture) == [before.rawValue])
            #expect(try await publish(fixture) == [], "nothing past the entry whose record is not there")
            try await fixture.execute(
                """
                INSERT INTO badge_change (user_id, version, broadcast_version, nodes, root_count, root_unseen)
                VALUES ('feed_pending', 1, 0, '[]', 0, 0)
                """)
            #expect(try await publish(fixture) == ["feed_pending", after.rawValue])
            #expect(try await publish(fixture) == [])
        }
    }

    @Test("the streams' read of many users' logs in one call answers each read with the user's versions after it, OnCitus")
    func batchedLogReadOnCitus() async throws {
        let fixture = try await StoreFixture.make(layout: .citus)
        try await tearingDown({ await fixture.tearDown() }) {
            let users = (1...30).map { user("log_u\($0)") }
            for round in 1...3 {
                try await fixture.ingest(users.map { BadgeMutation(user: $0, path: try! BadgePath(validating: "root.n\(round)"), operation: .increment(by: 1)) })
                try await fixture.drainDirtyUsers()
            }
            // Every user after version 1, the first ten also after 2, and one user with no log.
            let reads = users.map { LogRead(user: $0, after: 1) } + users.prefix(10).map { LogRead(user: $0, after: 2) }
                + [LogRead(user: user("log_nobody"), after: 0)]
            let answers = try await fixture.pool.withConnection { try BadgeStore.ownChanges(of: reads, limit: 10, on: $0) }
            #expect(answers.count == reads.count)
            for (read, answer) in zip(reads, answers) {
                let expected: [Int64] = read.user.rawValue == "log_nobody" ? [] : Array((read.after + 1)...3)
                #expect(answer?.map(\.version) == expected, "\(read)")
                if read.after == 1, let last = answer?.last {
                    #expect(last.nodes.map(\.path.rawValue) == ["root", "root.n3"], "\(read)")
                }
            }
        }
    }

    private func takeLease(_ fixture: StoreFixture) async throws {
        let held = try await fixture.pool.withConnection { try BadgeStore.takeFeedLease(holder: Self.holder, seconds: 60, on: $0) }
        try #require(held)
    }

    /// One feed round as the feed runs it, every record acknowledged: the users' keys read, in order.
    private func publish(_ fixture: StoreFixture) async throws -> [String] {
        try await publishRound(fixture).filter { $0.kind == .user }.map(\.key)
    }

    private func publishRound(_ fixture: StoreFixture) async throws -> [FeedRecord] {
        try await fixture.pool.withConnection { connection in
            let round = try BadgeStore.pendingFeedRecords(limit: 100, countCap: 99, on: connection)
            #expect(try BadgeStore.finishFeedRound(round, failed: [], holder: Self.holder, on: connection))
            return round.records
        }
    }

    /// Feed rounds until one reads nothing: every record read.
    private func publishAll(_ fixture: StoreFixture) async throws -> [FeedRecord] {
        var records: [FeedRecord] = []
        while true {
            let round = try await publishRound(fixture)
            if round.isEmpty { return records }
            records += round
        }
    }

    /// The version a user's record carries.
    private func version(of record: FeedRecord) throws -> Int64 {
        let payload = try #require(record.payload)
        let object = try JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any]
        let version = (object?["version"] as? NSNumber)?.int64Value
        return try #require(version)
    }
}
