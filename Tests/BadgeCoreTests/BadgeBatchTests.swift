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

    func time(_ batch: BadgeBatch, position: Int) -> Date {
        // The read time in whole microseconds, plus the position.
        Date(timeIntervalSince1970: ((batch.now.timeIntervalSince1970 * 1_000_000).rounded() + Double(position)) / 1_000_000).toMicroseconds
    }

    @Test("a batch restricted to some users writes for each of them what the whole batch writes, and nothing for the others", arguments: [UInt64(1), 2, 3])
    func restrictedToUsers(seed: UInt64) {
        let users = (0..<12).map { user("r\(seed)_u\($0)") }
        var generator = RandomBadgeOperations(users: users, seed: seed)
        let now = Date()
        var whole = BadgeBatch(now: now)
        whole.append(contentsOf: generator.sequence(count: 400))
        let kept = Set(users.prefix(5))
        let part = whole.restricted(to: kept)
        #expect(part.users == whole.users.filter(kept.contains))
        #expect(part.additiveUsers == whole.additiveUsers.filter(kept.contains))
        #expect(part.dismissals.count == whole.dismissals.filter { kept.contains($0.user) }.count)
        #expect(part.broadcastSeens.count == whole.broadcastSeens.filter { kept.contains($0.user) }.count)
        for id in users {
            var fromWhole = BadgeTree(), fromPart = BadgeTree()
            fromWhole.apply(whole, for: id, now: now)
            fromPart.apply(part, for: id, now: now)
            let expected = kept.contains(id) ? fromWhole.node(at: .root, now: now) : BadgeTree().node(at: .root, now: now)
            #expect(fromPart.node(at: .root, now: now) == expected, "user \(id)")
            #expect(fromPart.mutedNodes(at: now) == (kept.contains(id) ? fromWhole.mutedNodes(at: now) : []), "mutes of \(id)")
        }
    }

    @Test("an empty batch")
    func empty() {
        let batch = BadgeBatch()
        #expect(batch.isEmpty)
        #expect(batch.sets.isEmpty)
        #expect(batch.clearMarks.isEmpty)
        #expect(batch.increments.isEmpty)
        #expect(batch.users.isEmpty)
    }

    func increments(_ batch: BadgeBatch) -> [String] {
        batch.increments.map { "\($0.user) \($0.path) \($0.by > 0 ? "+" : "")\($0.by)" }
    }

    @Test("a set is kept with its time; increments and decrements stay apart, each with its time")
    func compose() throws {
        let batch = try batch([
            ("u1", "root.a", .set(count: 2, icon: try icon("new"))),
            ("u1", "root.a", .increment(by: 3)),
            ("u1", "root.b", .increment(by: 1)),
            ("u1", "root.b", .decrement(by: 4)),
        ])
        #expect(batch.sets.map(\.set) == [BadgeSet(count: 2, icon: try icon("new"), expiresAt: nil, at: time(batch, position: 0))])
        #expect(increments(batch) == ["u1 root.a +3", "u1 root.b +1", "u1 root.b -4"])
        #expect(!batch.isEmpty)
    }

    @Test("of two sets the later-timed holds, whatever the order they arrive in; a clear drops the sets and increments it reaches by time")
    func laterWins() throws {
        var batch = BadgeBatch()
        let u1 = user("u1")
        let early = batch.now.addingTimeInterval(-10).toMicroseconds
        let late = batch.now.addingTimeInterval(-5).toMicroseconds
        batch.append(BadgeMutation(user: u1, path: path("root.a"), operation: .set(count: 5, icon: nil), occurredAt: late))
        batch.append(BadgeMutation(user: u1, path: path("root.a"), operation: .set(count: 1, icon: nil), occurredAt: early))
        batch.append(BadgeMutation(user: u1, path: path("root.b"), operation: .set(count: 7, icon: nil), occurredAt: early))
        batch.append(BadgeMutation(user: u1, path: path("root.b"), operation: .clear(force: false), occurredAt: late))
        batch.append(BadgeMutation(user: u1, path: path("root.c"), operation: .increment(by: 5), occurredAt: early))
        batch.append(BadgeMutation(user: u1, path: path("root.c"), operation: .increment(by: 2)))
        batch.append(BadgeMutation(user: u1, path: path("root.c"), operation: .clear(force: false), occurredAt: late))
        batch.append(BadgeMutation(user: u1, path: path("root"), operation: .clear(force: true), occurredAt: early))
        #expect(batch.sets.map { "\($0.path) \($0.set.count)" } == ["root.a 5"])
        #expect(increments(batch) == ["u1 root.c +2"])
        #expect(batch.clearMarks.allSatisfy { $0.through == late || $0.path == .root })
        #expect(batch.clearMarks.map { "\($0.path) \($0.subtree)" } == ["root true", "root.b false", "root.c false"])
    }

    @Test("a no-op clear still names its user, and sets are ordered by user then path")
    func usersAndOrder() throws {
        let batch = try batch([
            ("u2", "root.b", .set(count: 1, icon: nil)),
            ("u1", "root.z", .clear(force: false)),
            ("u2", "root.a", .set(count: 1, icon: nil)),
        ])
        #expect(batch.users.map(\.rawValue) == ["u1", "u2"])
        #expect(batch.sets.map { "\($0.user) \($0.path)" } == ["u2 root.a", "u2 root.b"])
    }

    @Test("the users stay in order as a batch grows, and a copy that grows apart keeps its own")
    func usersAfterGrowth() throws {
        var batch = try batch([("u3", "root.a", .increment(by: 1)), ("u1", "root.a", .increment(by: 1))])
        #expect(batch.users.map(\.rawValue) == ["u1", "u3"])
        let copy = batch
        batch.append(BadgeMutation(user: user("u2"), path: path("root.b"), operation: .increment(by: 2)))
        batch.append(BadgeMutation(user: user("u0"), path: path("root.b"), operation: .set(count: 1, icon: nil)))
        #expect(batch.users.map(\.rawValue) == ["u0", "u1", "u2", "u3"])
        #expect(batch.additiveUsers.map(\.rawValue) == ["u1", "u2", "u3"])
        #expect(increments(batch) == ["u1 root.a +1", "u2 root.b +2", "u3 root.a +1"])
        #expect(batch.sets.map(\.user.rawValue) == ["u0"])
        #expect(copy.users.map(\.rawValue) == ["u1", "u3"])
        #expect(increments(copy) == ["u1 root.a +1", "u3 root.a +1"])
        // Another mutation of a user already in it keeps the order.
        batch.append(BadgeMutation(user: user("u3"), path: path("root.c"), operation: .increment(by: 1)))
        #expect(batch.users.map(\.rawValue) == ["u0", "u1", "u2", "u3"])
        #expect(increments(batch) == ["u1 root.a +1", "u2 root.b +2", "u3 root.a +1", "u3 root.c +1"])
    }

    @Test("expiries: a set's comes with it; each increment carries its own")
    func expiries() throws {
        let soon = now.addingTimeInterval(10)
        let later = now.addingTimeInterval(100)
        var batch = BadgeBatch()
        let user = user("u1")
        let a = path("root.a")
        batch.append(BadgeMutation(user: user, path: a, operation: .set(count: 1, icon: nil), expiresAt: soon))
        batch.append(BadgeMutation(user: user, path: a, operation: .increment(by: 1)))
        #expect(batch.sets.first?.set.expiresAt == soon)
        #expect(batch.increments.map(\.expiresAt) == [nil])
        batch.append(BadgeMutation(user: user, path: a, operation: .increment(by: 1), expiresAt: later))
        #expect(batch.increments.map(\.expiresAt) == [nil, later])
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
                let paths = batch.sets.map { "\($0.user)/\($0.path)" }
                #expect(Set(paths).count == paths.count, "one set per (user, path), seed \(seed)")
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
