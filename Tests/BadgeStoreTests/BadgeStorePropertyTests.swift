import BadgeCore
import BadgeStore
import Foundation
import LibPQ
import TestSupport
import Testing

@Suite("PostgreSQL store equals the in-memory model")
struct BadgeStorePropertyTests {
    /// Seeds: fixed by default, or `REDDOT_TEST_SEED` to reproduce or explore.
    static let seeds: [UInt64] = {
        if let text = ProcessInfo.processInfo.environment["REDDOT_TEST_SEED"], let seed = UInt64(text) { return [seed] }
        return [1, 2, 3, 4]
    }()

    /// Each seed on the shipped schema.
    static let layouts: [(seed: UInt64, layout: SchemaLayout)] = seeds.map { ($0, .plain) }

    /// Issue 27: the same on the per-user tables hash-partitioned by user (8 partitions), where
    /// a statement that takes a tuple id for a row name, or reaches a table without its user,
    /// goes wrong or slow.
    @Test("on tables hash-partitioned by user, random op sequences give the model's trees", arguments: seeds.prefix(2))
    func randomSequencesOnPartitions(seed: UInt64) async throws {
        try await randomSequences(seed: seed, layout: .partitionedByUser)
    }

    /// Issue 27: the same on a Citus cluster, the tables distributed by user as
    /// `deploy/citus/layout.sql` lays them out: ingest's batches written a shard at a time, the
    /// rollup's rounds recounting a shard's users a statement (docs/SHARDING.md, rule 10) (`REDDOT_TEST_CITUS_WORKERS` names the workers,
    /// `REDDOT_TEST_DATABASE_URL` the coordinator: docs/SHARDING.md, "Running the tests on
    /// Citus"). Skipped where no Citus cluster is named, as in `deploy/test.sh`: Debian has no
    /// Citus package.
    @Test(
        "on tables distributed by Citus, random op sequences give the model's trees",
        .enabled(if: !SchemaLayout.citusWorkers.isEmpty, "no Citus cluster (REDDOT_TEST_CITUS_WORKERS)"),
        arguments: seeds.prefix(2))
    func randomSequencesOnCitus(seed: UInt64) async throws {
        try await randomSequences(seed: seed, layout: .citus)
    }

    @Test("random op sequences give the same tree in PostgreSQL as in memory, for every user", arguments: layouts)
    func randomSequences(seed: UInt64, layout: SchemaLayout) async throws {
        let fixture = try await StoreFixture.make(layout: layout)
        try await tearingDown({ await fixture.tearDown() }) {
            let users = (0..<500).map { user("s\(seed)_u\($0)") }
            var generator = RandomBadgeOperations(users: users, seed: seed)
            var models: [UserID: BadgeTree] = [:]
            var shownTrees: [UserID: BadgeNode] = [:]
            var shownMutes: [UserID: [MutedNode]] = [:]
            var versions: [UserID: Int64] = [:]
            let now = Date()
            var applied = 0
            while applied < 7_500 {
                let size = generator.integer(in: 1...400)
                let mutations = generator.sequence(count: size)
                applied += size
                for mutation in mutations {
                    models[mutation.user, default: BadgeTree()].apply(mutation, now: now)
                }
                try await fixture.ingest(mutations)
                guard generator.integer(in: 0...2) > 0 else { continue }  // sometimes let dirt pile up

                // Rollup: every dirty user is recomputed; a version moves by one exactly when the
                // user's visible tree changed.
                let touched = try await fixture.pool.withConnection { connection in
                    try connection.query(PGStatement("test.dirty", "SELECT DISTINCT user_id FROM dirty_mark", prepared: false)).rows.map {
                        try $0.decode(0, as: String.self)
                    }
                }
                try await fixture.drainDirtyUsers(batchSize: 150)
                for name in touched {
                    let id = user(name)
                    let stored = try await fixture.store.tree(for: id)
                    let model = models[id, default: BadgeTree()]
                    let expected = model.node(at: .root, now: now)
                    #expect(stored.tree == expected, "user \(name) after \(applied) mutations (seed \(seed))")
                    #expect(stored.mutes == model.mutedNodes(at: now), "mutes of \(name) after \(applied) mutations (seed \(seed))")
                    let previousVersion = versions[id] ?? 0
                    // What the user sees: the tree and the muted nodes.
                    if expected == shownTrees[id] ?? BadgeTree().node(at: .root, now: now), model.mutedNodes(at: now) == shownMutes[id] ?? [] {
                        #expect(stored.version == previousVersion, "user \(name): version moved without a visible change")
                    } else {
                        #expect(stored.version == previousVersion + 1, "user \(name): version did not move by one on a change")
                    }
                    versions[id] = stored.version
                    shownTrees[id] = expected
                    shownMutes[id] = model.mutedNodes(at: now)
                }
            }
            try await fixture.drainDirtyUsers()

            var random = SeededRandom(seed: seed &* 7919)
            for id in users {
                let model = models[id, default: BadgeTree()]
                let stored = try await fixture.store.tree(for: id)
                #expect(stored.tree == model.node(at: .root, now: now), "user \(id) (seed \(seed))")
                // A random subtree at a random depth answers like the model too.
                let subtree = generator.nextPath()
                let depth = Int.random(in: 0...3, using: &random)
                let storedSubtree = try await fixture.store.tree(for: id, at: subtree, depth: depth)
                #expect(storedSubtree.tree == model.node(at: subtree, depth: depth, now: now), "user \(id) subtree \(subtree) depth \(depth)")
            }
            let dirty = try await fixture.scalar("SELECT count(DISTINCT user_id)::int FROM dirty_mark", as: Int.self)
            #expect(dirty == 0)
        }
    }
}

@Suite("Every operation in PostgreSQL: any arrival order gives the in-order tree")
struct ItemOrderPropertyTests {
    /// Issue 27: the same on a Citus cluster (`deploy/citus/test.sh`; skipped without one).
    @Test(
        "on tables distributed by Citus, every operation shuffled into random batches ends in the in-order model's tree, OnCitus",
        .enabled(if: !SchemaLayout.citusWorkers.isEmpty, "no Citus cluster (REDDOT_TEST_CITUS_WORKERS)"),
        arguments: [UInt64(1)])
    func shuffledArrivalsOnCitus(seed: UInt64) async throws {
        try await shuffledArrivals(seed: seed, layout: .citus)
    }

    @Test(
        "timed sets, increments, decrements, adds, removes, clears, seens and mutes, shuffled into random batches, end in the in-order model's tree",
        arguments: [(UInt64(1), SchemaLayout.plain), (2, .plain), (3, .plain)])
    func shuffledArrivals(seed: UInt64, layout: SchemaLayout) async throws {
        let fixture = try await StoreFixture.make(layout: layout)
        try await tearingDown({ await fixture.tearDown() }) {
            let users = (0..<60).map { user("o\(seed)_u\($0)") }
            var generator = RandomBadgeOperations(users: users, seed: seed &+ 500)
            generator.weights = .orderFree
            generator.maximumDepth = 3
            let mutations = generator.sequence(count: 3_000)
            let now = Date()
            var models: [UserID: BadgeTree] = [:]
            for mutation in mutations { models[mutation.user, default: BadgeTree()].apply(mutation, now: now) }

            var random = SeededRandom(seed: seed &* 104_729)
            let shuffled = mutations.shuffled(using: &random)
            var start = 0
            while start < shuffled.count {
                let end = min(shuffled.count, start + Int.random(in: 1...300, using: &random))
                try await fixture.ingest(Array(shuffled[start..<end]))
                start = end
            }
            try await fixture.drainDirtyUsers()
            for id in users {
                let stored = try await fixture.store.tree(for: id)
                #expect(stored.tree == models[id, default: BadgeTree()].node(at: .root, now: now), "user \(id) (seed \(seed))")
            }
            // Live rows are exactly the model's live items; gone ones stay as tombstones.
            let live = try await fixture.scalar(
                "SELECT count(*)::int FROM badge_item WHERE removed_at IS NULL AND user_id LIKE 'o\(seed)_u%'", as: Int.self)
            #expect(live == models.values.reduce(0) { $0 + $1.items.values.reduce(0) { $0 + $1.count } })
        }
    }
}

@Suite("Clears and seens at a rendered version, and the fold, in PostgreSQL: what arrived after the render stays, unseen")
struct ClearShownPropertyTests {
    /// One user's model: the tree, its version, the aggregates that version shows, and whether
    /// changes wait for the rollup.
    struct UserModel {
        var tree = BadgeTree()
        var version: Int64 = 0
        var shown: [BadgePath: BadgeAggregate] = [:]
        var dirty = false
        var renders: [Int64] = []

        /// The muted nodes that version shows.
        var shownMutes: [MutedNode] = []

        /// What a recompute of the user does: a new version when what shows (counts or muted
        /// nodes) changed.
        mutating func rollUp(now: Date) {
            let aggregates = tree.aggregates(now: now)
            let mutes = tree.mutedNodes(at: now)
            if aggregates != shown || mutes != shownMutes {
                version += 1
                shown = aggregates
                shownMutes = mutes
            }
            dirty = false
        }
    }

    /// Issue 27: the same on a Citus cluster (`deploy/citus/test.sh`; skipped without one):
    /// users' actions at rendered versions, a user's statements sent whole to the user's shard.
    @Test(
        "on tables distributed by Citus, random arrivals, rollups, folds, renders, clears and seens end in the model's tree, OnCitus",
        .enabled(if: !SchemaLayout.citusWorkers.isEmpty, "no Citus cluster (REDDOT_TEST_CITUS_WORKERS)"),
        arguments: [UInt64(1), 2])
    func racingClearsOnCitus(seed: UInt64) async throws {
        try await racingClears(seed: seed, layout: .citus)
    }

    @Test(
        "random arrivals, rollups, folds, renders, clears and seens at rendered versions end in the model's tree",
        arguments: [(UInt64(1), SchemaLayout.plain), (2, .plain), (3, .plain)])
    func racingClears(seed: UInt64, layout: SchemaLayout) async throws {
        let fixture = try await StoreFixture.make(layout: layout)
        try await tearingDown({ await fixture.tearDown() }) {
            let users = (0..<6).map { user("r\(seed)_u\($0)") }
            var generator = RandomBadgeOperations(users: users, seed: seed &+ 900)
            generator.maximumDepth = 3
            let now = Date()
            var models = Dictionary(uniqueKeysWithValues: users.map { ($0, UserModel()) })
            var random = SeededRandom(seed: seed &* 7_919)
            var clears = 0
            for step in 0..<200 {
                let id = users[Int(random.next() % UInt64(users.count))]
                switch random.next() % 10 {
                case 0..<5:
                    var batch = BadgeBatch(now: now)
                    batch.append(contentsOf: generator.sequence(count: Int(random.next() % 12) + 1))
                    try await fixture.ingest(batch)
                    for user in batch.users {
                        guard var model = models[user] else { continue }
                        model.tree.nextVersion = model.version + 1
                        model.tree.apply(batch, for: user, now: now)
                        model.dirty = true
                        models[user] = model
                    }
                case 5, 6:
                    try await fixture.drainDirtyUsers()
                    for user in users where models[user]?.dirty == true { models[user]?.rollUp(now: now) }
                    guard random.next() % 3 == 0 else { continue }
                    // The fold: increments the trees show become part of their states' counts. The
                    // store leaves no dirty mark; the model rolls the users up, which must find
                    // nothing changed (the final versions compare).
                    _ = try await fixture.pool.withConnection { connection in
                        try BadgeStore.foldIncrements(storedBefore: Date().addingTimeInterval(3_600), limit: 2, on: connection)
                    }
                    for user in users {
                        guard var model = models[user] else { continue }
                        if model.tree.incrementVersions.values.contains(where: { $0.values.contains { $0 <= model.version } }) {
                            model.dirty = true
                        }
                        model.tree.foldIncrements(shownThrough: model.version)
                        models[user] = model
                    }
                case 7:
                    let rendered = try await fixture.store.tree(for: id)
                    #expect(rendered.version == models[id]?.version, "user \(id), step \(step)")
                    models[id]?.renders.append(rendered.version)
                default:
                    // Half the time the latest render (often of the current version, with arrivals
                    // waiting for the rollup), else any earlier one.
                    let latest = random.next() % 2 == 0
                    guard let model = models[id], let version = latest ? model.renders.last : model.renders.randomElement(using: &random)
                    else { continue }
                    let path = generator.nextPath()
                    let settled = model.dirty ? nil : Optional(model.version)
                    let outcome: ActionOutcome
                    switch random.next() % 4 {
                    case 0:
                        outcome = try await fixture.store.act(.seen, at: path, for: id, seenVersion: version)
                        models[id]?.tree.markShownSeen(path, through: version, settled: settled, now: now)
                    default:
                        let force = random.next() % 3 == 0
                        outcome = try await fixture.store.act(.clear(force: force), at: path, for: id, seenVersion: version)
                        models[id]?.tree.clearShown(path, subtree: force, through: version, settled: settled, now: now)
                    }
                    models[id]?.rollUp(now: now)
                    #expect(outcome != .changedSince(current: model.version), "user \(id), step \(step)")
                    clears += 1
                }
            }
            try await fixture.drainDirtyUsers()
            for id in users {
                if models[id]?.dirty == true { models[id]?.rollUp(now: now) }
                let stored = try await fixture.store.tree(for: id)
                let model = try #require(models[id])
                #expect(stored.tree == model.tree.node(at: .root, now: now), "user \(id) (seed \(seed))")
                #expect(stored.version == model.version, "user \(id) (seed \(seed))")
            }
            #expect(clears > 10)
        }
    }
}
