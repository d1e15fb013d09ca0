import BadgeCore
import Foundation
import TestSupport
import Testing

@Suite("Coalescing a batch")
struct BadgeBatchTests {
    func batch(_ mutations: [(String, String, BadgeOperation)], expiresAt: Date? = nil) throws -> BadgeBatch {
        var batch = BadgeBatch()
        for (userText, pathText, operation) in mutations {
            batch.append(
                BadgeMutation(user: user(userText), path: path(pathText), operation: operation, expiresAt: expiresAt))
        }
        return batch
    }

    func writes(_ batch: BadgeBatch) -> [String] {
        batch.writes.map { "\($0.user) \($0.path) \($0.write)" }
    }

    @Test("an empty batch")
    func empty() {
        let batch = BadgeBatch()
        #expect(batch.isEmpty)
        #expect(batch.writes.isEmpty)
        #expect(batch.forcedClears.isEmpty)
        #expect(batch.users.isEmpty)
    }

    func increments(_ batch: BadgeBatch) -> [String] {
        batch.rounds.flatMap(\.increments).map { "\($0.user) \($0.path) +\($0.by)" }
    }

    @Test("a set is a write; increments stay apart, each with its time, applied after the writes")
    func compose() throws {
        let batch = try batch([
            ("u1", "root.a", .set(count: 2, icon: try icon("new"))),
            ("u1", "root.a", .increment(by: 3)),
            ("u1", "root.b", .increment(by: 1)),
            ("u1", "root.b", .increment(by: 4)),
        ])
        #expect(batch.writes.map(\.write) == [.set(count: 2, icon: try icon("new"), expiresAt: nil)])
        #expect(increments(batch) == ["u1 root.a +3", "u1 root.b +1", "u1 root.b +4"])
        #expect(batch.rounds.count == 1)
        #expect(!batch.isEmpty)
    }

    @Test("anything then set is the set; set then clear clears everything; a clear drops the increments it reaches")
    func laterWins() throws {
        let batch = try batch([
            ("u1", "root.a", .increment(by: 3)),
            ("u1", "root.a", .set(count: 1, icon: nil)),
            ("u1", "root.b", .set(count: 7, icon: nil)),
            ("u1", "root.b", .clear(force: false)),
            ("u1", "root.c", .increment(by: 5)),
            ("u1", "root.c", .clear(force: false)),
            ("u1", "root.c", .increment(by: 2)),
        ])
        // The sixth mutation (position 5): the read time in whole microseconds, plus 5.
        let clearTime = Date(timeIntervalSince1970: ((batch.now.timeIntervalSince1970 * 1_000_000).rounded() + 5) / 1_000_000).toMicroseconds
        #expect(batch.writes.map(\.write) == [
            .set(count: 1, icon: nil, expiresAt: nil),
            .clear(through: nil),
            .clear(through: clearTime),
        ])
        #expect(increments(batch) == ["u1 root.c +2"])
    }

    @Test("a decrement after an increment of its node, and a clear that leaves a later increment, start a new round")
    func rounds() throws {
        var batch = BadgeBatch()
        let user = user("u1")
        let a = path("root.a")
        let later = batch.now.addingTimeInterval(-1)
        batch.append(BadgeMutation(user: user, path: a, operation: .increment(by: 3), occurredAt: later))
        batch.append(BadgeMutation(user: user, path: a, operation: .decrement(by: 1)))
        #expect(batch.rounds.count == 2)
        batch.append(BadgeMutation(user: user, path: a, operation: .increment(by: 2), occurredAt: later))
        batch.append(BadgeMutation(user: user, path: a, operation: .clear(force: false), occurredAt: later.addingTimeInterval(-1)))
        #expect(batch.rounds.count == 3)
        #expect(batch.rounds.map { $0.writes.map(\.write) } == [[], [.decrement(by: 1)], [.clear(through: later.addingTimeInterval(-1).toMicroseconds)]])
    }

    @Test("a forced clear drops the pending increments it reaches; later increments within it stay")
    func forcedClear() throws {
        let batch = try batch([
            ("u1", "root.p.x", .increment(by: 3)),
            ("u1", "root.q", .increment(by: 1)),
            ("u1", "root.p", .clear(force: true)),
            ("u1", "root.p.y", .increment(by: 2)),
            ("u2", "root.p.x", .increment(by: 9)),
        ])
        #expect(batch.forcedClears.map { "\($0.user) \($0.path)" } == ["u1 root.p"])
        #expect(batch.writes.isEmpty)
        #expect(increments(batch) == ["u1 root.p.y +2", "u1 root.q +1", "u2 root.p.x +9"])
        #expect(batch.users.map(\.rawValue) == ["u1", "u2"])
    }

    @Test("forced clears are deduplicated: a wider one replaces narrower ones")
    func forcedClearDeduplication() throws {
        let batch = try batch([
            ("u1", "root.a.b", .clear(force: true)),
            ("u1", "root.a.c", .clear(force: true)),
            ("u1", "root.a", .clear(force: true)),
            ("u1", "root.a.b.c", .clear(force: true)),
            ("u1", "root.d", .clear(force: true)),
        ])
        // root.a.b.c's clear is later than root.a's: it reaches more increments, so it waits for
        // the next round.
        #expect(batch.rounds.map { $0.forcedClears.map(\.path.rawValue) } == [["root.a"], ["root.a.b.c", "root.d"]])
        #expect(batch.writes.isEmpty)
    }

    @Test("a no-op clear still names its user, and writes are ordered by user then path")
    func usersAndOrder() throws {
        let batch = try batch([
            ("u2", "root.b", .set(count: 1, icon: nil)),
            ("u1", "root.z", .clear(force: false)),
            ("u2", "root.a", .set(count: 1, icon: nil)),
        ])
        #expect(batch.users.map(\.rawValue) == ["u1", "u2"])
        #expect(batch.writes.map { "\($0.user) \($0.path)" } == ["u1 root.z", "u2 root.a", "u2 root.b"])
    }

    @Test("expiries: the later mutation's expiry wins when given, else the earlier one is kept")
    func expiries() throws {
        let soon = now.addingTimeInterval(10)
        let later = now.addingTimeInterval(100)
        var batch = BadgeBatch()
        let user = user("u1")
        let a = path("root.a")
        batch.append(BadgeMutation(user: user, path: a, operation: .set(count: 1, icon: nil), expiresAt: soon))
        batch.append(BadgeMutation(user: user, path: a, operation: .increment(by: 1)))
        #expect(batch.writes.first?.write == .set(count: 1, icon: nil, expiresAt: soon))
        #expect(batch.rounds[0].increments.map(\.expiresAt) == [nil])
        batch.append(BadgeMutation(user: user, path: a, operation: .increment(by: 1), expiresAt: later))
        #expect(batch.rounds[0].increments.map(\.expiresAt) == [later, later])
    }

    @Test("property: applying the coalesced batches equals applying the mutations one by one")
    func contract() throws {
        let users = ["u1", "u2", "u3"].map(user)
        let instants = [now.addingTimeInterval(-50), now.addingTimeInterval(30), now.addingTimeInterval(90)]
        for seed in UInt64(1)...600 {
            var generator = RandomBadgeOperations(users: users, seed: seed)
            generator.expiries = instants
            // Random prior states, some of them expired.
            var sequential: [UserID: BadgeTree] = [:]
            for mutation in generator.sequence(count: generator.integer(in: 0...25)) {
                sequential[mutation.user, default: BadgeTree()].apply(mutation, now: now)
            }
            var coalesced = sequential
            // Mutations of the batches carry only future expiries (see BadgeBatch's documentation).
            generator.expiries = Array(instants.dropFirst())
            let mutations = generator.sequence(count: generator.integer(in: 1...60))
            var start = 0
            while start < mutations.count {
                let end = min(mutations.count, start + generator.integer(in: 1...20))
                var batch = BadgeBatch()
                for mutation in mutations[start..<end] {
                    batch.append(mutation)
                    sequential[mutation.user, default: BadgeTree()].apply(mutation, now: now)
                }
                #expect(Set(batch.users) == Set(mutations[start..<end].map(\.user)))
                for round in batch.rounds {
                    let paths = round.writes.map { "\($0.user)/\($0.path)" }
                    #expect(Set(paths).count == paths.count, "one write per (user, path) and round, seed \(seed)")
                }
                for user in batch.users {
                    coalesced[user, default: BadgeTree()].apply(batch, for: user, now: now)
                }
                start = end
            }
            for user in users {
                let expected = sequential[user] ?? BadgeTree()
                let actual = coalesced[user] ?? BadgeTree()
                #expect(actual == expected, "seed \(seed), user \(user)")
                if actual != expected { return }
            }
        }
    }
}
