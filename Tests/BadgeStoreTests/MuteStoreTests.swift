import BadgeCore
import BadgeStore
import Foundation
import LibPQ
import TestSupport
import Testing

@Suite("Mute and snooze in PostgreSQL: ancestors, the root total, the change log and the wake")
struct MuteStoreTests {
    func path(_ text: String) throws -> BadgePath { try BadgePath(validating: text) }

    /// 40 + 1 messages in two chats and 2 in the inbox, rolled up.
    func chats(_ fixture: StoreFixture, for user: UserID) async throws {
        try await fixture.ingest([
            BadgeMutation(user: user, path: try path("root.chat.c1"), operation: .increment(by: 40)),
            BadgeMutation(user: user, path: try path("root.chat.c2"), operation: .increment(by: 1)),
            BadgeMutation(user: user, path: try path("root.inbox"), operation: .increment(by: 2)),
        ])
        try await fixture.drainDirtyUsers()
    }

    /// The user's last change-log record: version, root totals and the logged mutes.
    func lastRecord(_ fixture: StoreFixture, _ user: UserID) async throws -> (version: Int64, count: Int64, unseen: Int64, mutes: String?) {
        try await fixture.pool.withConnection { connection in
            let row = try #require(
                try connection.query(
                    PGStatement(
                        "test.last_change",
                        "SELECT version, root_count, root_unseen, mutes::text FROM badge_change WHERE user_id = $1 ORDER BY version DESC LIMIT 1",
                        prepared: false),
                    [user.rawValue]
                ).rows.first)
            return (try row.decode(0, as: Int64.self), try row.decode(1, as: Int64.self), try row.decode(2, as: Int64.self),
                    try row.decode(3, as: String?.self))
        }
    }

    @Test("a muted chat keeps its numbers, gives root.chat and the root nothing, is listed in the answer and logged; unmute restores")
    func mutedChat() async throws {
        let fixture = try await StoreFixture.make()
        try await tearingDown({ await fixture.tearDown() }) {
            let alice = user("mute_alice")
            try await chats(fixture, for: alice)
            let before = try await fixture.store.tree(for: alice)
            #expect(before.tree?.count == 43 && before.mutes.isEmpty)

            try await fixture.ingest([BadgeMutation(user: alice, path: try path("root.chat.c1"), operation: .mute(until: nil))])
            try await fixture.drainDirtyUsers()
            let muted = try await fixture.store.tree(for: alice)
            #expect(muted.version == before.version + 1)
            #expect(muted.tree?.count == 3 && muted.tree?.unseen == 3, "the app icon: 1 chat message + 2 inbox")
            let chat = try #require(muted.tree?.children.first { $0.path.rawValue == "root.chat" })
            #expect(chat.count == 1 && chat.unseen == 1)
            #expect(chat.children.map(\.path.rawValue) == ["root.chat.c1", "root.chat.c2"], "the muted chat shows in place")
            #expect(chat.children.first?.count == 40)
            #expect(muted.mutes == [MutedNode(path: try path("root.chat.c1"), until: nil)])
            // The app reads the muted chat itself: its numbers are kept.
            let inside = try await fixture.store.tree(for: alice, at: try path("root.chat.c1"))
            #expect(inside.tree?.count == 40 && inside.tree?.unseen == 40)
            #expect(inside.mutes.map(\.path.rawValue) == ["root.chat.c1"])
            let logged = try await lastRecord(fixture, alice)
            #expect(logged.count == 3 && logged.unseen == 3)
            #expect(logged.mutes == #"[["root.chat.c1", null]]"#)

            // New messages in the muted chat reach no ancestor (the delta is recounted, not added).
            try await fixture.ingest([BadgeMutation(user: alice, path: try path("root.chat.c1"), operation: .increment(by: 5))])
            try await fixture.drainDirtyUsers()
            let more = try await fixture.store.tree(for: alice)
            #expect(more.tree?.count == 3)
            #expect(try await fixture.store.tree(for: alice, at: try path("root.chat.c1")).tree?.count == 45)
            #expect(try await lastRecord(fixture, alice).mutes == nil, "a version that changed no mute logs none")

            // An older mute arriving late changes nothing; the unmute brings the chat back.
            try await fixture.ingest([
                BadgeMutation(user: alice, path: try path("root.chat.c1"), operation: .unmute),
                BadgeMutation(
                    user: alice, path: try path("root.chat.c1"), operation: .mute(until: nil), occurredAt: Date(timeIntervalSinceNow: -3_600)),
            ])
            try await fixture.drainDirtyUsers()
            let unmuted = try await fixture.store.tree(for: alice)
            #expect(unmuted.tree?.count == 48 && unmuted.mutes.isEmpty)
            #expect(try await lastRecord(fixture, alice).mutes == "[]")
            #expect(try await BadgeVerifier(store: fixture.store).run(repair: false).mismatches == 0)
        }
    }

    @Test("a mute of a node with nothing shown is a new version listing it; an unmute of a node never muted is none")
    func versions() async throws {
        let fixture = try await StoreFixture.make()
        try await tearingDown({ await fixture.tearDown() }) {
            let bob = user("mute_bob")
            try await chats(fixture, for: bob)
            let start = try await fixture.store.tree(for: bob)
            try await fixture.ingest([BadgeMutation(user: bob, path: try path("root.chat.c9"), operation: .unmute)])
            try await fixture.drainDirtyUsers()
            #expect(try await fixture.store.tree(for: bob).version == start.version)
            try await fixture.ingest([BadgeMutation(user: bob, path: try path("root.chat.c9"), operation: .mute(until: nil))])
            try await fixture.drainDirtyUsers()
            let muted = try await fixture.store.tree(for: bob)
            #expect(muted.version == start.version + 1 && muted.tree?.count == 43)
            #expect(muted.mutes.map(\.path.rawValue) == ["root.chat.c9"])
            // Again: nothing new.
            try await fixture.ingest([BadgeMutation(user: bob, path: try path("root.chat.c9"), operation: .mute(until: nil))])
            try await fixture.drainDirtyUsers()
            #expect(try await fixture.store.tree(for: bob).version == muted.version)
        }
    }

    @Test("a snooze ends on its own time: the rollup's sweep wakes it, the chat counts again and what arrived meanwhile is unseen")
    func snoozeEnds() async throws {
        let fixture = try await StoreFixture.make()
        try await tearingDown({ await fixture.tearDown() }) {
            // The snooze must outlast three small batches and a rollup: well under a second alone,
            // but a CI machine running the whole suite on two cores once took over ten. A run
            // that took longer than its snooze tries again with a longer one and a new user,
            // after the sweep has woken the one that ended.
            var attempt: (user: UserID, end: Date, snoozed: UserBadgeTree)?
            for (index, seconds) in [10.0, 30, 90].enumerated() {
                let cleo = user("mute_cleo\(index)")
                try await chats(fixture, for: cleo)
                try await fixture.ingest([BadgeMutation(user: cleo, path: .root, operation: .seen)])
                let end = Date().addingTimeInterval(seconds)
                try await fixture.ingest([BadgeMutation(user: cleo, path: try path("root.chat"), operation: .mute(until: end))])
                try await fixture.ingest([BadgeMutation(user: cleo, path: try path("root.chat.c2"), operation: .increment(by: 4))])
                try await fixture.drainDirtyUsers()
                let snoozed = try await fixture.store.tree(for: cleo)
                if Date() < end {
                    attempt = (cleo, end, snoozed)
                    break
                }
                _ = try await fixture.pool.withTransaction { try BadgeStore.wakeSnoozes(limit: 100, on: $0) }
                try await fixture.drainDirtyUsers()
            }
            let (cleo, end, snoozed) = try #require(attempt, "ingest and rollup took longer than a 90 s snooze")
            #expect(snoozed.tree?.count == 2 && snoozed.tree?.unseen == 0, "only the inbox, seen")
            #expect(snoozed.mutes.map(\.path.rawValue) == ["root.chat"])
            #expect(abs((snoozed.mutes.first?.until ?? .distantPast).timeIntervalSince(end)) < 0.001)
            // Before the end the sweep wakes nothing.
            #expect(try await fixture.pool.withTransaction { try BadgeStore.wakeSnoozes(limit: 100, on: $0) } == 0)

            try await Task.sleep(for: .milliseconds(Int(max(end.timeIntervalSinceNow, 0) * 1_000) + 50))
            #expect(try await fixture.pool.withTransaction { try BadgeStore.wakeSnoozes(limit: 100, on: $0) } == 1)
            try await fixture.drainDirtyUsers()
            let woken = try await fixture.store.tree(for: cleo)
            #expect(woken.version == snoozed.version + 1)
            #expect(woken.tree?.count == 47 && woken.tree?.unseen == 4, "the 4 that arrived during the snooze are unseen")
            #expect(woken.mutes.isEmpty)
            let logged = try await lastRecord(fixture, cleo)
            #expect(logged.count == 47 && logged.unseen == 4 && logged.mutes == "[]")
            #expect(try await fixture.pool.withTransaction { try BadgeStore.wakeSnoozes(limit: 100, on: $0) } == 0, "woken once")
        }
    }

    @Test("random operations with mutes, snoozes and unmutes in random arrival orders end as the in-order model", arguments: [UInt64(11), 12, 13])
    func randomArrivalOrders(seed: UInt64) async throws {
        let fixture = try await StoreFixture.make()
        try await tearingDown({ await fixture.tearDown() }) {
            let users = (0..<40).map { user("mo\(seed)_u\($0)") }
            var generator = RandomBadgeOperations(users: users, seed: seed)
            generator.weights = .orderFree
            generator.weights.mute = 4
            let now = Date()
            let mutations = generator.sequence(count: 1_500)
            var models: [UserID: BadgeTree] = [:]
            for mutation in mutations { models[mutation.user, default: BadgeTree()].apply(mutation, now: now) }
            var random = SeededRandom(seed: seed &* 31)
            var shuffled = mutations.shuffled(using: &random)
            while !shuffled.isEmpty {
                let size = min(Int.random(in: 1...200, using: &random), shuffled.count)
                var batch = BadgeBatch(now: now)
                batch.append(contentsOf: shuffled.prefix(size))
                shuffled.removeFirst(size)
                try await fixture.ingest(batch)
                if Bool.random(using: &random) { _ = try await fixture.drainCountingDeltas(batchSize: 25) }
            }
            try await fixture.drainDirtyUsers()
            for id in users {
                let model = models[id, default: BadgeTree()]
                let stored = try await fixture.store.tree(for: id)
                #expect(stored.tree == model.node(at: .root, now: now), "user \(id) (seed \(seed))")
                #expect(stored.mutes == model.mutedNodes(at: now), "mutes of \(id) (seed \(seed))")
            }
            #expect(try await BadgeVerifier(store: fixture.store).run(repair: false).mismatches == 0)
        }
    }
}
