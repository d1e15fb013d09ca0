import BadgeCore
import BadgeStore
import Foundation
import LibPQ
import TestSupport
import Testing

@testable import BadgeAPI

/// Streams that follow the change log against streams that read the tree at every change, on
/// PostgreSQL with the real rollup, change log and change hub.
@Suite("Streams that apply the logged versions", .serialized)
struct StreamFollowerTests {
    /// One stream of each kind for one user's subtree, woken alike.
    struct Pair {
        var user: UserID
        var path: BadgePath
        var logged: StreamFollower
        var reading: StreamFollower
        var loggedEvents: [String] = []
        var readingEvents: [String] = []
        /// The trees sent, each as the logged stream sent it.
        var sent: [UserBadgeTree] = []
        var firstVersion: Int64
    }

    @Test(
        "streams fed by the log and streams fed by reads send the same events, over random own changes, broadcasts, dismissals and seens, with wake-ups dropped at random",
        arguments: [UInt64(3), 17, 101])
    func sameEvents(seed: UInt64) async throws {
        try await APIHarness.with { harness in
            var random = SeededRandom(seed: seed)
            let api = harness.api
            let hub = api.hub
            let users = [user("sf-a\(seed)"), user("sf-b\(seed)")]
            let own = ["root.chat.c1", "root.chat.c2", "root.promo.p1", "root.promo.deep.p2"].map(path)
            let shared = ["root.promo.news", "root.feature.dark", "root.chat.tips"].map(path)
            // The hub counts a user's notifications while they have a stream, as a live stream has.
            let subscriptions = users.map { hub.subscribe($0) }
            defer { subscriptions.forEach { $0.cancel() } }

            func open(_ user: UserID, at path: BadgePath) async throws -> Pair {
                let generation = hub.logReads.generation(of: user)
                let view = try await api.readView(user, at: path)
                let tree = api.tree(user, view)
                return Pair(
                    user: user, path: path,
                    logged: StreamFollower(user: user, current: tree, view: view, generation: generation, followsLog: true),
                    reading: StreamFollower(user: user, current: tree, view: view, generation: generation, followsLog: false),
                    firstVersion: tree.version)
            }
            var pairs: [Pair] = []
            for user in users {
                pairs.append(try await open(user, at: .root))
                pairs.append(try await open(user, at: path("root.promo")))
            }

            func wake(_ wake: ChangeHub.Wake, users woken: [UserID]) async throws {
                for index in pairs.indices where woken.contains(pairs[index].user) {
                    let (user, path) = (pairs[index].user, pairs[index].path)
                    let read = { try await api.readView(user, at: path) }
                    let render = { (view: UserView) in api.tree(user, view) }
                    if let event = try await pairs[index].logged.next(after: wake, hub: hub, read: read, render: render) {
                        pairs[index].loggedEvents.append(event)
                        pairs[index].sent.append(pairs[index].logged.current)
                    }
                    if let event = try await pairs[index].reading.next(after: wake, hub: hub, read: read, render: render) {
                        pairs[index].readingEvents.append(event)
                    }
                }
            }

            var broadcasts: [(id: String, path: BadgePath)] = []
            var steps: [String] = []
            for step in 0..<60 {
                let user = users[Int.random(in: 0..<users.count, using: &random)]
                let before = hub.logReads.generation(of: user)
                let versionBefore = try await ownVersion(user, harness)
                let kind = Int.random(in: 0..<10, using: &random)
                if kind < 5 {
                    // An own change of one user (applied and rolled up at once, as the API's clears are).
                    let node = own[Int.random(in: 0..<own.count, using: &random)]
                    let operation: BadgeOperation =
                        switch Int.random(in: 0..<4, using: &random) {
                        case 0: .set(count: Int64.random(in: 1...5, using: &random), icon: nil)
                        case 1: .clear(force: Bool.random(using: &random))
                        default: .increment(by: Int64.random(in: 1...3, using: &random))
                        }
                    try await harness.apply([BadgeMutation(user: user, path: node, operation: operation)])
                    steps.append("\(step): \(user.rawValue) \(operation) at \(node.rawValue)")
                } else if kind < 8 || broadcasts.isEmpty {
                    // A broadcast goes live or is withdrawn: every user's tree moves.
                    let target = try await broadcastVersion(harness) + 1
                    if broadcasts.isEmpty || Bool.random(using: &random) {
                        let id = "sf\(seed)-\(step)"
                        let at = shared[Int.random(in: 0..<shared.count, using: &random)]
                        try await harness.broadcast(id, at: at.rawValue, count: Int64.random(in: 0...4, using: &random))
                        broadcasts.append((id, at))
                        steps.append("\(step): broadcast \(id) at \(at.rawValue)")
                    } else {
                        let gone = broadcasts.remove(at: Int.random(in: 0..<broadcasts.count, using: &random))
                        try await withdraw(gone.id, harness)
                        steps.append("\(step): withdraw \(gone.id)")
                    }
                    try await waitForHub("broadcast version \(target)") { (hub.broadcastSet?.version ?? 0) >= target }
                    if Int.random(in: 0..<3, using: &random) > 0 { try await wake(.broadcasts, users: users) }
                    continue
                } else {
                    // A dismissal or a seen: the user clears a broadcast for themselves, or marks
                    // it seen (a new own version either way).
                    let target = broadcasts[Int.random(in: 0..<broadcasts.count, using: &random)]
                    let operation: BadgeOperation = Bool.random(using: &random) ? .clear(force: false) : .seen
                    _ = try await harness.store.act(
                        operation, at: target.path, for: user, seenVersion: nil, actionID: nil, deadline: .now + .seconds(5))
                    steps.append("\(step): \(user.rawValue) \(operation) at \(target.path.rawValue)")
                }
                // A change that moved nothing makes no version and sends no notification.
                if try await ownVersion(user, harness) > versionBefore {
                    try await waitForHub("\(user.rawValue)'s notification") { hub.logReads.generation(of: user) > before }
                }
                // A third of the wake-ups are dropped, as a full wake-up buffer drops them.
                if Int.random(in: 0..<3, using: &random) > 0 { try await wake(.change, users: [user]) }
            }
            let readsBefore = hub.logReads.readCount
            try await wake(.change, users: users)
            #expect(hub.logReads.readCount > readsBefore, "the streams fed by the log read it")

            for pair in pairs {
                #expect(
                    pair.loggedEvents == pair.readingEvents,
                    "seed \(seed), \(pair.user.rawValue) at \(pair.path.rawValue): steps \(steps)")
                // And both end where a fresh read is.
                let fresh = api.tree(pair.user, try await api.readView(pair.user, at: pair.path))
                #expect(pair.logged.current == fresh, "seed \(seed), \(pair.user.rawValue) at \(pair.path.rawValue)")
                #expect(!pair.loggedEvents.isEmpty)
                // Every tree sent is the user's tree at its version: the log's history of the
                // user, version by version, says what that was.
                let history = try #require(
                    try await harness.store.history(
                        for: pair.user, since: pair.firstVersion, stepwise: true, limit: 100_000, deadline: .now + .seconds(5)))
                let byVersion = Dictionary(history.map { ($0.version, $0.aggregates) }, uniquingKeysWith: { first, _ in first })
                for tree in pair.sent {
                    let aggregates = try #require(byVersion[tree.version], "seed \(seed): version \(tree.version) is not in the history")
                    let then = UserBadgeTree(
                        user: pair.user, version: tree.version, aggregates: aggregates, at: pair.path, depth: nil, display: api.configuration.display)
                    #expect(tree == then, "seed \(seed), \(pair.user.rawValue) at \(pair.path.rawValue), version \(tree.version): steps \(steps)")
                }
            }
        }
    }

    @Test("the streams of one user that wake together share one read of the log; a stream behind the log reads its tree")
    func sharedReads() async throws {
        try await APIHarness.with { harness in
            let api = harness.api
            let hub = api.hub
            let alice = user("sf-shared")
            let subscription = hub.subscribe(alice)
            defer { subscription.cancel() }
            try await harness.apply([BadgeMutation(user: alice, path: path("root.chat.c1"), operation: .increment(by: 1))])
            let view = try await api.readView(alice, at: .root)
            let before = hub.logReads.generation(of: alice)
            for count in 2...4 {
                try await harness.apply([BadgeMutation(user: alice, path: path("root.chat.c1"), operation: .set(count: Int64(count), icon: nil))])
            }
            let deadline = ContinuousClock.now + .seconds(10)
            while hub.logReads.generation(of: alice) < before + 3, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(2)) }

            // Eight streams at the same version ask at once: every one gets the same three versions.
            let readsBefore = hub.logReads.readCount
            let answers = await withTaskGroup(of: [OwnLayerChange]?.self) { group in
                for _ in 0..<8 { group.addTask { await hub.ownChanges(for: alice, after: view.userVersion) } }
                return await group.reduce(into: []) { $0.append($1) }
            }
            #expect(answers.count == 8)
            #expect(hub.logReads.readCount - readsBefore < 8, "the eight asked together and shared reads")
            for answer in answers {
                #expect(answer?.map(\.version) == [view.userVersion + 1, view.userVersion + 2, view.userVersion + 3])
            }
            // Applied to the view, they give what a read gives now.
            var applied = view
            for change in try #require(answers.first ?? nil) {
                applied = try #require(applied.applying(change, broadcasts: hub.broadcastSet))
            }
            #expect(applied == (try await api.readView(alice, at: .root)))

            // Once the log no longer holds the next version, the answer is nil: the stream reads.
            _ = try await harness.pool.withConnection { connection in
                try connection.query(
                    PGStatement("test.prune", "DELETE FROM badge_change WHERE user_id = $1 AND version = $2", prepared: false),
                    [alice.rawValue, view.userVersion + 1])
            }
            #expect(await hub.ownChanges(for: alice, after: view.userVersion) == nil)
            #expect(await hub.ownChanges(for: alice, after: view.userVersion + 1)?.map(\.version) == [view.userVersion + 2, view.userVersion + 3])
        }
    }

    @Test("the reads of many users whose streams wake together go in few statements, and each user gets what a read of their own log gives")
    func batchedReads() async throws {
        try await APIHarness.with { harness in
            let hub = harness.api.hub
            let users = (0..<24).map { user("sf-batch-\($0)") }
            let subscriptions = users.map { hub.subscribe($0) }
            defer { subscriptions.forEach { $0.cancel() } }
            try await harness.apply(users.map { BadgeMutation(user: $0, path: path("root.chat.c1"), operation: .increment(by: 1)) })
            var read: [UserID: UserView] = [:]
            for user in users { read[user] = try await harness.api.readView(user, at: .root) }
            let views = read
            // Two more versions of every user, each of the first three users' in a round of its own.
            for count in 2...3 {
                try await harness.apply(users.map { BadgeMutation(user: $0, path: path("root.chat.c1"), operation: .set(count: Int64(count), icon: nil)) })
            }
            for user in users.prefix(3) {
                try await harness.apply([BadgeMutation(user: user, path: path("root.promo.p\(user.rawValue.count)"), operation: .increment(by: 2))])
            }
            let deadline = ContinuousClock.now + .seconds(10)
            while users.contains(where: { hub.logReads.generation(of: $0) < 3 }), ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(2))
            }

            // One user's stream asks from a version the log no longer holds the next of.
            let pruned = users[5]
            _ = try await harness.pool.withConnection { connection in
                try connection.query(
                    PGStatement("test.prune", "DELETE FROM badge_change WHERE user_id = $1 AND version = $2", prepared: false),
                    [pruned.rawValue, views[pruned]!.userVersion + 1])
            }
            let batchesBefore = hub.logBatches.batchCount
            let answers = await withTaskGroup(of: (UserID, [OwnLayerChange]?).self) { group in
                for user in users { group.addTask { (user, await hub.ownChanges(for: user, after: views[user]!.userVersion)) } }
                return await group.reduce(into: [UserID: [OwnLayerChange]?]()) { $0[$1.0] = $1.1 }
            }
            let statements = hub.logBatches.batchCount - batchesBefore
            #expect(statements >= 1)
            #expect(statements < users.count / 2, "24 users' reads at once took \(statements) statements")
            for user in users {
                let view = views[user]!
                guard user != pruned else {
                    #expect(answers[user] ?? [] == nil, "the log no longer holds the version after the stream's")
                    continue
                }
                let changes = try #require(answers[user] ?? nil, "\(user.rawValue)")
                let expected = users.prefix(3).contains(user) ? 3 : 2
                #expect(changes.map(\.version) == (1...expected).map { view.userVersion + Int64($0) }, "\(user.rawValue)")
                // Applied to the view, they give what a read gives now.
                var applied = view
                for change in changes { applied = try #require(applied.applying(change, broadcasts: hub.broadcastSet)) }
                #expect(applied == (try await harness.api.readView(user, at: .root)), "\(user.rawValue)")
            }
        }
    }

    @Test(
        "a cached tree a change made stale is brought current from the log: every answer equals a read, over own changes, broadcasts, dismissals and seens",
        arguments: [UInt64(5), 23])
    func cacheFollowsLog(seed: UInt64) async throws {
        try await APIHarness.with(treeCacheBytes: 8 << 20) { harness in
            var random = SeededRandom(seed: seed)
            let api = harness.api
            let hub = api.hub
            let name = "sc\(seed)"
            let who = user(name)
            let token = try await harness.token(name)
            let own = ["root.chat.c1", "root.chat.c2", "root.promo.p1"].map(path)
            try await harness.apply([BadgeMutation(user: who, path: own[0], operation: .increment(by: 1))])
            var broadcasts: [(id: String, path: BadgePath)] = []
            // Watched, so that the test can tell when the hub has seen each notification.
            let subscription = hub.subscribe(who)
            defer { subscription.cancel() }
            let readsBefore = hub.logReads.readCount
            var steps: [String] = []
            for step in 0..<40 {
                // The answer, through the cache (a stale entry is followed through the log).
                let answer = try await harness.get("/v1/users/\(name)/badges", token: token).tree()
                let fresh = api.tree(who, try await api.readView(who, at: .root))
                #expect(answer == fresh, "seed \(seed) step \(step): steps \(steps)")
                let versionBefore = try await ownVersion(who, harness)
                let before = hub.logReads.generation(of: who)
                switch Int.random(in: 0..<6, using: &random) {
                case 0, 1, 2:
                    let node = own[Int.random(in: 0..<own.count, using: &random)]
                    try await harness.apply([BadgeMutation(user: who, path: node, operation: .increment(by: Int64.random(in: 1...3, using: &random)))])
                    steps.append("incr \(node.rawValue)")
                case 3:
                    let id = "\(name)-\(step)"
                    let target = try await broadcastVersion(harness) + 1
                    try await harness.broadcast(id, at: "root.promo.news", count: 1)
                    broadcasts.append((id, path("root.promo.news")))
                    try await waitForHub("broadcast version \(target)") { (hub.broadcastSet?.version ?? 0) >= target }
                    steps.append("broadcast \(id)")
                    continue
                case 4:
                    // Through this server: the next answer shows it without waiting for the notification.
                    let node = broadcasts.isEmpty || Bool.random(using: &random) ? own[0] : broadcasts[0].path
                    let action = Bool.random(using: &random) ? "clear" : "seen"
                    let cleared = try await harness.call(.post, "/v1/users/\(name)/badges/\(action)", token: token, body: #"{"path": "\#(node.rawValue)"}"#)
                    #expect(cleared.status == .ok)
                    let next = try await harness.get("/v1/users/\(name)/badges", token: token).tree()
                    #expect(next.version >= (try cleared.tree().version), "seed \(seed) step \(step): a read after a \(action) went back")
                    steps.append("\(action) \(node.rawValue) through the API")
                default:
                    steps.append("nothing")
                    continue
                }
                if try await ownVersion(who, harness) > versionBefore {
                    try await waitForHub("\(name)'s notification") { hub.logReads.generation(of: who) > before }
                }
            }
            #expect(hub.logReads.readCount > readsBefore, "stale entries were brought current from the log")
        }
    }

    private func waitForHub(_ what: String, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while !condition() {
            guard ContinuousClock.now < deadline else { throw APITestError("the hub never saw \(what)") }
            try await Task.sleep(for: .milliseconds(2))
        }
    }

    private func ownVersion(_ user: UserID, _ harness: APIHarness) async throws -> Int64 {
        try await harness.pool.withConnection { connection in
            try connection.query(
                PGStatement("test.own_version", "SELECT coalesce((SELECT version FROM user_version WHERE user_id = $1), 0)", prepared: false),
                [user.rawValue]
            ).singleRow().decode(0, as: Int64.self)
        }
    }

    private func broadcastVersion(_ harness: APIHarness) async throws -> Int64 {
        try await harness.pool.withConnection { connection in
            try connection.query(PGStatement("test.broadcast_version", "SELECT version FROM broadcast_version", prepared: false))
                .singleRow().decode(0, as: Int64.self)
        }
    }

    private func withdraw(_ id: String, _ harness: APIHarness) async throws {
        try await harness.pool.withTransaction { connection in
            try BadgeStore.lockBroadcastsExclusive(on: connection)
            _ = try connection.query(
                PGStatement(
                    "test.withdraw",
                    """
                    UPDATE broadcast SET withdrawn_at = now(), withdrawn_in = (SELECT version + 1 FROM broadcast_version)
                    WHERE event_id = $1 AND withdrawn_at IS NULL
                    """, prepared: false),
                [id])
            try BadgeStore.bumpBroadcastVersion(on: connection)
        }
    }
}
