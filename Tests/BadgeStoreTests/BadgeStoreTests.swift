import BadgeCore
import BadgeStore
import Foundation
import LibPQ
import TestSupport
import Testing

@Suite("Badge store against a real PostgreSQL")
struct BadgeStoreTests {
    @Test("aggregation and display rules hold through PostgreSQL")
    func aggregationThroughPostgres() async throws {
        let fixture = try await StoreFixture.make()
        try await tearingDown({ await fixture.tearDown() }) {
            let alice = user("alice")
            try await fixture.store.apply(
                [
                    BadgeMutation(user: alice, path: path("root.chat.c7"), operation: .increment(by: 3)),
                    BadgeMutation(user: alice, path: path("root.chat.c8"), operation: .increment(by: 1)),
                    BadgeMutation(user: alice, path: path("root.chat"), operation: .set(count: 2, icon: nil)),
                    BadgeMutation(user: alice, path: path("root.promotion.item1"), operation: .set(count: 0, icon: try BadgeIcon(validating: "new"))),
                    BadgeMutation(user: alice, path: path("root.promotion.item2"), operation: .set(count: 150, icon: nil)),
                ], recomputeNow: true)
            let answer = try await fixture.store.tree(for: alice)
            let tree = try #require(answer.tree)
            #expect(tree.count == 156)  // own count of root.chat (2) is added, not lost
            #expect(tree.text == "99+")
            let chat = try #require(tree.children.first { $0.path == path("root.chat") })
            #expect(chat.count == 6)
            #expect(chat.text == "6")
            let item1 = try #require(tree.children.first { $0.path == path("root.promotion") }?.children.first)
            #expect(item1.text == nil)
            #expect(item1.icon?.rawValue == "new")
            #expect(answer.version == 1)

            // Clearing the children clears the parent's share; the parent keeps its own count.
            try await fixture.store.apply(
                [
                    BadgeMutation(user: alice, path: path("root.chat.c7"), operation: .clear(force: false)),
                    BadgeMutation(user: alice, path: path("root.chat.c8"), operation: .clear(force: false)),
                ], recomputeNow: true)
            #expect(try await fixture.store.tree(for: alice, at: path("root.chat")).tree?.count == 2)
            // A forced clear removes the subtree; nothing lingers.
            try await fixture.store.apply(
                [BadgeMutation(user: alice, path: path("root.promotion"), operation: .clear(force: true))], recomputeNow: true)
            let after = try await fixture.store.tree(for: alice)
            #expect(after.tree?.children.map(\.path) == [path("root.chat")])
            #expect(try await fixture.store.tree(for: alice, at: path("root.promotion")).tree == nil)
            let rows = try await fixture.scalar(
                "SELECT count(*)::int FROM badge_aggregate WHERE user_id = $1 AND path <@ 'root.promotion'", ["alice"], as: Int.self)
            #expect(rows == 0)
        }
    }

    @Test("versions move only on a visible change")
    func versionsOnlyOnChange() async throws {
        let fixture = try await StoreFixture.make()
        try await tearingDown({ await fixture.tearDown() }) {
            let bob = user("bob")
            let set = BadgeMutation(user: bob, path: path("root.a.b"), operation: .set(count: 3, icon: nil))
            #expect(try await fixture.store.apply([set], recomputeNow: true) == [bob: 1])
            // The same state again, a clear of an unset path, and a plain clear of a parent whose
            // child is set: nothing visible changes, so no version and no notification.
            #expect(try await fixture.store.apply([set], recomputeNow: true).isEmpty)
            #expect(try await fixture.store.apply([BadgeMutation(user: bob, path: path("root.x"), operation: .clear(force: false))], recomputeNow: true).isEmpty)
            #expect(try await fixture.store.apply([BadgeMutation(user: bob, path: path("root.a"), operation: .clear(force: false))], recomputeNow: true).isEmpty)
            #expect(try await fixture.store.tree(for: bob).version == 1)
            #expect(try await fixture.store.apply([BadgeMutation(user: bob, path: path("root.a.b"), operation: .increment(by: 1))], recomputeNow: true) == [bob: 2])
            // A user never written reads as version 0 with an empty root.
            let nobody = try await fixture.store.tree(for: user("nobody"))
            #expect(nobody.version == 0)
            #expect(nobody.tree == BadgeNode(path: .root, shown: false, count: 0, text: nil, icon: nil))
        }
    }

    @Test("expired badges disappear with their ancestors' share, and an increment starts them anew")
    func expiry() async throws {
        let fixture = try await StoreFixture.make()
        try await tearingDown({ await fixture.tearDown() }) {
            let carol = user("carol")
            let past = Date().addingTimeInterval(-60)
            let future = Date().addingTimeInterval(3_600)
            try await fixture.store.apply(
                [
                    BadgeMutation(user: carol, path: path("root.sale.today"), operation: .set(count: 5, icon: try BadgeIcon(validating: "hot")), expiresAt: past),
                    BadgeMutation(user: carol, path: path("root.sale.week"), operation: .set(count: 2, icon: nil), expiresAt: future),
                ], recomputeNow: true)
            let tree = try #require(try await fixture.store.tree(for: carol).tree)
            #expect(tree.count == 2)
            #expect(tree.children.first?.children.map(\.path) == [path("root.sale.week")])
            // Incrementing the expired node starts from zero and drops its icon.
            try await fixture.store.apply(
                [BadgeMutation(user: carol, path: path("root.sale.today"), operation: .increment(by: 1))], recomputeNow: true)
            let today = try #require(try await fixture.store.tree(for: carol, at: path("root.sale.today")).tree)
            #expect(today.count == 1)
            #expect(today.icon == nil)
            #expect(try await fixture.store.tree(for: carol).tree?.count == 3)
        }
    }

    @Test("counts saturate instead of overflowing")
    func saturation() async throws {
        let fixture = try await StoreFixture.make()
        try await tearingDown({ await fixture.tearDown() }) {
            let dave = user("dave")
            try await fixture.pool.withConnection { connection in
                try connection.query(
                    PGStatement(
                        "test.huge",
                        "INSERT INTO badge_state (user_id, path, count) VALUES ('dave', 'root.a', 9223372036854775000), ('dave', 'root.b', 9223372036854775000)",
                        prepared: false))
            }
            try await fixture.store.apply([BadgeMutation(user: dave, path: path("root.a"), operation: .increment(by: 1_000_000_000))], recomputeNow: true)
            let tree = try #require(try await fixture.store.tree(for: dave).tree)
            #expect(tree.count == Int64.max)
            #expect(tree.children.first { $0.path == path("root.a") }?.count == Int64.max)
            #expect(tree.text == "99+")
        }
    }

    @Test("depth and subtree reads")
    func depthAndSubtrees() async throws {
        let fixture = try await StoreFixture.make()
        try await tearingDown({ await fixture.tearDown() }) {
            let erin = user("erin")
            try await fixture.store.apply(
                [BadgeMutation(user: erin, path: path("root.a.b.c.d"), operation: .increment(by: 1))], recomputeNow: true)
            let shallow = try #require(try await fixture.store.tree(for: erin, depth: 1).tree)
            #expect(shallow.children.count == 1)
            #expect(shallow.children[0].children.isEmpty)
            let sub = try #require(try await fixture.store.tree(for: erin, at: path("root.a.b"), depth: 0).tree)
            #expect(sub.path == path("root.a.b"))
            #expect(sub.count == 1)
            #expect(sub.children.isEmpty)
            #expect(try await fixture.store.tree(for: erin, at: path("root.a.x")).tree == nil)
        }
    }

    @Test("a recompute notifies the change channel with user and version")
    func notifications() async throws {
        let fixture = try await StoreFixture.make()
        try await tearingDown({ await fixture.tearDown() }) {
            let listener = try PGListener(
                configuration: PGConfiguration(connectionString: fixture.database.url), channels: [BadgeStore.changeChannel],
                logger: TestServer.logger)
            let running = RunningListener(listener)
            defer { running.stop() }
            var events = listener.events.makeAsyncIterator()
            #expect(await events.next() == .connected)
            try await fixture.store.apply(
                [BadgeMutation(user: user("frank"), path: path("root.chat"), operation: .increment(by: 1))], recomputeNow: true)
            guard case .notification(let notification) = await events.next() else {
                Issue.record("no notification")
                return
            }
            struct Payload: Decodable, Equatable {
                let user: String
                let version: Int64
            }
            #expect(try JSONDecoder().decode(Payload.self, from: Data(notification.payload.utf8)) == Payload(user: "frank", version: 1))
        }
    }

    @Test("concurrent writers and rollup workers lose no update and never deadlock")
    func concurrentRollup() async throws {
        let fixture = try await StoreFixture.make(connections: 6)
        try await tearingDown({ await fixture.tearDown() }) {
            let users = (0..<6).map { user("c\($0)") }
            let paths = ["root.x", "root.x.y", "root.z"].map(path)
            // Two writers increment the same users' nodes while three workers drain the dirty queue
            // and one recomputes every user directly (as an API clear does).
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0..<2 {
                    group.addTask {
                        for round in 0..<60 {
                            let mutations = users.enumerated().map { index, id in
                                BadgeMutation(user: id, path: paths[(index + round + writer) % paths.count], operation: .increment(by: 1))
                            }
                            try await fixture.ingest(mutations)
                        }
                    }
                }
                for _ in 0..<3 {
                    group.addTask {
                        for _ in 0..<150 { try await fixture.drainDirtyUsers(batchSize: 2) }
                    }
                }
                try await group.waitForAll()
            }
            // Only dirty marks bring the aggregates up to date: a lost mark leaves a stale tree.
            try await fixture.drainDirtyUsers()
            for id in users {
                let tree = try await fixture.store.tree(for: id)
                #expect(tree.tree?.count == 120, "user \(id)")
            }
            // Direct recomputes (as an API clear does) run beside rollup workers without deadlocks.
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { for _ in 0..<30 { try await fixture.recompute(users.shuffled()) } }
                group.addTask {
                    for _ in 0..<30 {
                        try await fixture.ingest(users.map { BadgeMutation(user: $0, path: paths[0], operation: .increment(by: 1)) })
                        try await fixture.drainDirtyUsers(batchSize: 3)
                    }
                }
                try await group.waitForAll()
            }
            try await fixture.drainDirtyUsers()
            for id in users {
                #expect(try await fixture.store.tree(for: id).tree?.count == 150, "user \(id)")
            }
        }
    }
}
