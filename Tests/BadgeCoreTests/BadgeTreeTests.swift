import BadgeCore
import Foundation
import TestSupport
import Testing

@Suite("Badge tree semantics (DESIGN §2)")
struct BadgeTreeTests {
    @Test("set shows a dot: count 0, no text")
    func setDot() throws {
        var tree = BadgeTree()
        try tree.apply(.set(count: 0, icon: nil), "root.settings.dark")
        let node = try #require(tree.node(at: path("root.settings.dark"), now: now))
        #expect(node.shown)
        #expect(node.count == 0)
        #expect(node.text == nil)
        #expect(node.icon == nil)
        #expect(try tree.shownCount("root") == 0)
        #expect(tree.node(at: .root, now: now)?.shown == true)
    }

    @Test("set with a count is absolute and replaces the icon")
    func setCount() throws {
        var tree = BadgeTree()
        try tree.apply(.set(count: 5, icon: try icon("hot")), "root.promo.item1")
        try tree.apply(.set(count: 2, icon: nil), "root.promo.item1")
        #expect(try tree.shownCount("root.promo.item1") == 2)
        #expect(tree.states[path("root.promo.item1")]?.icon == nil)
        #expect(try tree.shownCount("root") == 2)
    }

    @Test("increment adds, keeps the icon, and starts from nothing on an absent node")
    func increment() throws {
        var tree = BadgeTree()
        try tree.apply(.increment(by: 1), "root.chat.c7")
        try tree.apply(.increment(by: 2), "root.chat.c7")
        #expect(try tree.shownCount("root.chat.c7") == 3)
        try tree.apply(.set(count: 0, icon: try icon("new")), "root.chat.c8")
        try tree.apply(.increment(by: 4), "root.chat.c8")
        #expect(tree.counters[path("root.chat.c8")] == BadgeState(count: 4, icon: try icon("new")))
        #expect(try tree.shownCount("root.chat") == 7)
    }

    @Test("increment saturates at Int64.max, and so do aggregates")
    func saturation() throws {
        var tree = BadgeTree()
        try tree.apply(.set(count: Int64.max - 1, icon: nil), "root.a")
        try tree.apply(.increment(by: 5), "root.a")
        #expect(try tree.shownCount("root.a") == Int64.max)
        try tree.apply(.set(count: Int64.max, icon: nil), "root.b")
        #expect(try tree.shownCount("root") == Int64.max)
    }

    @Test("clear removes the node's own state; clearing what is not set is a no-op")
    func clear() throws {
        var tree = BadgeTree()
        try tree.apply(.increment(by: 3), "root.chat.c7")
        try tree.apply(.clear(force: false), "root.chat.c7")
        #expect(tree.states.isEmpty)
        #expect(tree.aggregates(now: now).isEmpty)
        try tree.apply(.clear(force: false), "root.never.set")
        #expect(tree.states.isEmpty)
    }

    @Test("a parent's count is its own count plus its children's")
    func parentCount() throws {
        var tree = BadgeTree()
        try tree.apply(.set(count: 2, icon: nil), "root.chat")
        try tree.apply(.increment(by: 3), "root.chat.c7")
        try tree.apply(.increment(by: 4), "root.chat.c8")
        try tree.apply(.set(count: 0, icon: nil), "root.chat.c9")
        try tree.apply(.set(count: 10, icon: nil), "root.promo")
        #expect(try tree.shownCount("root.chat") == 9)
        #expect(try tree.shownCount("root") == 19)
        #expect(try tree.shownCount("root.chat.c9") == 0)
    }

    @Test("a parent clears by itself once every child is cleared: no lingering empty nodes")
    func parentClearsItself() throws {
        var tree = BadgeTree()
        try tree.apply(.increment(by: 1), "root.chat.c7")
        try tree.apply(.increment(by: 1), "root.chat.c8")
        try tree.apply(.clear(force: false), "root.chat.c7")
        #expect(try tree.shownCount("root.chat") == 1)
        try tree.apply(.clear(force: false), "root.chat.c8")
        #expect(tree.aggregates(now: now).isEmpty)
        #expect(tree.node(at: path("root.chat"), now: now) == nil)
        let root = try #require(tree.node(at: .root, now: now))
        #expect(root == BadgeNode(path: .root, shown: false, count: 0, text: nil, icon: nil, children: []))
    }

    @Test("a plain clear on a parent whose children are set changes nothing visible")
    func plainClearOnParent() throws {
        var tree = BadgeTree()
        try tree.apply(.increment(by: 2), "root.chat.c7")
        let before = tree.node(at: .root, now: now)
        try tree.apply(.clear(force: false), "root.chat")
        #expect(tree.node(at: .root, now: now) == before)
        try tree.apply(.set(count: 5, icon: nil), "root.chat")
        try tree.apply(.clear(force: false), "root.chat")
        #expect(tree.node(at: .root, now: now) == before)
    }

    @Test("a forced clear removes the node and its whole subtree, nothing else")
    func forcedClear() throws {
        var tree = BadgeTree()
        try tree.apply(.set(count: 1, icon: nil), "root.promo")
        try tree.apply(.set(count: 5, icon: nil), "root.promo.item1")
        try tree.apply(.increment(by: 2), "root.promo.item2.detail")
        try tree.apply(.increment(by: 7), "root.promotion")
        try tree.apply(.clear(force: true), "root.promo")
        #expect(try tree.shownCount("root.promo") == nil)
        #expect(try tree.shownCount("root.promotion") == 7)
        #expect(try tree.shownCount("root") == 7)
        try tree.apply(.clear(force: true), "root")
        #expect(tree.states.isEmpty)
    }

    @Test("root is a real node: its own state counts, and it is queryable")
    func rootIsReal() throws {
        var tree = BadgeTree()
        try tree.apply(.set(count: 3, icon: nil), "root")
        try tree.apply(.increment(by: 2), "root.chat.c7")
        let root = try #require(tree.node(at: .root, now: now))
        #expect(root.count == 5)
        #expect(root.text == "5")
        #expect(root.children.map(\.path) == [path("root.chat")])
    }

    @Test("99+ above the cap, and the cap is a setting")
    func display() throws {
        #expect(BadgeDisplay().text(for: 0) == nil)
        #expect(BadgeDisplay().text(for: 7) == "7")
        #expect(BadgeDisplay().text(for: 99) == "99")
        #expect(BadgeDisplay().text(for: 100) == "99+")
        #expect(BadgeDisplay(countCap: 9).text(for: 10) == "9+")
        #expect(BadgeDisplay(countCap: 999).text(for: 1000) == "999+")
        var tree = BadgeTree()
        try tree.apply(.set(count: 120, icon: nil), "root.chat")
        #expect(tree.node(at: .root, now: now)?.text == "99+")
        #expect(tree.node(at: .root, now: now)?.count == 120)
        #expect(tree.node(at: .root, now: now, display: BadgeDisplay(countCap: 500))?.text == "120")
    }

    @Test("number beats icon beats dot; icons are not inherited")
    func numberBeatsIconBeatsDot() throws {
        var tree = BadgeTree()
        try tree.apply(.set(count: 0, icon: try icon("new")), "root.settings.dark")
        try tree.apply(.set(count: 0, icon: nil), "root.settings.font")
        let settings = try #require(tree.node(at: path("root.settings"), now: now))
        #expect(settings.text == nil)
        #expect(settings.icon == nil)
        let dark = try #require(settings.children.first)
        #expect(dark.path == path("root.settings.dark"))
        #expect(dark.text == nil)
        #expect(dark.icon == (try icon("new")))
        try tree.apply(.set(count: 3, icon: try icon("hot")), "root.settings.dark")
        let numbered = try #require(tree.node(at: path("root.settings.dark"), now: now))
        #expect(numbered.text == "3")
        #expect(numbered.icon == (try icon("hot")))
    }

    @Test("depth limits: 0 is the node only, 1 adds children, nil is everything")
    func depthLimits() throws {
        var tree = BadgeTree()
        try tree.apply(.increment(by: 1), "root.a.b.c")
        try tree.apply(.increment(by: 1), "root.a.d")
        let only = try #require(tree.node(at: path("root.a"), depth: 0, now: now))
        #expect(only.children.isEmpty)
        #expect(only.count == 2)
        let one = try #require(tree.node(at: path("root.a"), depth: 1, now: now))
        #expect(one.children.map(\.path.rawValue) == ["root.a.b", "root.a.d"])
        #expect(one.children.allSatisfy { $0.children.isEmpty })
        let all = try #require(tree.node(at: .root, now: now))
        #expect(all.children.first?.children.first?.children.first?.path.rawValue == "root.a.b.c")
        #expect(tree.node(at: path("root.zzz"), now: now) == nil)
    }

    @Test("children are sorted by path order")
    func childrenSorted() throws {
        var tree = BadgeTree()
        for label in ["b", "a0", "B", "a", "a_"] {
            try tree.apply(.set(count: 0, icon: nil), "root.\(label)")
        }
        let root = try #require(tree.node(at: .root, now: now))
        #expect(root.children.map(\.path.rawValue) == ["root.B", "root.a", "root.a0", "root.a_", "root.b"])
    }

    @Test("build accepts a subset of aggregates holding only the subtree")
    func buildFromSubset() throws {
        var tree = BadgeTree()
        try tree.apply(.increment(by: 2), "root.chat.c7")
        try tree.apply(.increment(by: 1), "root.promo")
        let chat = path("root.chat")
        let subset = tree.aggregates(now: now).filter { $0.key.isWithin(chat) }
        let node = try #require(
            BadgeNode.build(aggregates: subset, at: path("root.chat"), depth: nil, display: BadgeDisplay()))
        #expect(node.count == 2)
        #expect(node.children.map(\.path.rawValue) == ["root.chat.c7"])
    }

    @Test("build gives the tree of the plain definition for random maps, subtrees and depths, missing parents unlit")
    func buildMatchesDefinition() throws {
        // The definition: a node is there when the map has it, or a path below it within the
        // depth limit (then it is unlit: not shown, 0); its children are the nodes one level
        // down that are there, in path order.
        func reference(_ aggregates: [BadgePath: BadgeAggregate], _ nodePath: BadgePath, levels: Int?) -> BadgeNode? {
            let below = aggregates.keys.filter { key in
                key.depth > nodePath.depth && key.isWithin(nodePath) && levels.map { key.depth - nodePath.depth <= $0 } ?? true
            }
            let childPaths = Set(below.map { key in key.depth == nodePath.depth + 1 ? key : key.ancestors[nodePath.depth + 1] })
            let children = childPaths.sorted().compactMap { reference(aggregates, $0, levels: levels.map { $0 - 1 }) }
            guard let aggregate = aggregates[nodePath] else {
                return below.isEmpty ? nil : BadgeNode(path: nodePath, shown: false, count: 0, text: nil, icon: nil, children: children)
            }
            return BadgeNode(
                path: nodePath, shown: true, count: aggregate.count, unseen: aggregate.unseen,
                text: BadgeDisplay().text(for: aggregate.count), icon: aggregate.icon, children: children)
        }
        var random = SeededRandom(seed: 7)
        let labels = ["a", "b", "a0", "a_", "B", "ab"]
        for _ in 0..<2_000 {
            var aggregates: [BadgePath: BadgeAggregate] = [:]
            for _ in 0..<Int.random(in: 0...30, using: &random) {
                let depth = Int.random(in: 0...4, using: &random)
                let nodeLabels = ["root"] + (0..<depth).map { _ in labels.randomElement(using: &random)! }
                aggregates[path(nodeLabels.joined(separator: "."))] = BadgeAggregate(
                    count: Int64.random(in: 0...120, using: &random), icon: nil, unseen: Int64.random(in: 0...5, using: &random))
            }
            let at = aggregates.keys.randomElement(using: &random) ?? .root
            let depth: Int? = Bool.random(using: &random) ? nil : Int.random(in: -1...3, using: &random)
            let built = BadgeNode.build(aggregates: aggregates, at: at, depth: depth, display: BadgeDisplay())
            let expected =
                reference(aggregates, at, levels: depth.map { max($0, 0) })
                ?? (at == .root ? BadgeNode(path: .root, shown: false, count: 0, text: nil, icon: nil) : nil)
            #expect(built == expected, "at \(at), depth \(String(describing: depth)), paths \(aggregates.keys.sorted())")
        }
    }

    @Test("JSON shape: exact keys, explicit nulls, nested children")
    func jsonShape() throws {
        var tree = BadgeTree()
        try tree.apply(.increment(by: 3), "root.chat")
        try tree.apply(.set(count: 0, icon: try icon("new")), "root.settings")
        let root = try #require(tree.node(at: .root, depth: 1, now: now))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let json = String(decoding: try encoder.encode(root), as: UTF8.self)
        #expect(
            json == #"{"children":[{"children":[],"count":3,"icon":null,"path":"root.chat","shown":true,"text":"3","unseen":3},"#
                + #"{"children":[],"count":0,"icon":"new","path":"root.settings","shown":true,"text":null,"unseen":0}],"#
                + #""count":3,"icon":null,"path":"root","shown":true,"text":"3","unseen":3}"#)
        #expect(try JSONDecoder().decode(BadgeNode.self, from: Data(json.utf8)) == root)
    }

    @Test("an expired badge disappears, and every ancestor with it")
    func expiry() throws {
        var tree = BadgeTree()
        let later = now.addingTimeInterval(60)
        try tree.apply(.set(count: 2, icon: nil), "root.promo.sale", expiresAt: later)
        #expect(try tree.shownCount("root", at: now) == 2)
        #expect(try tree.shownCount("root.promo.sale", at: later.addingTimeInterval(-0.001)) == 2)
        #expect(tree.aggregates(now: later).isEmpty)
        #expect(tree.node(at: .root, now: later)?.shown == false)
        #expect(BadgeState(count: 1, expiresAt: later).isExpired(at: later))
        #expect(!BadgeState(count: 1, expiresAt: later).isExpired(at: now))
        #expect(!BadgeState(count: 1).isExpired(at: .distantFuture))
    }

    @Test("increment on an expired badge starts again; a later expiry replaces, none keeps it")
    func incrementAndExpiry() throws {
        var tree = BadgeTree()
        let soon = now.addingTimeInterval(10)
        let later = now.addingTimeInterval(100)
        try tree.apply(.set(count: 5, icon: try icon("hot")), "root.a", expiresAt: now.addingTimeInterval(-1))
        try tree.apply(.increment(by: 2), "root.a")
        #expect(tree.counters[path("root.a")] == BadgeState(count: 2, icon: nil, expiresAt: nil))
        try tree.apply(.set(count: 1, icon: nil), "root.b", expiresAt: soon)
        try tree.apply(.increment(by: 1), "root.b")
        #expect(tree.counters[path("root.b")] == BadgeState(count: 2, icon: nil, expiresAt: soon))
        try tree.apply(.increment(by: 1), "root.b", expiresAt: later)
        #expect(tree.states[path("root.b")]?.expiresAt == later)
    }
}
