import BadgeCore
import Foundation
import Testing

@Suite("Aggregation modes in the model and the rules file")
struct AggregationModeTests {
    func path(_ text: String) throws -> BadgePath { try BadgePath(validating: text) }

    func modes(_ pairs: [(String, AggregationMode)]) throws -> AggregationModes {
        AggregationModes(entries: try pairs.map { try AggregationModes.entry(pattern: $0.0, mode: $0.1) })
    }

    /// A tree with these increments (each unseen) and sets (a dot, count 0, seen).
    func tree(increments: [String: Int64], dots: [String] = []) throws -> BadgeTree {
        var tree = BadgeTree()
        let now = Date()
        for (text, by) in increments { tree.apply(.increment(by: by), at: try path(text), now: now) }
        for text in dots { tree.apply(.set(count: 0, icon: nil), at: try path(text), now: now) }
        return tree
    }

    @Test("patterns: exact labels and * for any one label; the first match wins; everything else sums")
    func patterns() throws {
        let declared = try modes([("root.chat.*", .exclude), ("root.chat", .children), ("root.*", .dot)])
        #expect(declared.mode(of: try path("root.chat")) == .children)
        #expect(declared.mode(of: try path("root.chat.c1")) == .exclude)
        #expect(declared.mode(of: try path("root.inbox")) == .dot)
        #expect(declared.mode(of: try path("root")) == .sum)
        #expect(declared.mode(of: try path("root.chat.c1.x")) == .sum)
        #expect(declared.entries[0].lquery == "root.chat.*{1}")
        #expect(declared.entries[0].pattern == "root.chat.*")
        for bad in ["chat", "root.", "root..a", "root.a-b", "root.**", "root.a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q", "root.*{1}"] {
            #expect(throws: RuleSetError.self, "\(bad)") { try AggregationModes.entry(pattern: bad, mode: .dot) }
        }
    }

    @Test("sum (no mode): a parent's count is its own plus its children's")
    func sumIsTheDefault() throws {
        let tree = try tree(increments: ["root.chat.c1": 40, "root.chat.c2": 1])
        let now = Date()
        #expect(tree.aggregates(now: now, modes: try modes([("root.chat", .sum)])) == tree.aggregates(now: now))
        #expect(tree.aggregates(now: now)[try path("root")]?.count == 41)
    }

    @Test("children: the number of shown children and of those with something unseen; the ancestors add that number")
    func children() throws {
        let tree = try tree(increments: ["root.chat.c1": 40, "root.chat.c2": 1, "root.chat": 5, "root.inbox": 2], dots: ["root.chat.c3"])
        let aggregates = tree.aggregates(now: Date(), modes: try modes([("root.chat", .children)]))
        #expect(aggregates[try path("root.chat")] == BadgeAggregate(count: 3, unseen: 2))
        #expect(aggregates[try path("root.chat.c1")]?.count == 40)
        #expect(aggregates[try path("root")] == BadgeAggregate(count: 5, unseen: 4))
    }

    @Test("dot: the node and what it gives its ancestors are 0, but they show; its children keep their numbers")
    func dot() throws {
        let tree = try tree(increments: ["root.discover.moments": 5])
        let aggregates = tree.aggregates(now: Date(), modes: try modes([("root.discover", .dot)]))
        #expect(aggregates[try path("root.discover")] == BadgeAggregate(count: 0, unseen: 0))
        #expect(aggregates[try path("root.discover.moments")]?.count == 5)
        #expect(aggregates[try path("root")] == BadgeAggregate(count: 0, unseen: 0))
        #expect(tree.node(at: .root, now: Date(), modes: try modes([("root.discover", .dot)]))?.text == nil)
    }

    @Test("exclude: counted in place; its ancestors show but add nothing of it, and a children parent does not count it")
    func exclude() throws {
        let tree = try tree(increments: ["root.chat.archived": 7, "root.chat.c1": 2])
        let plain = tree.aggregates(now: Date(), modes: try modes([("root.chat.archived", .exclude)]))
        #expect(plain[try path("root.chat.archived")]?.count == 7)
        #expect(plain[try path("root.chat")]?.count == 2)
        #expect(plain[try path("root")]?.count == 2)
        let counted = tree.aggregates(now: Date(), modes: try modes([("root.chat.archived", .exclude), ("root.chat", .children)]))
        #expect(counted[try path("root.chat")]?.count == 1)
        let alone = try self.tree(increments: ["root.archive": 3])
            .aggregates(now: Date(), modes: try modes([("root.archive", .exclude)]))
        #expect(alone[try path("root")] == BadgeAggregate(count: 0, unseen: 0), "the root shows (a dot), with no number")
    }

    @Test("nested modes: children inside children, a dot inside children")
    func nested() throws {
        let tree = try tree(increments: ["root.chat.groups.g1": 5, "root.chat.groups.g2": 1, "root.chat.c1": 3, "root.chat.muted.m1": 9])
        let aggregates = tree.aggregates(
            now: Date(), modes: try modes([("root.chat", .children), ("root.chat.groups", .children), ("root.chat.muted", .dot)]))
        #expect(aggregates[try path("root.chat.groups")] == BadgeAggregate(count: 2, unseen: 2))
        // groups, c1 and muted show; muted (a dot) has nothing unseen.
        #expect(aggregates[try path("root.chat")] == BadgeAggregate(count: 3, unseen: 2))
        #expect(aggregates[try path("root")] == BadgeAggregate(count: 3, unseen: 2))
    }

    @Test("the rules file declares modes; its errors name the entry and the problem")
    func rulesFile() throws {
        let rules = try RuleSet(
            yaml: """
                rules: []
                modes:
                  - path: root.chat
                    mode: children
                  - path: root.discover.*
                    mode: dot
                """)
        #expect(rules.declaresModes)
        #expect(rules.modes == (try modes([("root.chat", .children), ("root.discover.*", .dot)])))
        #expect(try !RuleSet(yaml: "rules: []").declaresModes)
        #expect(try RuleSet(yaml: "rules: []\nmodes: []").declaresModes)
        let cases: [(String, String)] = [
            ("rules: []\nmodes: 3", "'modes' must be a list"),
            ("rules: []\nmodes:\n  - path: root.a\n    mode: average", "mode 1 (path 'root.a'): the mode 'average' is not one of sum, children, dot, exclude"),
            ("rules: []\nmodes:\n  - mode: dot", "mode 1: missing field 'path'"),
            ("rules: []\nmodes:\n  - path: root.a", "mode 1: missing field 'mode'"),
            ("rules: []\nmodes:\n  - path: chat\n    mode: dot", "mode 1: the pattern 'chat' must start with 'root'"),
            ("rules: []\nmodes:\n  - path: root.a\n    mode: dot\n    colour: red", "mode 1: unknown key 'colour'"),
            ("rules: []\nmodes:\n  - path: root.a\n    mode: dot\n  - path: root.a\n    mode: sum", "mode 2 (path 'root.a'): duplicate path; mode 1"),
            ("rules: []\nmodes:\n  - path: root.a b\n    mode: dot", "the label 'a b'"),
        ]
        for (yaml, expected) in cases {
            #expect {
                try RuleSet(yaml: yaml)
            } throws: { error in
                (error as? RuleSetError)?.message.contains(expected) == true
            }
        }
    }
}
