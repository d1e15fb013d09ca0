import BadgeCore
import BadgeRollup
import BadgeStore
import Foundation
import LibPQ
import Synchronization
import TestSupport
import Testing

@Suite("The rollup worker", .serialized)
struct RollupServiceTests {
    @Test("an idle worker looks with one statement, not a round, and still rolls up a user marked while it idles")
    func idleLooks() async throws {
        try await RollupFixture.with(connections: 4) { fixture in
            // The settings an operator runs.
            let service = RollupService(pool: fixture.pool, configuration: try RollupConfiguration(arguments: []), logger: TestServer.logger)
            let ann = user("idle-ann")
            let now = Date()
            let mutations = [BadgeMutation(user: ann, path: path("root.chat.c1"), operation: .increment(by: 3))]
            try await fixture.withRollup([service]) {
                // Nothing to do: after each worker's first empty round, its looks are single statements.
                let deadline = ContinuousClock.now + .seconds(10)
                while service.idleLookCount < 20, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
                #expect(service.idleLookCount >= 20, "idle looks in 10 s: \(service.idleLookCount)")
                let before = service.idleLookCount
                try await fixture.ingest(mutations)
                try await fixture.waitForEmptyQueue(timeout: .seconds(10))
                // And back to idle looks once the queue is empty again.
                let again = ContinuousClock.now + .seconds(10)
                while service.idleLookCount <= before + 5, ContinuousClock.now < again { try await Task.sleep(for: .milliseconds(20)) }
                #expect(service.idleLookCount > before + 5)
            }
            var model = BadgeTree()
            for mutation in mutations { model.apply(mutation, now: now) }
            #expect(try await fixture.store.tree(for: ann).tree == model.node(at: .root, now: now))
            #expect(service.failedTransactions == 0)
        }
    }

    @Test("concurrent workers of two processes, while writers keep writing, lose no update and never fail")
    func concurrentWorkers() async throws {
        try await RollupFixture.with(connections: 4) { fixture in
            let users = (0..<60).map { user("c\($0)") }
            let now = Date()
            let first = RollupService(
                pool: fixture.pool, configuration: try RollupConfiguration(arguments: ["--rollup-workers", "2", "--rollup-batch-size", "7", "--rollup-idle-ms", "2"]),
                logger: TestServer.logger)
            let secondPool = PGPool(
                configuration: PGConfiguration(connectionString: fixture.database.url, sessionSettings: BadgeStore.recommendedSessionSettings),
                maximumConnections: 3, logger: TestServer.logger)
            defer { secondPool.close() }
            let second = RollupService(
                pool: secondPool, configuration: try RollupConfiguration(arguments: ["--rollup-workers", "2", "--rollup-batch-size", "5", "--rollup-idle-ms", "2"]),
                logger: TestServer.logger)
            let written: [BadgeMutation] = try await fixture.withRollup([first, second]) {
                let written = try await withThrowingTaskGroup(of: [BadgeMutation].self) { group in
                    for writer in 0..<3 {
                        group.addTask {
                            // Each writer owns a third of the users, so the order of a user's
                            // mutations is the order of that writer's transactions.
                            let mine = users.enumerated().filter { $0.offset % 3 == writer }.map(\.element)
                            var generator = RandomBadgeOperations(users: mine, seed: UInt64(100 + writer))
                            generator.expiries = []
                            var sent: [BadgeMutation] = []
                            for _ in 0..<40 {
                                let mutations = (0..<15).map { _ in generator.next() }
                                try await fixture.ingest(mutations)
                                sent += mutations
                            }
                            return sent
                        }
                    }
                    var all: [BadgeMutation] = []
                    for try await sent in group { all += sent }
                    return all
                }
                try await fixture.waitForEmptyQueue()
                return written
            }
            var finalModels: [UserID: BadgeTree] = [:]
            for mutation in written {
                finalModels[mutation.user, default: BadgeTree()].apply(mutation, now: now)
            }
            #expect(first.failedTransactions == 0)
            #expect(second.failedTransactions == 0)
            for user in users {
                let tree = try await fixture.store.tree(for: user)
                #expect(tree.tree == (finalModels[user] ?? BadgeTree()).node(at: .root, now: now), "user \(user.rawValue)")
            }
            let report = try await BadgeVerifier(store: fixture.store).run(repair: false)
            #expect(report.mismatches == 0)
            #expect(report.usersChecked > 0)
        }
    }

    @Test("an expired badge disappears with its ancestors' share of it, and the version moves")
    func expiry() async throws {
        try await RollupFixture.with { fixture in
            let service = RollupService(
                pool: fixture.pool, configuration: try RollupConfiguration(arguments: ["--rollup-workers", "1", "--expiry-interval-ms", "100"]),
                logger: TestServer.logger)
            try await fixture.withRollup([service]) {
                // The tree must be read once before the badge expires: a machine too busy to do
                // that within the lead tries again with a new user and twice the lead.
                var lead = 1.0
                var checked: UserID?
                for attempt in 0..<6 where checked == nil {
                    let alice = user("alice\(attempt)")
                    let soon = Date().addingTimeInterval(lead)
                    try await fixture.ingest([
                        BadgeMutation(user: alice, path: path("root.promo.a"), operation: .set(count: 2, icon: nil), expiresAt: soon),
                        BadgeMutation(user: alice, path: path("root.promo.b"), operation: .set(count: 3, icon: nil)),
                    ])
                    try await fixture.waitForEmptyQueue()
                    let before = try await fixture.store.tree(for: alice)
                    guard Date() < soon else {
                        lead *= 2
                        continue
                    }
                    checked = alice
                    #expect(before.tree?.count == 5)
                    let deadline = ContinuousClock.now + .seconds(10) + .milliseconds(Int64(lead * 1000))
                    var after = before
                    while after.tree?.count != 3, ContinuousClock.now < deadline {
                        try await Task.sleep(for: .milliseconds(50))
                        after = try await fixture.store.tree(for: alice)
                    }
                    #expect(after.tree?.count == 3)
                    #expect(after.tree?.children.first?.children.map(\.path.rawValue) == ["root.promo.b"])
                    #expect(after.version > before.version)
                }
                let alice = try #require(checked, "the tree was never read before its badge expired, with up to 32 s of lead")
                #expect(
                    try await fixture.scalar("SELECT count(*) FROM badge_state WHERE user_id = $1", [alice.rawValue], as: Int64.self) == 1)
            }
        }
    }

    @Test("an expired broadcast leaves every tree, and the visible version moves")
    func broadcastExpiry() async throws {
        try await RollupFixture.with { fixture in
            let bob = user("bob")
            try await fixture.ingest([BadgeMutation(user: bob, path: path("root.chat.c1"), operation: .increment(by: 1))])
            try await fixture.execute(
                "INSERT INTO broadcast (event_id, path, count, icon, expires_at) VALUES ('b1', 'root.settings.dark', 0, 'new', now() + interval '1 second')")
            let service = RollupService(
                pool: fixture.pool, configuration: try RollupConfiguration(arguments: ["--rollup-workers", "1", "--expiry-interval-ms", "100"]),
                logger: TestServer.logger)
            try await fixture.withRollup([service]) {
                try await fixture.waitForEmptyQueue()
                let before = try await fixture.store.tree(for: bob)
                #expect(before.tree?.children.map(\.path.rawValue) == ["root.chat", "root.settings"])
                let deadline = ContinuousClock.now + .seconds(10)
                var after = before
                while after.tree?.children.count != 1, ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(50))
                    after = try await fixture.store.tree(for: bob)
                }
                #expect(after.tree?.children.map(\.path.rawValue) == ["root.chat"])
                #expect(after.version > before.version)
            }
        }
    }

    @Test("graceful shutdown ends the workers promptly")
    func shutdown() async throws {
        try await RollupFixture.with { fixture in
            let service = RollupService(pool: fixture.pool, configuration: try RollupConfiguration(arguments: ["--rollup-workers", "3"]), logger: TestServer.logger)
            let started = ContinuousClock.now
            try await fixture.withRollup([service]) { try await Task.sleep(for: .milliseconds(200)) }
            #expect(ContinuousClock.now - started < .seconds(10))
        }
    }
}

@Suite("reddot verify's recount")
struct VerifierTests {
    @Test("finds nothing after random operations, finds each planted mismatch, and repairs them")
    func plantedMismatches() async throws {
        try await RollupFixture.with { fixture in
            let users = (0..<40).map { user("v\($0)") }
            var generator = RandomBadgeOperations(users: users, seed: 77)
            generator.expiries = []
            for _ in 0..<30 {
                try await fixture.ingest((0..<20).map { _ in generator.next() })
            }
            while try await fixture.store.recomputeDirtyUsers(limit: 13) > 0 {}
            let verifier = BadgeVerifier(store: fixture.store, chunkSize: 7)
            let clean = try await verifier.run(repair: false)
            #expect(clean.mismatches == 0)
            #expect(clean.usersChecked >= 30)

            // Plant three kinds: a wrong count, a missing row, a row that should not exist.
            try await fixture.execute(
                "UPDATE badge_aggregate SET count = count + 1 WHERE (user_id, path) = (SELECT user_id, path FROM badge_aggregate WHERE user_id = 'v3' ORDER BY path LIMIT 1)")
            try await fixture.execute(
                "DELETE FROM badge_aggregate WHERE (user_id, path) = (SELECT user_id, path FROM badge_aggregate WHERE user_id = 'v5' ORDER BY path DESC LIMIT 1)")
            try await fixture.execute("INSERT INTO badge_aggregate (user_id, path, count) VALUES ('v7', 'root.planted', 4)")
            let found = Mutex<[AggregateMismatch]>([])
            let report = try await verifier.run(repair: true) { mismatch in found.withLock { $0.append(mismatch) } }
            #expect(report.mismatches == 3)
            #expect(report.usersWithMismatches == 3)
            #expect(report.usersRepaired == 3)
            let mismatches = found.withLock { $0 }
            #expect(mismatches.map(\.user.rawValue) == ["v3", "v5", "v7"])
            #expect(mismatches[0].storedCount == (mismatches[0].expectedCount ?? 0) + 1)
            #expect(mismatches[1].storedCount == nil && mismatches[1].expectedCount != nil)
            #expect(mismatches[2].path.rawValue == "root.planted" && mismatches[2].expectedCount == nil && mismatches[2].storedCount == 4)
            #expect(try await verifier.run(repair: false).mismatches == 0)
        }
    }

    @Test("a user with only increments (no state row) whose aggregates are lost is found and repaired")
    func incrementsOnly() async throws {
        try await RollupFixture.with { fixture in
            let only = user("inc_only")
            try await fixture.ingest([
                BadgeMutation(user: only, path: path("root.chat.c1"), operation: .increment(by: 2)),
                BadgeMutation(user: only, path: path("root.chat.c2"), operation: .increment(by: 3)),
            ])
            while try await fixture.store.recomputeDirtyUsers(limit: 10) > 0 {}
            #expect(try await fixture.scalar("SELECT count(*) FROM badge_state WHERE user_id = 'inc_only'", as: Int64.self) == 0)
            #expect(try await fixture.store.tree(for: only).tree?.count == 5)

            try await fixture.execute("DELETE FROM badge_aggregate WHERE user_id = 'inc_only'")
            let report = try await BadgeVerifier(store: fixture.store).run(repair: true)
            #expect(report.mismatches == 4)
            #expect(report.usersRepaired == 1)
            let repaired = try await fixture.store.tree(for: only).tree
            #expect(repaired?.count == 5)
            #expect(repaired?.children.first?.children.map(\.count) == [2, 3])
        }
    }

    @Test("a user with a pending rollup is not reported")
    func pendingUsersSkipped() async throws {
        try await RollupFixture.with { fixture in
            try await fixture.ingest([BadgeMutation(user: user("p1"), path: path("root.a"), operation: .increment(by: 2))])
            #expect(try await BadgeVerifier(store: fixture.store).run(repair: false).mismatches == 0)
        }
    }
}
