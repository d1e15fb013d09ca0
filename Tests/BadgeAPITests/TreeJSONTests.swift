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
}
