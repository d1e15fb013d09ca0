import BadgeCore
import BadgeIngest
import BadgeStore
import Foundation
import LibPQ
import TestSupport
import Synchronization
import Testing

/// Issue 28, "a user's data on request": an export holds every row RedDot keeps on the user, an
/// erasure removes them all (and nobody else's), and events for the erased user still on their
/// way stay out.
@Suite("A user's data on request: export and erase")
struct UserDataTests {
    /// The rows of `user` in each per-user table.
    func rowCounts(_ user: String, _ fixture: IngestFixture) async throws -> [String: Int] {
        var counts: [String: Int] = [:]
        for table in UserData.tables {
            counts[table] = try await fixture.scalar("SELECT count(*)::int FROM \(table) WHERE user_id = $1", [user], as: Int.self)
        }
        return counts
    }

    func exported(_ user: String, _ fixture: IngestFixture) async throws -> (tables: [String: [Any]], deadLetters: [Any]) {
        let json = try await fixture.store.exportUser(TestSupport.user(user))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        #expect(object["user"] as? String == user)
        #expect(object["exported_at"] is String)
        let tables = try #require(object["tables"] as? [String: [Any]])
        #expect(Set(tables.keys) == Set(UserData.tables), "the export names every per-user table")
        return (tables, try #require(object["dead_letters"] as? [Any]))
    }

    @Test("an export holds the user's rows of every table they are in; an erasure removes them all, and nobody else's")
    func exportAndErase() async throws {
        try await IngestFixture.with { fixture in
            let batches = SequentialBatches(fixture, drain: true)
            try await batches.commit([
                ("*", #"{"id":"b1","op":"set","audience":"all","path":"root.promo","count":1}"#),
                ("ua", #"{"id":"u1","op":"incr","users":["ua","ub"],"path":"root.chat.c1","by":3}"#),
                ("ua", #"{"id":"u2","op":"add","user":"ua","path":"root.inbox","item":"m1"}"#),
                ("ua", #"{"id":"u3","op":"add","user":"ua","path":"root.inbox","item":"m2"}"#),
                ("ua", #"{"id":"u4","op":"set","user":"ua","path":"root.feed","count":2}"#),
                ("ua", #"{"id":"u5","op":"incr","user":"ua","path":"root.feed","by":4}"#),
                ("ua", #"{"id":"bad", "user":"ua", "op": }"#),
                ("ub", #"{"id":"v1","op":"incr","user":"ub","path":"root.chat.c2"}"#),
                ("ub", #"{"id":"bad2", "user":"ub", "op": }"#),
            ])
            try await batches.commit([
                ("ua", #"{"id":"u6","op":"remove","user":"ua","path":"root.inbox","item":"m2"}"#),
                ("ua", #"{"id":"u7","op":"seen","user":"ua","path":"root.chat"}"#),
                ("ua", #"{"id":"u8","op":"mute","user":"ua","path":"root.feed"}"#),
                ("ua", #"{"id":"u9","op":"clear","user":"ua","path":"root.chat.c1"}"#),
                ("ua", #"{"id":"u10","op":"clear","user":"ua","path":"root.promo"}"#),
                ("ua", #"{"id":"u11","op":"seen","user":"ua","path":"root"}"#),
            ])
            _ = try await fixture.store.act(.seen, at: path("root.inbox"), for: user("ua"), seenVersion: nil, actionID: try ActionID(validating: "a1"))
            // A device and the push feed's position, a pending webhook delivery and the webhooks' position, for both.
            try await fixture.pool.withConnection { connection in
                for name in ["ua", "ub"] {
                    try PushStore.register(try PushDevice(id: "phone", platform: "apns", token: "t-\(name)", appID: "com.example.app"), for: user(name), on: connection)
                }
                _ = try PushStore.follow(["ua": (3, 7, nil), "ub": (1, 1, Date())], on: connection)
                _ = try WebhookStore.record(
                    ["ua", "ub"].map { WebhookStore.NewDelivery(subscription: "crm", user: $0, id: "msg_\($0)", kind: "root", payload: "{}") },
                    positions: ["ua": WebhookStore.UserPosition(ownVersion: 3, root: BadgeAggregate(count: 7)), "ub": WebhookStore.UserPosition(ownVersion: 1, root: BadgeAggregate(count: 1))],
                    on: connection)
            }
            let other = try await fixture.store.tree(for: user("ub"))
            let otherRows = try await rowCounts("ub", fixture)

            let before = try await exported("ua", fixture)
            let counts = try await rowCounts("ua", fixture)
            for table in UserData.tables {
                #expect(before.tables[table]?.count == counts[table], "\(table): exported \(before.tables[table]?.count ?? -1), stored \(counts[table] ?? -1)")
            }
            let held = Set(counts.filter { $0.value > 0 }.keys)
            let expected: Set<String> = [
                "applied_action_generation", "applied_user_event_generation", "badge_aggregate", "badge_change", "badge_clear_mark", "badge_increment",
                "badge_item", "badge_mute", "badge_seen_mark", "badge_state", "broadcast_clear", "push_device", "push_user", "user_version",
                "user_write", "webhook_delivery", "webhook_user",
            ]
            #expect(held.isSuperset(of: expected), "tables with rows of ua: \(held.sorted()); missing \(expected.subtracting(held).sorted())")
            #expect(before.deadLetters.count == 1, "\(before.deadLetters)")

            let erasure = try await fixture.store.eraseUser(user("ua"))
            #expect(erasure.settled)
            #expect(erasure.deadLetters == 1)
            #expect(erasure.rows.values.reduce(0, +) == counts.filter { $0.key != "erased_user" }.values.reduce(0, +))
            let after = try await rowCounts("ua", fixture)
            #expect(after.filter { $0.value > 0 } == ["erased_user": 1], "left of ua: \(after.filter { $0.value > 0 })")
            let exportedAfter = try await exported("ua", fixture)
            #expect(exportedAfter.tables.filter { !$0.value.isEmpty }.keys.sorted() == ["erased_user"])
            #expect(exportedAfter.deadLetters.isEmpty)
            // The tree of a user RedDot holds nothing on: the active broadcast alone.
            let tree = try await fixture.store.tree(for: user("ua"))
            var nobody = try await fixture.store.tree(for: user("nobody"))
            nobody.user = user("ua")
            #expect(tree == nobody, "\(tree)")

            // Nobody else's rows: ub's tree, version and rows, and ub's dead letter.
            #expect(try await fixture.store.tree(for: user("ub")) == other)
            #expect(try await rowCounts("ub", fixture) == otherRows)
            #expect(try await fixture.scalar("SELECT count(*)::int FROM rejected_record", as: Int.self) == 1)
        }
    }

    @Test("an event for an erased user still on its way is dropped (others of it still apply) until the mark expires")
    func lateEvents() async throws {
        try await IngestFixture.with { fixture in
            let batches = SequentialBatches(fixture, drain: true)
            try await batches.commit([("ua", #"{"id":"e1","op":"incr","user":"ua","path":"root.a","by":5}"#)])
            _ = try await fixture.store.eraseUser(user("ua"))
            let late = try await batches.commit([
                ("ua", #"{"id":"e2","op":"incr","user":"ua","path":"root.a"}"#),
                ("ua", #"{"id":"e3","op":"incr","users":["ua","ub"],"path":"root.b"}"#),
            ])
            #expect(late.erased == 1 && late.applied == 1, "\(late)")
            #expect(try await rowCounts("ua", fixture).filter { $0.value > 0 } == ["erased_user": 1])
            #expect(try await fixture.store.tree(for: user("ub"), at: path("root.b")).tree?.count == 1)

            // Once the mark is as old as the retention, ingest's prune removes it: events count again.
            let pruned = try await fixture.pool.withConnection { connection in
                try IngestTransaction.pruneAppliedEvents(olderThan: Date().addingTimeInterval(60), limit: 100, on: connection)
            }
            #expect(pruned > 0)
            let again = try await batches.commit([("ua", #"{"id":"e4","op":"incr","user":"ua","path":"root.a","by":2}"#)])
            #expect(again.applied == 1 && again.erased == 0)
            #expect(try await fixture.store.tree(for: user("ua"), at: path("root.a")).tree?.count == 2)
        }
    }

    @Test("erasing one user changes no other user's tree or version", arguments: [UInt64(1), 2, 3])
    func eraseOneLeavesOthers(seed: UInt64) async throws {
        try await IngestFixture.with { fixture in
            let users = (0..<20).map { user("e\(seed)_u\($0)") }
            var generator = RandomBadgeOperations(users: users, seed: seed)
            let batches = SequentialBatches(fixture, drain: true)
            var index = 0
            for _ in 0..<4 {
                let mutations = generator.sequence(count: 150)
                try await batches.commit(mutations, firstID: index)
                index += mutations.count
            }
            var trees: [UserID: UserBadgeTree] = [:]
            for id in users { trees[id] = try await fixture.store.tree(for: id) }
            let erased = users[generator.integer(in: 0...(users.count - 1))]
            _ = try await fixture.store.eraseUser(erased)
            for id in users where id != erased {
                #expect(try await fixture.store.tree(for: id) == trees[id], "user \(id) after erasing \(erased)")
            }
            #expect(try await fixture.store.tree(for: erased).version == 0)
        }
    }

    @Test("a batch that looked for the mark before it was there and commits after the first pass: the second pass removes what it wrote")
    func racingBatch() async throws {
        try await IngestFixture.with { fixture in
            let racer = PGPool(configuration: fixture.database.configuration, maximumConnections: 1, logger: TestServer.logger)
            defer { racer.close() }
            // The batch looks for marks (none yet), says so, and writes the user's rows once the
            // erasure's first pass has committed (it sees the mark then), `delay` later.
            func race(settle: Duration, _ name: String, delay: TimeInterval) async throws -> UserData.Erasure {
                let looked = Atomic<Bool>(false)
                let batch: Task<Void, any Error> = Task {
                    try await racer.withTransaction { connection in
                        let before = try UserData.erased(among: [name], on: connection)
                        looked.store(true, ordering: .releasing)
                        guard before.isEmpty else { return }
                        while try UserData.erased(among: [name], on: connection).isEmpty { Thread.sleep(forTimeInterval: 0.01) }
                        Thread.sleep(forTimeInterval: delay)
                        var mutations = BadgeBatch()
                        mutations.append(BadgeMutation(user: user(name), path: path("root.late"), operation: .increment(by: 1)))
                        try BadgeStore.applyMarked(mutations, conflicts: .merge, on: connection)
                    }
                }
                while !looked.load(ordering: .acquiring) { try await Task.sleep(for: .milliseconds(10)) }
                let erasure = try await fixture.store.eraseUser(user(name), settle: settle)
                try await batch.value
                return erasure
            }
            let waited = try await race(settle: .seconds(30), "racer1", delay: 0.2)
            #expect(waited.settled)
            #expect(try await rowCounts("racer1", fixture).filter { $0.value > 0 } == ["erased_user": 1])
            // Without the wait, the batch's rows outlive the erasure, and it says so.
            let hurried = try await race(settle: .zero, "racer2", delay: 2)
            #expect(!hurried.settled)
            #expect(try await rowCounts("racer2", fixture)["badge_increment"] == 1)
        }
    }
}
