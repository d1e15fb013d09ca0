@testable import BadgeAPI
import BadgeCore
import BadgeStore
import Foundation
import NIOCore
import TestSupport
import Testing

@Suite("The hand-written tree JSON")
struct TreeJSONTests {
    @Test("writes exactly what JSONEncoder with sorted keys writes, for random trees, mutes and awkward user ids")
    func sameAsFoundation() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let users = [#"a"b\c/d"#, "u42", "x~!%{}"].map { user($0) }
        var generator = RandomBadgeOperations(users: users, seed: 99)
        generator.expiries = []
        var trees: [UserID: BadgeTree] = [:]
        let now = Date()
        for round in 0..<300 {
            let mutation = generator.next()
            trees[mutation.user, default: BadgeTree()].apply(mutation, now: now)
            let tree = trees[mutation.user] ?? BadgeTree()
            for path in [BadgePath.root, mutation.path] {
                let answer = UserBadgeTree(
                    user: mutation.user, version: Int64(round), tree: tree.node(at: path, now: now, display: BadgeDisplay(countCap: 9)),
                    mutes: tree.mutedNodes(at: now).filter { $0.concerns(path) })
                let expected = String(decoding: try encoder.encode(answer), as: UTF8.self) + "\n"
                #expect(String(buffer: TreeJSON.encode(answer)) == expected)
            }
        }
    }

    @Test("a stream's change event: exactly what JSONEncoder with sorted keys writes, with and without mutes")
    func changeEventSameAsFoundation() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let users = [#"a"b\c/d"#, "u42", "x~!%{}"].map { user($0) }
        var generator = RandomBadgeOperations(users: users, seed: 7)
        generator.expiries = []
        var trees: [UserID: BadgeTree] = [:]
        var before: [UserID: UserBadgeTree] = [:]
        let now = Date()
        var events = 0
        for round in 0..<300 {
            let mutation = generator.next()
            trees[mutation.user, default: BadgeTree()].apply(mutation, now: now)
            let tree = trees[mutation.user] ?? BadgeTree()
            let after = UserBadgeTree(
                user: mutation.user, version: Int64(round + 1), tree: tree.node(at: .root, now: now, display: BadgeDisplay(countCap: 9)),
                mutes: tree.mutedNodes(at: now))
            let previous = before[mutation.user] ?? UserBadgeTree(user: mutation.user, version: 0, tree: nil, mutes: [])
            before[mutation.user] = after
            let changed = StreamController.changedNodes(from: previous.tree, to: after.tree)
            for mutes in [nil, after.mutes] {
                let change = TreeChange(user: after.user, version: after.version, changed: changed, mutes: mutes)
                let expected = String(decoding: try encoder.encode(change), as: UTF8.self) + "\n"
                #expect(String(buffer: TreeJSON.encode(change)) == expected)
            }
            if !changed.isEmpty { events += 1 }
        }
        #expect(events > 100, "the random operations changed too little to compare: \(events) changes")
    }
}
