import BadgeAPI
import BadgeCore
import BadgeStore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import LibPQ
import TestSupport
import Testing

/// The change log (DESIGN §6a) on PostgreSQL: every version a user saw can be rebuilt, delta
/// polling answers the difference of two trees, and streams resume from it.
@Suite("The change log: delta polling and stream resume", .serialized)
struct ChangeFeedTests {
    static let users = ["ana", "ben", "cai"].map(user)
    static let paths = ["root.chat.c1", "root.chat.c2", "root.feed", "root.feed.f1.x", "root.promo"].map(path)

    /// One random event, as ingest maps it: mostly per-user operations, sometimes a broadcast.
    static func randomEvent(_ index: Int, _ random: inout SplitMix64) throws -> MappedOperation {
        let node = paths[Int(random.next() % UInt64(paths.count))]
        let id = try EventID(validating: "e\(index)")
        if random.next() % 6 == 0 {
            let operation: BadgeOperation = random.next() % 4 == 0 ? .clear(force: true) : .set(count: Int64(random.next() % 3), icon: nil)
            return MappedOperation(eventID: id, audience: .everyone, path: random.next() % 2 == 0 ? node : .root, operation: operation, expiresAt: nil)
        }
        let operation: BadgeOperation
        switch random.next() % 11 {
        case 9: operation = .mute(until: nil)
        case 10: operation = .unmute
        case 8: operation = .clear(force: true)
        case 0: operation = .set(count: Int64(random.next() % 4), icon: random.next() % 2 == 0 ? try BadgeIcon(validating: "hot") : nil)
        case 1: operation = .clear(force: random.next() % 2 == 0)
        case 2: operation = .seen
        case 3: operation = .addItem(try ItemID(validating: "i\(random.next() % 4)"))
        case 4: operation = .removeItem(try ItemID(validating: "i\(random.next() % 4)"))
        case 5: operation = .decrement(by: 1)
        default: operation = .increment(by: Int64(1 + random.next() % 2))
        }
        let who = users[Int(random.next() % UInt64(users.count))]
        return MappedOperation(eventID: id, audience: .users([who]), path: node, operation: operation, expiresAt: nil)
    }

    /// Every user's visible tree, as the query service reads it, by version.
    static func record(_ seen: inout [UserID: [Int64: [BadgePath: BadgeAggregate]]], _ harness: APIHarness) async throws {
        for user in users {
            let (version, aggregates) = try await harness.pool.withConnection { connection in
                try BadgeStore.readAggregates(for: user, on: connection)
            }
            if let earlier = seen[user]?[version] {
                #expect(earlier == aggregates, "\(user) showed two trees at version \(version)")
            }
            seen[user, default: [:]][version] = aggregates
        }
    }

    /// The modes of the odd seeds: every kind on the random paths.
    static let modes = AggregationModes(entries: [
        try! AggregationModes.entry(pattern: "root.chat", mode: .children),
        try! AggregationModes.entry(pattern: "root.feed.f1", mode: .dot),
        try! AggregationModes.entry(pattern: "root.promo", mode: .exclude),
    ])

    @Test(
        "every version a user saw is rebuilt exactly from the log, step by step, with mutes, modes and broadcasts; the log's root totals are the visible root's",
        arguments: [UInt64(1), 2, 3, 4])
    func rebuildsWhatUsersSaw(seed: UInt64) async throws {
        try await APIHarness.with { harness in
            var random = SplitMix64(seed: seed)
            if seed % 2 == 1 { _ = try await harness.store.storeAggregationModes(Self.modes) }
            var seen: [UserID: [Int64: [BadgePath: BadgeAggregate]]] = [:]
            try await Self.record(&seen, harness)
            var index = 0
            for _ in 0..<60 {
                // A few events in one ingest transaction, then maybe a rollup, maybe an API clear.
                var events: [MappedOperation] = []
                for _ in 0...(random.next() % 4) {
                    events.append(try Self.randomEvent(index, &random))
                    index += 1
                }
                let batch = events
                try await harness.pool.withTransaction { connection in
                    var outcome = BatchOutcome()
                    try IngestTransaction.applyEvents(batch, into: &outcome, on: connection)
                }
                if random.next() % 2 == 0 { _ = try await harness.store.recomputeDirtyUsers(limit: 100) }
                if random.next() % 6 == 0 {
                    let who = Self.users[Int(random.next() % UInt64(Self.users.count))]
                    try await harness.apply([BadgeMutation(user: who, path: Self.paths[0], operation: .clear(force: false))])
                }
                try await Self.record(&seen, harness)
            }
            _ = try await harness.store.recomputeDirtyUsers(limit: 100)
            try await Self.record(&seen, harness)

            let deadline = ContinuousClock.now + .seconds(30)
            for user in Self.users {
                let versions = (seen[user] ?? [:]).keys.sorted()
                let latest = try #require(versions.last)
                for since in versions {
                    let steps = try #require(
                        try await harness.store.history(for: user, since: since, stepwise: true, limit: .max, deadline: deadline),
                        "\(user) since \(since)")
                    #expect(steps.map(\.version) == Array(since...latest), "\(user) since \(since): one step per version")
                    for step in steps {
                        if let shown = seen[user]?[step.version] {
                            #expect(step.aggregates == shown, "\(user) at \(step.version), rebuilt since \(since)")
                        }
                    }
                    let ends = try #require(try await harness.store.history(for: user, since: since, stepwise: false, limit: .max, deadline: deadline))
                    #expect(ends.first?.aggregates == seen[user]?[since] && ends.last?.aggregates == seen[user]?[latest])
                }
                #expect(try await harness.store.history(for: user, since: latest + 1, stepwise: false, limit: .max, deadline: deadline) == nil)
            }
            // The change feed's app-icon number is what the user saw at the root (broadcasts
            // merged in under the modes and mutes).
            for user in Self.users {
                for row in try await harness.rows(
                    "SELECT version + broadcast_version, root_count, root_unseen FROM badge_change WHERE user_id = $1", [user.rawValue])
                {
                    let version = try #require(row[0].flatMap { Int64($0) })
                    guard let shown = seen[user]?[version] else { continue }
                    let root = shown[.root] ?? BadgeAggregate(count: 0)
                    #expect(row[1] == String(root.count) && row[2] == String(root.unseen), "\(user)'s log at \(version): \(row) against \(root)")
                }
            }
            // The log holds every own version and every broadcast version.
            let broadcastVersion = try await harness.scalar("SELECT version FROM broadcast_version", as: Int64.self)
            #expect(try await harness.scalar("SELECT count(*) FROM broadcast_change", as: Int64.self) == broadcastVersion)
            #expect(
                try await harness.scalar("SELECT count(*) FROM badge_change", as: Int64.self)
                    == (try await harness.scalar("SELECT coalesce(sum(version), 0)::bigint FROM user_version", as: Int64.self)))
        }
    }

    @Test("GET …/badges/changes answers the difference of the two trees; 304 when nothing changed; 410 beyond the log")
    func deltaPolling() async throws {
        try await APIHarness.with { harness in
            let token = try await harness.token("dora")
            let dora = user("dora")
            try await harness.apply([
                BadgeMutation(user: dora, path: path("root.chat.c1"), operation: .increment(by: 2)),
                BadgeMutation(user: dora, path: path("root.feed.f1"), operation: .set(count: 1, icon: nil)),
            ])
            let before = try await harness.get("/v1/users/dora/badges", token: token).tree()
            try await harness.apply([BadgeMutation(user: dora, path: path("root.chat.c2"), operation: .increment(by: 3))])
            try await harness.broadcast("news", at: "root.news", count: 1)
            try await harness.apply([BadgeMutation(user: dora, path: path("root.feed.f1"), operation: .clear(force: false))])
            // A node that changed and changed back is not in the answer.
            try await harness.apply([BadgeMutation(user: dora, path: path("root.chat.c1"), operation: .increment(by: 1))])
            try await harness.apply([BadgeMutation(user: dora, path: path("root.chat.c1"), operation: .decrement(by: 1))])
            let after = try await harness.get("/v1/users/dora/badges", token: token).tree()

            let answer = try await harness.get("/v1/users/dora/badges/changes?since=\(before.version)", token: token)
            #expect(answer.status == .ok)
            #expect(answer.headers[.eTag] == "\"\(after.version)\"")
            let delta = try JSONSerialization.jsonObject(with: Data(answer.text.utf8)) as? [String: Any]
            #expect(delta?["version"] as? Int64 == after.version)
            #expect(delta?["since"] as? Int64 == before.version)
            let changed = try #require(delta?["changed"] as? [[String: Any]])
            // Exactly the nodes whose display differs between the two trees.
            let expected = Self.differingNodes(before.tree, after.tree)
            #expect(changed.compactMap { $0["path"] as? String } == expected.map(\.path))
            for (node, want) in zip(changed, expected) {
                #expect(node["shown"] as? Bool == want.shown && node["count"] as? Int64 == want.count, "\(want.path)")
            }
            #expect(expected.map(\.path) == ["root", "root.chat", "root.chat.c2", "root.feed", "root.feed.f1", "root.news"])

            // A subtree only.
            let chat = try await harness.get("/v1/users/dora/badges/changes?since=\(before.version)&path=root.chat", token: token)
            #expect(chat.text.contains(#""path":"root.chat.c2""#) && !chat.text.contains(#""path":"root.news""#))

            let same = try await harness.get("/v1/users/dora/badges/changes?since=\(after.version)", token: token)
            #expect(same.status == .notModified)
            // The delta's ETag sent back: the client holds it already.
            var held = HTTPFields()
            held[.ifNoneMatch] = answer.headers[.eTag]
            let again = try await harness.get("/v1/users/dora/badges/changes?since=\(before.version)", token: token, headers: held)
            #expect(again.status == .notModified && again.headers[.eTag] == answer.headers[.eTag], "\(again.text)")
            let later = try await harness.get("/v1/users/dora/badges/changes?since=\(after.version + 5)", token: token)
            #expect(later.status == .gone && later.errorCode == "version_gone")
            for bad in ["", "?since=-1", "?since=x", "?since=1&paths=root.a", "?since=1&wait=5s"] {
                #expect(try await harness.get("/v1/users/dora/badges/changes\(bad)", token: token).status == .badRequest, "\(bad)")
            }

            // Past the retention, the log no longer reaches back: 410, and the client reads the tree.
            let pruned = try await harness.pool.withConnection { connection in
                try BadgeStore.pruneChangeLog(olderThan: Date().addingTimeInterval(60), limit: 1_000, on: connection)
            }
            // No feed ran here: everything pruned was unpublished.
            #expect(pruned.pruned > 0 && pruned.unpublished == pruned.pruned)
            let gone = try await harness.get("/v1/users/dora/badges/changes?since=\(before.version)", token: token)
            #expect(gone.status == .gone)
            #expect(gone.text.contains("read the tree"))
        }
    }

    @Test("a muted node's broadcast stays out of its ancestors in trees, depth-limited reads and delta polls, which carry the mutes")
    func broadcastsUnderMutesAndModes() async throws {
        try await APIHarness.with { harness in
            _ = try await harness.store.storeAggregationModes(Self.modes)
            let token = try await harness.token("finn")
            let finn = user("finn")
            try await harness.apply([BadgeMutation(user: finn, path: path("root.chat.c1"), operation: .increment(by: 40))])
            let start = try await harness.get("/v1/users/finn/badges", token: token).tree()
            // A broadcast two levels below root.chat, which counts chats (`children`): one more
            // chat, also for a read that stops at depth 1 and never sees the chat itself.
            try await harness.broadcast("welcome", at: "root.chat.welcome.tour", count: 3)
            let shallow = try await harness.get("/v1/users/finn/badges?depth=1", token: token).tree()
            #expect(shallow.tree?.count == 2 && shallow.tree?.children.first { $0.path.rawValue == "root.chat" }?.count == 2)
            // Muting the chat that holds the broadcast takes it out of root.chat and the root.
            try await harness.apply([BadgeMutation(user: finn, path: path("root.chat.welcome"), operation: .mute(until: nil))])
            let muted = try await harness.get("/v1/users/finn/badges", token: token).tree()
            #expect(muted.tree?.count == 1, "the app icon: one chat, the muted one not counted")
            let welcome = try #require(muted.tree?.children.first { $0.path.rawValue == "root.chat" }?.children.first { $0.path.rawValue == "root.chat.welcome" })
            #expect(welcome.count == 3 && welcome.unseen == 3, "the muted chat shows the broadcast inside")
            let depthOne = try await harness.get("/v1/users/finn/badges?depth=1", token: token).tree()
            #expect(depthOne.tree?.count == 1)

            let delta = try await harness.get("/v1/users/finn/badges/changes?since=\(start.version)", token: token)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(delta.text.utf8)) as? [String: Any])
            let mutes = try #require(object["mutes"] as? [[String: Any]], "a delta poll carries the mutes that changed")
            #expect(mutes.compactMap { $0["path"] as? String } == ["root.chat.welcome"])
            let changed = try #require(object["changed"] as? [[String: Any]])
            // root.chat and the root were at one chat before the broadcast and are again: not in
            // the answer; the muted chat and its broadcast are.
            #expect(changed.compactMap { $0["path"] as? String } == ["root.chat.welcome", "root.chat.welcome.tour"])
            // Since a version with the same mutes: no "mutes" key.
            try await harness.apply([BadgeMutation(user: finn, path: path("root.chat.c1"), operation: .increment(by: 1))])
            let later = try await harness.get("/v1/users/finn/badges/changes?since=\(muted.version)", token: token)
            #expect(later.status == .ok && !later.text.contains("mutes"))
            // The change log's root total (the change feed's app-icon number) agrees.
            let logged = try await harness.scalar(
                "SELECT root_count FROM badge_change WHERE user_id = 'finn' ORDER BY version DESC LIMIT 1", as: Int64.self)
            #expect(logged == 1)
        }
    }

    @Test("a stream that reconnects with Last-Event-ID gets exactly the versions it missed, in order; past the log, a snapshot")
    func streamResume() async throws {
        try await APIHarness.with { harness in
            let port = try #require(harness.client.port)
            let token = try await harness.token("eve")
            let eve = user("eve")
            try await harness.apply([BadgeMutation(user: eve, path: path("root.chat.c1"), operation: .increment(by: 1))])
            let stream = try EventStreamClient(port: port, uri: "/v1/users/eve/badges/stream", headers: ["Authorization": "Bearer \(token)"])
            let snapshot = try #require(await stream.next())
            #expect(snapshot.name == "snapshot")
            let last = try #require(snapshot.id)

            var versions: [String] = []
            for step in 0..<5 {
                let changed = try await harness.apply([
                    BadgeMutation(user: eve, path: path("root.chat.c\(step % 3)"), operation: .increment(by: Int64(step + 1)))
                ])
                versions.append(String(try #require(changed[eve])))
            }
            let resumed = try EventStreamClient(
                port: port, uri: "/v1/users/eve/badges/stream", headers: ["Authorization": "Bearer \(token)", "Last-Event-ID": last])
            var received: [EventStreamClient.Event] = []
            while let event = await resumed.next(timeout: .milliseconds(800)) { received.append(event) }
            #expect(received.map(\.name) == Array(repeating: "change", count: 5))
            #expect(received.map(\.id) == versions.map(Optional.some))
            #expect(received.last?.data.contains(#"{"count":8,"icon":null,"path":"root.chat.c1","shown":true"#) == true, "\(received.last?.data ?? "")")

            _ = try await harness.pool.withConnection { connection in
                try BadgeStore.pruneChangeLog(olderThan: Date().addingTimeInterval(60), limit: 1_000, on: connection)
            }
            let stale = try EventStreamClient(
                port: port, uri: "/v1/users/eve/badges/stream", headers: ["Authorization": "Bearer \(token)", "Last-Event-ID": last])
            let fresh = try #require(await stale.next())
            #expect(fresh.name == "snapshot" && fresh.id == versions.last)
        }
    }

    /// The nodes whose display differs between two trees, by path.
    static func differingNodes(_ old: BadgeNode?, _ new: BadgeNode?) -> [(path: String, shown: Bool, count: Int64)] {
        func flatten(_ node: BadgeNode?) -> [String: BadgeNode] {
            var nodes: [String: BadgeNode] = [:]
            func visit(_ node: BadgeNode) {
                if node.shown {
                    var leaf = node
                    leaf.children = []
                    nodes[node.path.rawValue] = leaf
                }
                node.children.forEach(visit)
            }
            if let node { visit(node) }
            return nodes
        }
        let before = flatten(old), after = flatten(new)
        var paths = Set(after.keys.filter { before[$0] != after[$0] })
        paths.formUnion(before.keys.filter { after[$0] == nil })
        return paths.sorted().map { (path: $0, shown: after[$0] != nil, count: after[$0]?.count ?? 0) }
    }
}
