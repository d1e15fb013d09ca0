import BadgeCore
@testable import BadgeRollup
import BadgeStore
import Foundation
import LibPQ
import Testing
import TestSupport

/// After a backlog drains, the queue's index holds every mark the rounds deleted until
/// autovacuum comes, and each look for dirty users steps over all of them; the rollup vacuums the
/// queue itself then (`--rollup-queue-vacuum-seconds`).
@Suite("The rollup vacuums its queue after a slow empty look")
struct RollupQueueVacuumTests {
    /// Vacuums of `dirty_mark` run by a role (autovacuum's are counted apart).
    private static func vacuums(_ fixture: RollupFixture) async throws -> Int64 {
        try await fixture.scalar("SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = 'dirty_mark'", as: Int64.self)
    }

    @Test("once 600,000 marks were deleted, an idle rollup vacuums the queue (and with --rollup-queue-vacuum-seconds 0 it does not), then still rolls up new writes")
    func vacuumsAfterTheQueueDrained() async throws {
        try await RollupFixture.with { fixture in
            // What a drained backlog leaves: marks deleted, their index entries still there.
            // Autovacuum is off for this table, so only the rollup can clean it.
            try await fixture.execute("ALTER TABLE dirty_mark SET (autovacuum_enabled = false)")
            try await fixture.execute(
                """
                INSERT INTO dirty_mark (user_id, seq, bump, recount)
                SELECT 'gone_u' || u, s, false, false FROM generate_series(1, 60000) u, generate_series(1, 10) s
                """)
            try await fixture.execute("DELETE FROM dirty_mark")
            #expect(try await Self.vacuums(fixture) == 0)

            let off = RollupService(
                pool: fixture.pool, configuration: try RollupConfiguration(arguments: ["--rollup-queue-vacuum-seconds", "0"]),
                logger: TestServer.logger)
            try await fixture.withRollup([off]) { try await Task.sleep(for: .seconds(3)) }
            #expect(try await Self.vacuums(fixture) == 0, "--rollup-queue-vacuum-seconds 0 vacuumed the queue")

            let service = RollupService(pool: fixture.pool, configuration: RollupConfiguration(), logger: TestServer.logger)
            let user = try UserID(validating: "after_u1")
            try await fixture.withRollup([service]) {
                let deadline = ContinuousClock.now + .seconds(30)
                while try await Self.vacuums(fixture) == 0 {
                    guard ContinuousClock.now < deadline else { throw RollupTestError("the rollup did not vacuum its queue within 30 s") }
                    try await Task.sleep(for: .milliseconds(100))
                }
                try await fixture.ingest([BadgeMutation(user: user, path: try BadgePath(validating: "root.chat.c1"), operation: .increment(by: 3))])
                try await fixture.waitForEmptyQueue()
            }
            #expect(try await fixture.store.tree(for: user).tree?.count == 3)
            #expect(try await Self.vacuums(fixture) == 1, "a second vacuum within --rollup-queue-vacuum-seconds")
        }
    }

    @Test("a role that does not own the queue may not vacuum it: the rollup asks first")
    func onlyOwnersVacuum() async throws {
        try await RollupFixture.with { fixture in
            let role = "reddot_vacuum_test_\(UInt32.random(in: 0...UInt32.max))"
            try await fixture.execute("CREATE ROLE \(role) NOLOGIN")
            let asked: Result<(Bool, Bool), any Error>
            do {
                asked = .success(try await fixture.pool.withConnection { connection in
                    let owner = try BadgeStore.mayVacuumQueue(on: connection)
                    try connection.execute(script: "SET ROLE \(role)", name: "test.set_role")
                    let other = try BadgeStore.mayVacuumQueue(on: connection)
                    try connection.execute(script: "RESET ROLE", name: "test.reset_role")
                    return (owner, other)
                })
            } catch {
                asked = .failure(error)
            }
            try await fixture.execute("DROP ROLE \(role)")
            let (owner, other) = try asked.get()
            #expect(owner)
            #expect(!other)
        }
    }

    @Test("--rollup-queue-vacuum-seconds takes 0…86400")
    func intervalRange() throws {
        #expect(RollupConfiguration().queueVacuumInterval == .seconds(30))
        #expect(try RollupConfiguration(arguments: ["--rollup-queue-vacuum-seconds", "0"]).queueVacuumInterval == nil)
        #expect(try RollupConfiguration(arguments: ["--rollup-queue-vacuum-seconds", "86400"]).queueVacuumInterval == .seconds(86_400))
        #expect(throws: (any Error).self) { try RollupConfiguration(arguments: ["--rollup-queue-vacuum-seconds", "-1"]) }
        #expect(throws: (any Error).self) { try RollupConfiguration(arguments: ["--rollup-queue-vacuum-seconds", "86401"]) }
        #expect(throws: (any Error).self) { try RollupConfiguration(arguments: ["--rollup-queue-vacuum-seconds", "99999999999999999999"]) }
    }
}
