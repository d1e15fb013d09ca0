import BadgeCore
@testable import BadgeRollup
import BadgeStore
import Foundation
import LibPQ
import Testing
import TestSupport

/// While ingest reports a backlog, one worker per rollup process claims users (DESIGN §5).
@Suite("The rollup coalesces while ingest is behind")
struct RollupBacklogTests {
    /// Stores a report as ingest does with its offsets: `waiting` records after the batch, written
    /// `age` seconds ago (a negative age dates it ahead). By default a report is dated ten minutes
    /// ahead, so it stays within the rule's last 10 s however slowly a busy machine runs the test
    /// (CI once took longer than that between a report and the check that reads it).
    private static func report(_ fixture: RollupFixture, partition: Int32, waiting: Int64?, age: Double = -600) async throws {
        try await fixture.execute(
            """
            INSERT INTO consumer_offset (consumer_group, topic, partition, next_offset, waiting, updated_at)
            VALUES ('g', 'reddot.events', $1, 10, $2, now() - make_interval(secs => $3))
            ON CONFLICT (consumer_group, topic, partition) DO UPDATE
            SET waiting = excluded.waiting, updated_at = excluded.updated_at
            """, [partition, waiting, age])
    }

    @Test("ingest's recent reports over the limit hold the other workers back; old reports, small ones, none, or a limit of 0 do not")
    func readsIngestReports() async throws {
        try await RollupFixture.with { fixture in
            func behind(limit: Int64 = 50_000) async -> Bool {
                var settings = RollupSettings.defaults
                settings.backlogRecords = limit
                var configuration = RollupConfiguration(settings: settings)
                configuration.backlogCheckInterval = .zero
                return await RollupService(pool: fixture.pool, configuration: configuration, logger: TestServer.logger).ingestIsBehind()
            }
            #expect(await behind() == false, "no report")
            try await Self.report(fixture, partition: 0, waiting: 30_000)
            try await Self.report(fixture, partition: 1, waiting: nil)
            #expect(await behind() == false, "30,000 waiting is under the limit")
            try await Self.report(fixture, partition: 2, waiting: 30_000)
            #expect(await behind() == true, "60,000 waiting over two partitions")
            #expect(await behind(limit: 0) == false, "a limit of 0 turns it off")
            #expect(await behind(limit: 60_000) == false, "the limit itself is not over it")
            try await Self.report(fixture, partition: 2, waiting: 30_000, age: 60)
            #expect(await behind() == false, "a report a minute old (a stopped ingest) does not count")
            try await Self.report(fixture, partition: 0, waiting: Int64.max)
            try await Self.report(fixture, partition: 2, waiting: Int64.max)
            #expect(await behind() == true, "absurd reports sum without overflow")
        }
    }

    @Test("while ingest reports a backlog, the first worker still brings every user current")
    func firstWorkerDrainsTheQueue() async throws {
        try await RollupFixture.with { fixture in
            // Dated ten minutes ahead: an ingest that is behind reports with every batch, so its
            // reports stay fresh however slowly this test runs (the rule reads the last 10 s).
            try await Self.report(fixture, partition: 0, waiting: 1_000_000, age: -600)
            let path = try BadgePath(validating: "root.chat.c1")
            let users = try (0..<300).map { try UserID(validating: "backlog_u\($0)") }
            try await fixture.ingest(users.map { BadgeMutation(user: $0, path: path, operation: .increment(by: 2)) })
            let service = RollupService(
                pool: fixture.pool, configuration: try RollupConfiguration(arguments: ["--rollup-workers", "3", "--rollup-batch-size", "50"]), logger: TestServer.logger)
            try await fixture.withRollup([service]) {
                #expect(await service.ingestIsBehind())
                try await fixture.waitForEmptyQueue()
            }
            for user in users {
                let tree = try await fixture.store.tree(for: user)
                #expect(tree.tree?.count == 2, "\(user.rawValue)")
            }
        }
    }

    @Test("while ingest reports a backlog, --rollup-backlog-settle-seconds leaves a user until their oldest write is that old; once ingest catches up, every user is claimed")
    func settleWhileBehind() async throws {
        try await RollupFixture.with { fixture in
            try await Self.report(fixture, partition: 0, waiting: 1_000_000)
            let path = try BadgePath(validating: "root.chat.c1")
            let settled = try UserID(validating: "settle_old"), fresh = try UserID(validating: "settle_new")
            try await fixture.ingest([settled, fresh].map { BadgeMutation(user: $0, path: path, operation: .increment(by: 2)) })
            // The first user's writes waited a minute already; the second's just came.
            try await fixture.execute("UPDATE dirty_mark SET dirtied_at = dirtied_at - interval '1 minute' WHERE user_id = $1", [settled.rawValue])
            var configuration = try RollupConfiguration(arguments: ["--rollup-backlog-settle-seconds", "30"])
            configuration.backlogCheckInterval = .zero
            let service = RollupService(pool: fixture.pool, configuration: configuration, logger: TestServer.logger)

            func version(_ user: UserID) async throws -> Int64 {
                try await fixture.scalar("SELECT coalesce(max(version), 0) FROM user_version WHERE user_id = $1", [user.rawValue])
            }
            #expect(try await service.step() == 1)
            #expect(try await version(settled) == 1)
            #expect(try await version(fresh) == 0, "a user whose writes are 0 s old waits while ingest is behind")
            #expect(try await service.step() == 0)

            // Ingest caught up: nothing is left to settle.
            try await Self.report(fixture, partition: 0, waiting: 0)
            #expect(try await service.step() == 1)
            #expect(try await version(fresh) == 1)
            #expect(try await fixture.store.tree(for: fresh).tree?.count == 2)
        }
    }

    @Test("--rollup-backlog-settle-seconds takes 0…3600")
    func settleRange() throws {
        #expect(throws: (any Error).self) { try RollupConfiguration(arguments: ["--rollup-backlog-settle-seconds", "-1"]) }
        #expect(throws: (any Error).self) { try RollupConfiguration(arguments: ["--rollup-backlog-settle-seconds", "3601"]) }
        #expect(throws: (any Error).self) { try RollupConfiguration(arguments: ["--rollup-backlog-settle-seconds", "nan"]) }
        #expect(try RollupConfiguration(arguments: ["--rollup-backlog-settle-seconds", "3600"]).backlogSettleSeconds == 3_600)
        #expect(RollupConfiguration().backlogSettleSeconds == RollupSettings.defaults.backlogSettleSeconds)
    }
}
