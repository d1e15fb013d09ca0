import BadgeCore
import BadgeStore
import Foundation
import LibPQ
import TestSupport
import Testing

@Suite("Aggregation modes in PostgreSQL: the rollup, the change log and verify follow the model")
struct AggregationModeStoreTests {
    /// Random modes over the generator's vocabulary (labels a-d, depth up to 4): each seed a few
    /// patterns, some with `*`, every mode drawn.
    static func randomModes(seed: UInt64) throws -> AggregationModes {
        var random = SeededRandom(seed: seed &* 104_729)
        let patterns = ["root", "root.a", "root.b", "root.*", "root.a.*", "root.*.b", "root.c.d", "root.*.*.a", "root.b.c"]
        var entries: [AggregationModes.Entry] = []
        var taken: Set<String> = []
        for _ in 0..<Int.random(in: 2...5, using: &random) {
            guard let pattern = patterns.randomElement(using: &random), taken.insert(pattern).inserted,
                let mode = AggregationMode.allCases.randomElement(using: &random)
            else { continue }
            entries.append(try AggregationModes.entry(pattern: pattern, mode: mode))
        }
        return AggregationModes(entries: entries)
    }

    @Test(
        "random operations under random modes: every user's tree, the change log's root totals and verify equal the model",
        arguments: [(UInt64(1), true), (2, true), (3, false), (4, false), (5, true)])
    func randomModesEqualTheModel(seed: UInt64, additive: Bool) async throws {
        let fixture = try await StoreFixture.make()
        try await tearingDown({ await fixture.tearDown() }) {
            let modes = try Self.randomModes(seed: seed)
            #expect(try await fixture.store.storeAggregationModes(modes))
            #expect(try await fixture.store.aggregationModes() == modes)
            let users = (0..<150).map { user("m\(seed)_u\($0)") }
            var generator = RandomBadgeOperations(users: users, seed: seed &+ 77)
            if additive { generator.weights = .additive }
            let now = Date()
            var models: [UserID: BadgeTree] = [:]
            var applied = 0
            var addedUsers = 0
            while applied < 3_000 {
                let mutations = generator.sequence(count: generator.integer(in: 1...300))
                applied += mutations.count
                for mutation in mutations { models[mutation.user, default: BadgeTree()].apply(mutation, now: now) }
                var batch = BadgeBatch(now: now)
                batch.append(contentsOf: mutations)
                try await fixture.ingest(batch)
                guard generator.integer(in: 0...2) > 0 else { continue }
                addedUsers += try await fixture.drainCountingDeltas(batchSize: generator.integer(in: 1...80))
            }
            addedUsers += try await fixture.drainCountingDeltas(batchSize: 100)
            // Users whose increments fall under no moded node still take the delta path.
            if additive { #expect(addedUsers > 0, "no round added deltas (seed \(seed), modes \(modes))") }

            let roots = try await fixture.latestRoots()
            for id in users {
                let expected = models[id, default: BadgeTree()].node(at: .root, now: now, modes: modes)
                let stored = try await fixture.store.tree(for: id)
                #expect(stored.tree == expected, "user \(id) (seed \(seed), modes \(modes))")
                if let root = roots[id.rawValue] {
                    #expect(root.count == (expected?.count ?? 0), "change log root of \(id) (seed \(seed))")
                    #expect(root.unseen == (expected?.unseen ?? 0), "change log root unseen of \(id) (seed \(seed))")
                }
            }
            let report = try await BadgeVerifier(store: fixture.store).run(repair: false)
            #expect(report.mismatches == 0, "seed \(seed)")
        }
    }

    @Test("each mode at a node and its ancestors, in the tree and in the change log's root total (the app-icon number)")
    func eachMode() async throws {
        let fixture = try await StoreFixture.make()
        try await tearingDown({ await fixture.tearDown() }) {
            try await fixture.store.storeAggregationModes(
                AggregationModes(entries: [
                    try AggregationModes.entry(pattern: "root.chat", mode: .children),
                    try AggregationModes.entry(pattern: "root.discover", mode: .dot),
                    try AggregationModes.entry(pattern: "root.archive", mode: .exclude),
                ]))
            let alice = user("modes_alice")
            func path(_ text: String) throws -> BadgePath { try BadgePath(validating: text) }
            try await fixture.ingest([
                BadgeMutation(user: alice, path: try path("root.chat.c1"), operation: .increment(by: 40)),
                BadgeMutation(user: alice, path: try path("root.chat.c2"), operation: .increment(by: 1)),
                BadgeMutation(user: alice, path: try path("root.chat.c3"), operation: .set(count: 0, icon: nil)),
                BadgeMutation(user: alice, path: try path("root.discover.moments"), operation: .increment(by: 5)),
                BadgeMutation(user: alice, path: try path("root.archive.old"), operation: .increment(by: 7)),
                BadgeMutation(user: alice, path: try path("root.inbox"), operation: .increment(by: 2)),
            ])
            try await fixture.drainDirtyUsers()
            let tree = try #require(try await fixture.store.tree(for: alice).tree)
            func node(_ text: String) -> BadgeNode? {
                var found: BadgeNode?
                func walk(_ node: BadgeNode) {
                    if node.path.rawValue == text { found = node }
                    node.children.forEach(walk)
                }
                walk(tree)
                return found
            }
            // children: three chats shown, the count is 3 (not 41); each chat keeps its own number.
            #expect(node("root.chat")?.count == 3)
            #expect(node("root.chat")?.text == "3")
            #expect(node("root.chat.c1")?.count == 40)
            // dot: the node shows a dot, its child its number, and nothing reaches the root.
            #expect(node("root.discover")?.count == 0)
            #expect(node("root.discover")?.text == nil)
            #expect(node("root.discover.moments")?.count == 5)
            // exclude: counted in place, not above.
            #expect(node("root.archive")?.count == 7)
            // The root: 3 chats + 2 inbox; the dot and the excluded archive add nothing.
            #expect(tree.count == 5)
            // Unseen: two chats with something unseen (the dot c3 has none) + the inbox's 2.
            #expect(node("root.chat")?.unseen == 2)
            #expect(tree.unseen == 4)
            #expect(try await fixture.latestRoots()[alice.rawValue]?.count == 5)
            // The change feed's record of that version says the same: the root and the moded nodes.
            let records = try await fixture.pool.withConnection { try BadgeStore.pendingFeedRecords(limit: 100, countCap: 99, on: $0).records }
            let record = try FeedRecordTests.object(try #require(records.last { $0.key == alice.rawValue }).payload)
            #expect(FeedRecordTests.integer((record["root"] as? [String: Any])?["count"]) == 5)
            #expect(FeedRecordTests.integer((record["root"] as? [String: Any])?["unseen"]) == 4)
            let changed = try #require(record["changed"] as? [[String: Any]])
            func logged(_ text: String) -> Int64? { FeedRecordTests.integer(changed.first { $0["path"] as? String == text }?["count"]) }
            #expect(logged("root.chat") == 3 && logged("root.discover") == 0 && logged("root.archive") == 7 && logged("root") == 5)

            // A read of a chat takes one from root.chat and from the root.
            try await fixture.ingest([BadgeMutation(user: alice, path: try path("root.chat.c1"), operation: .clear(force: false))])
            try await fixture.drainDirtyUsers()
            let after = try #require(try await fixture.store.tree(for: alice).tree)
            #expect(after.count == 4)
            #expect(try await fixture.latestRoots()[alice.rawValue]?.count == 4)
        }
    }

    @Test("changed modes: verify reports the users counted with the old ones and repair recounts them")
    func changedModesAreRepaired() async throws {
        let fixture = try await StoreFixture.make()
        try await tearingDown({ await fixture.tearDown() }) {
            let bob = user("modes_bob")
            let now = Date()
            var model = BadgeTree()
            let mutations = [
                BadgeMutation(user: bob, path: try BadgePath(validating: "root.chat.c1"), operation: .increment(by: 4)),
                BadgeMutation(user: bob, path: try BadgePath(validating: "root.chat.c2"), operation: .increment(by: 6)),
            ]
            for mutation in mutations { model.apply(mutation, now: now) }
            try await fixture.ingest(mutations)
            try await fixture.drainDirtyUsers()
            #expect(try await fixture.store.tree(for: bob).tree?.count == 10)

            let modes = AggregationModes(entries: [try AggregationModes.entry(pattern: "root.chat", mode: .children)])
            #expect(try await fixture.store.storeAggregationModes(modes))
            #expect(try await !fixture.store.storeAggregationModes(modes), "storing the same modes again changes nothing")
            let report = try await BadgeVerifier(store: fixture.store).run(repair: true)
            #expect(report.mismatches > 0)
            #expect(report.usersRepaired == 1)
            let repaired = try await fixture.store.tree(for: bob)
            #expect(repaired.tree == model.node(at: .root, now: now, modes: modes))
            #expect(repaired.tree?.count == 2)
            #expect(try await fixture.latestRoots()[bob.rawValue]?.count == 2)
        }
    }
}

extension AggregationModeStoreTests {
    @Test("ingest processes starting together store their modes one after the other, without an error")
    func concurrentStores() async throws {
        let fixture = try await StoreFixture.make()
        try await tearingDown({ await fixture.tearDown() }) {
            let first = AggregationModes(entries: [try AggregationModes.entry(pattern: "root.chat", mode: .children)])
            let second = AggregationModes(entries: [
                try AggregationModes.entry(pattern: "root.chat", mode: .dot), try AggregationModes.entry(pattern: "root.a.*", mode: .exclude),
            ])
            // Rounds of four at once, each round alternating which set is stored first: without
            // the lock, two of them insert position 1 together and one fails on the key.
            for round in 0..<30 {
                try await withThrowingTaskGroup(of: Bool.self) { group in
                    for index in 0..<4 {
                        group.addTask { try await fixture.store.storeAggregationModes((index + round).isMultiple(of: 2) ? first : second) }
                    }
                    for try await _ in group {}
                }
            }
            let stored = try await fixture.store.aggregationModes()
            #expect(stored == first || stored == second)
        }
    }
}

extension StoreFixture {
    /// Each user's root totals in their latest change-log record (what the feed publishes).
    func latestRoots() async throws -> [String: (count: Int64, unseen: Int64)] {
        try await pool.withConnection { connection in
            var roots: [String: (count: Int64, unseen: Int64)] = [:]
            for row in try connection.query(
                PGStatement(
                    "test.latest_roots",
                    "SELECT DISTINCT ON (user_id) user_id, root_count, root_unseen FROM badge_change ORDER BY user_id, version DESC",
                    prepared: false)
            ).rows {
                roots[try row.decode(0, as: String.self)] = (try row.decode(1, as: Int64.self), try row.decode(2, as: Int64.self))
            }
            return roots
        }
    }
}
