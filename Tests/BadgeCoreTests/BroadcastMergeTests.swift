import BadgeCore
import Foundation
import Testing
import TestSupport

@Suite("Broadcasts merged under the user's modes and mutes")
struct BroadcastMergeTests {
    func path(_ text: String) throws -> BadgePath { try BadgePath(validating: text) }

    /// What the rule says: the broadcasts' counts added to the own counts of their nodes, then
    /// every node aggregated under the modes and mutes.
    static func expected(
        own: [BadgePath: BadgeAggregate], broadcasts: [BroadcastBadge], seen: Set<Int64>, modes: AggregationModes,
        muted: Set<BadgePath>
    ) -> [BadgePath: BadgeAggregate] {
        var merged = own
        for broadcast in broadcasts {
            var aggregate = merged[broadcast.path] ?? BadgeAggregate(count: 0)
            aggregate.count = min(aggregate.count, Int64.max - broadcast.count) + broadcast.count
            if !seen.contains(broadcast.id) { aggregate.unseen = min(aggregate.unseen, Int64.max - broadcast.count) + broadcast.count }
            merged[broadcast.path] = aggregate
        }
        return modes.aggregate(own: merged, muted: muted)
    }

    @Test("a broadcast below a muted node counts there and in its subtree, not at the muted node's ancestors or the root")
    func mutedNode() throws {
        let own = [try path("root.chat.c1"): BadgeAggregate(count: 2, unseen: 2)]
        let muted: Set<BadgePath> = [try path("root.promo")]
        var aggregates = AggregationModes.none.aggregate(own: own, muted: muted)
        let broadcast = BroadcastBadge(id: 1, path: try path("root.promo.sale"), count: 3)
        BadgeAggregate.merge([broadcast], into: &aggregates, muted: muted)
        #expect(aggregates[try path("root.promo.sale")] == BadgeAggregate(count: 3, unseen: 3))
        #expect(aggregates[try path("root.promo")] == BadgeAggregate(count: 3, unseen: 3))
        #expect(aggregates[.root] == BadgeAggregate(count: 2, unseen: 2))
    }

    @Test("each mode takes a broadcast as it takes own state: children counts one more child, dot and exclude pass a dot")
    func eachMode() throws {
        let own = [try path("root.chat.c1"): BadgeAggregate(count: 40, unseen: 40)]
        let modes = AggregationModes(entries: [
            try AggregationModes.entry(pattern: "root.chat", mode: .children),
            try AggregationModes.entry(pattern: "root.discover", mode: .dot),
            try AggregationModes.entry(pattern: "root.archive", mode: .exclude),
        ])
        var aggregates = modes.aggregate(own: own)
        let broadcasts = [
            BroadcastBadge(id: 1, path: try path("root.chat.welcome"), count: 5),
            BroadcastBadge(id: 2, path: try path("root.chat.c1"), count: 1),
            BroadcastBadge(id: 3, path: try path("root.discover.new"), count: 7),
            BroadcastBadge(id: 4, path: try path("root.archive.old"), count: 9),
        ]
        BadgeAggregate.merge(broadcasts, seen: [1], into: &aggregates, modes: modes)
        // Two chats (c1 and welcome); welcome was seen, c1 has unseen.
        #expect(aggregates[try path("root.chat")] == BadgeAggregate(count: 2, unseen: 1))
        #expect(aggregates[try path("root.chat.c1")] == BadgeAggregate(count: 41, unseen: 41))
        #expect(aggregates[try path("root.discover")] == BadgeAggregate(count: 0, unseen: 0))
        #expect(aggregates[try path("root.discover.new")] == BadgeAggregate(count: 7, unseen: 7))
        #expect(aggregates[try path("root.archive")] == BadgeAggregate(count: 9, unseen: 9))
        #expect(aggregates[.root] == BadgeAggregate(count: 2, unseen: 1))
        #expect(aggregates == Self.expected(own: own, broadcasts: broadcasts, seen: [1], modes: modes, muted: []))
    }

    @Test("random trees, modes, mutes and broadcasts: merging into the aggregates equals aggregating with them, also for a subtree view down to a depth", arguments: 0..<300)
    func property(seed: UInt64) throws {
        var random = SeededRandom(seed: seed &* 7_919 &+ 1)
        let labels = ["a", "b", "c"]
        func randomPath() -> BadgePath {
            var text = "root"
            for _ in 0..<Int.random(in: 1...3, using: &random) { text += "." + labels.randomElement(using: &random)! }
            return try! BadgePath(validating: text)
        }
        var entries: [AggregationModes.Entry] = []
        for _ in 0..<Int.random(in: 0...3, using: &random) {
            var pattern = "root"
            for _ in 0..<Int.random(in: 0...2, using: &random) { pattern += "." + (labels + ["*"]).randomElement(using: &random)! }
            entries.append(try AggregationModes.entry(pattern: pattern, mode: AggregationMode.allCases.randomElement(using: &random)!))
        }
        let modes = AggregationModes(entries: entries)
        var own: [BadgePath: BadgeAggregate] = [:]
        for _ in 0..<Int.random(in: 0...5, using: &random) {
            let count = Int64.random(in: 0...4, using: &random)
            own[randomPath()] = BadgeAggregate(count: count, unseen: Int64.random(in: 0...count, using: &random))
        }
        var muted: Set<BadgePath> = []
        for _ in 0..<Int.random(in: 0...2, using: &random) { muted.insert(randomPath()) }
        var broadcasts: [BroadcastBadge] = []
        var seen: Set<Int64> = []
        for id in 1...Int64.random(in: 1...4, using: &random) {
            broadcasts.append(BroadcastBadge(id: id, path: randomPath(), count: Int64.random(in: 0...3, using: &random)))
            if Bool.random(using: &random) { seen.insert(id) }
        }
        let expected = Self.expected(own: own, broadcasts: broadcasts, seen: seen, modes: modes, muted: muted)
        var merged = modes.aggregate(own: own, muted: muted)
        let stored = merged
        BadgeAggregate.merge(broadcasts, seen: seen, into: &merged, modes: modes, muted: muted)
        #expect(merged == expected, "seed \(seed)")

        // A view of a subtree down to a depth, as the store reads it: the nodes within the
        // depth and those on the chains of the broadcasts within the subtree.
        let top = Bool.random(using: &random) ? BadgePath.root : try path("root.\(labels.randomElement(using: &random)!)")
        let depth: Int? = Bool.random(using: &random) ? nil : Int.random(in: 0...2, using: &random)
        let within = broadcasts.filter { $0.path.isWithin(top) }
        var view = UserView(
            path: top, depth: depth, userVersion: 1, broadcastVersion: 1, aggregates: [:],
            broadcasts: Dictionary(uniqueKeysWithValues: within.map { ($0.id, $0) }), dismissed: [], seenBroadcasts: seen,
            mutes: muted.filter { $0.isWithin(top) || top.isWithin($0) }.map { MutedNode(path: $0, until: nil) }, modes: modes)
        let deepest = view.deepest
        view.aggregates = stored.filter { node, _ in
            node.isWithin(top) && (node.depth <= deepest || within.contains { $0.path.isWithin(node) })
        }
        let expectedView = expected.filter { $0.key.isWithin(top) && $0.key.depth <= deepest }
        #expect(view.visibleAggregates == expectedView, "seed \(seed) at \(top) depth \(String(describing: depth))")
    }

    @Test("a view cannot take a new broadcast below its depth without reading: rebasing asks for a read")
    func rebaseBelowDepth() throws {
        let view = UserView(
            path: .root, depth: 1, userVersion: 1, broadcastVersion: 1, aggregates: [:], broadcasts: [:], dismissed: [])
        let shallow = BroadcastBadge(id: 1, path: try path("root.news"), count: 1)
        let deep = BroadcastBadge(id: 2, path: try path("root.chat.welcome"), count: 1)
        #expect(view.rebased(on: BroadcastSet(version: 2, active: [1: shallow])) != nil)
        #expect(view.rebased(on: BroadcastSet(version: 2, active: [2: deep])) == nil)
        #expect(view.rebased(on: BroadcastSet(version: 0, active: [:])) == nil)
    }
}
