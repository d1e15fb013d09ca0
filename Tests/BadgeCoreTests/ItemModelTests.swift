import BadgeCore
import Foundation
import TestSupport
import Testing

@Suite("Items, decrements and clear marks in the model")
struct ItemModelTests {
    func item(_ text: String) -> ItemID { ItemID(rawValue: text)! }
    func at(_ seconds: Double) -> Date { now.addingTimeInterval(seconds - 1_000) }

    @Test("a node's own count is its counter plus its live items; adding twice counts once")
    func countsItems() throws {
        var tree = BadgeTree()
        try tree.apply(.increment(by: 2), "root.chat.c7")
        tree.apply(.addItem(item("m1")), at: path("root.chat.c7"), occurredAt: at(1), now: now)
        tree.apply(.addItem(item("m2")), at: path("root.chat.c7"), occurredAt: at(2), now: now)
        tree.apply(.addItem(item("m1")), at: path("root.chat.c7"), occurredAt: at(3), now: now)
        tree.apply(.addItem(item("m9")), at: path("root.chat.c8"), occurredAt: at(3), now: now)
        #expect(try tree.shownCount("root.chat.c7") == 4)
        #expect(try tree.shownCount("root") == 5)
        // Removing one takes exactly that one away; removing an absent one changes nothing.
        tree.apply(.removeItem(item("m2")), at: path("root.chat.c7"), now: now)
        tree.apply(.removeItem(item("nope")), at: path("root.chat.c7"), now: now)
        #expect(try tree.shownCount("root.chat.c7") == 3)
        // A node with only items shows their number, and goes when they go.
        tree.apply(.removeItem(item("m9")), at: path("root.chat.c8"), now: now)
        #expect(try tree.shownCount("root.chat.c8") == nil)
    }

    @Test("a remove that arrives before its add wins")
    func removeBeforeAdd() throws {
        var tree = BadgeTree()
        tree.apply(.removeItem(item("m1")), at: path("root.chat.c7"), now: now)
        tree.apply(.addItem(item("m1")), at: path("root.chat.c7"), occurredAt: at(1), now: now)
        #expect(try tree.shownCount("root") == nil)
    }

    @Test("a clear takes the items that occurred up to its time; a later one stays, whichever arrives first")
    func clearByTime() throws {
        var first = BadgeTree()
        first.apply(.addItem(item("old")), at: path("root.chat.c7"), occurredAt: at(1), now: now)
        first.apply(.addItem(item("new")), at: path("root.chat.c7"), occurredAt: at(3), now: now)
        first.apply(.clear(force: false), at: path("root.chat.c7"), occurredAt: at(2), now: now)
        var second = BadgeTree()
        second.apply(.clear(force: false), at: path("root.chat.c7"), occurredAt: at(2), now: now)
        second.apply(.addItem(item("new")), at: path("root.chat.c7"), occurredAt: at(3), now: now)
        second.apply(.addItem(item("old")), at: path("root.chat.c7"), occurredAt: at(1), now: now)
        #expect(try first.shownCount("root.chat.c7") == 1)
        #expect(first == second)
        // A forced clear of an ancestor reaches the node too; a plain clear of the parent does not.
        first.apply(.clear(force: false), at: path("root.chat"), occurredAt: at(5), now: now)
        #expect(try first.shownCount("root.chat.c7") == 1)
        first.apply(.clear(force: true), at: path("root.chat"), occurredAt: at(5), now: now)
        #expect(try first.shownCount("root") == nil)
        // An add of an item that occurred before the clear arrives late: it stays cleared.
        first.apply(.addItem(item("late")), at: path("root.chat.c7"), occurredAt: at(4), now: now)
        #expect(try first.shownCount("root") == nil)
    }

    @Test("a time in the future counts as now; no time means now")
    func futureTimes() throws {
        var tree = BadgeTree()
        tree.apply(.addItem(item("m1")), at: path("root.a"), occurredAt: now.addingTimeInterval(3_600), now: now)
        // A clear now reaches it: its claimed time was taken as now.
        tree.apply(.clear(force: false), at: path("root.a"), now: now)
        #expect(try tree.shownCount("root") == nil)
    }

    @Test("decrement: lowers the count, leaves nothing shown at 0, never makes a dot")
    func decrement() throws {
        var tree = BadgeTree()
        try tree.apply(.decrement(by: 1), "root.a")
        #expect(try tree.shownCount("root") == nil)
        try tree.apply(.set(count: 5, icon: try icon("new")), "root.a")
        try tree.apply(.decrement(by: 2), "root.a")
        #expect(tree.counters[path("root.a")] == BadgeState(count: 3, icon: try icon("new")))
        try tree.apply(.decrement(by: 7), "root.a")
        #expect(tree.counters[path("root.a")] == nil)
        #expect(try tree.shownCount("root") == nil)
        // Items are not the counter: a decrement leaves them.
        tree.apply(.addItem(item("m1")), at: path("root.a"), occurredAt: at(1), now: now)
        try tree.apply(.increment(by: 1), "root.a")
        try tree.apply(.decrement(by: 5), "root.a")
        #expect(try tree.shownCount("root.a") == 1)
        // An expired counter counts as absent.
        try tree.apply(.set(count: 4, icon: nil), "root.b", expiresAt: now.addingTimeInterval(-1))
        try tree.apply(.decrement(by: 1), "root.b")
        #expect(tree.counters[path("root.b")] == nil)
    }

    @Test("seen: what arrived after the last seen of the node or an ancestor is unseen, summed up the tree")
    func seen() throws {
        var tree = BadgeTree()
        let c1 = path("root.chat.c1")
        tree.apply(.increment(by: 3), at: c1, occurredAt: at(0.5), now: now)
        tree.apply(.addItem(item("m1")), at: path("root.chat.c2"), occurredAt: at(1), now: now)
        #expect(tree.aggregates(now: now)[.root]?.unseen == 4)
        tree.apply(.seen, at: path("root.chat"), occurredAt: at(2), now: now)
        #expect(tree.aggregates(now: now)[.root]?.unseen == 0)
        #expect(tree.aggregates(now: now)[.root]?.count == 4)
        // New arrivals are unseen; what occurred before the seen arrives late: seen.
        tree.apply(.increment(by: 2), at: c1, occurredAt: at(2.5), now: now)
        tree.apply(.increment(by: 1), at: c1, occurredAt: at(1.8), now: now)
        tree.apply(.addItem(item("m2")), at: path("root.chat.c2"), occurredAt: at(3), now: now)
        tree.apply(.addItem(item("m0")), at: path("root.chat.c2"), occurredAt: at(1.5), now: now)
        var aggregates = tree.aggregates(now: now)
        #expect(aggregates[c1]?.unseen == 2)
        #expect(aggregates[path("root.chat.c2")]?.unseen == 1)
        #expect(aggregates[path("root.chat")]?.unseen == 3)
        #expect(aggregates[path("root.chat")]?.count == 9)
        // A decrement after the seen takes from the unseen part first (the 2, then 2 seen: 2
        // seen are left).
        try tree.apply(.decrement(by: 4), "root.chat.c1")
        aggregates = tree.aggregates(now: now)
        #expect(aggregates[c1]?.count == 2)
        #expect(aggregates[c1]?.unseen == 0)
        // A set is the node's value as of its time: unseen in full until a seen at or after it.
        try tree.apply(.set(count: 10, icon: nil), "root.chat.c1")
        #expect(tree.states[c1]?.unseen == 10)
        tree.apply(.seen, at: path("root"), occurredAt: now.addingTimeInterval(-50), now: now)
        #expect(tree.states[c1]?.unseen == 0)
        // A later set that occurred before that seen arrives late: seen in full; an earlier one
        // changes nothing.
        tree.apply(.set(count: 4, icon: nil), at: c1, occurredAt: now.addingTimeInterval(-60), now: now)
        tree.apply(.set(count: 7, icon: nil), at: c1, occurredAt: now.addingTimeInterval(-99), now: now)
        #expect(tree.counters[c1] == BadgeState(count: 4, seenCount: 4))
    }

    @Test("a clear at a rendered version takes what showed in it; what arrived after, late or not, stays")
    func clearShown() throws {
        var tree = BadgeTree()
        let c1 = path("root.chat.c1")
        let c2 = path("root.chat.c2")
        tree.apply(.addItem(item("m1")), at: c1, occurredAt: at(1), now: now)
        tree.apply(.increment(by: 2), at: c2, occurredAt: at(1), now: now)
        // Version 1 is rendered; then arrivals for version 2, two of them late (they occurred
        // before what was shown).
        tree.nextVersion = 2
        tree.apply(.addItem(item("m2")), at: c1, occurredAt: at(3), now: now)
        tree.apply(.addItem(item("m0")), at: c1, occurredAt: at(0.5), now: now)
        tree.apply(.increment(by: 1), at: c2, occurredAt: at(0.5), now: now)
        tree.clearShown(path("root.chat"), subtree: true, through: 1, settled: nil, now: now)
        var aggregates = tree.aggregates(now: now)
        #expect(aggregates[c1]?.count == 2)
        #expect(aggregates[c2]?.count == 1)
        #expect(aggregates[path("root.chat")]?.count == 3)
        #expect(tree.items[c1]?.keys.sorted() == [item("m0"), item("m2")])
        // Settled at version 2: what shows in no version yet (version 3) counts as shown in 2.
        tree.nextVersion = 3
        tree.apply(.increment(by: 4), at: c2, occurredAt: at(5), now: now)
        tree.clearShown(c2, subtree: false, through: 2, settled: 2, now: now)
        aggregates = tree.aggregates(now: now)
        #expect(aggregates[c2] == nil)
        #expect(aggregates[path("root.chat")]?.count == 2)
        // A set shows first in its version too: a clear at an earlier one keeps it (and takes
        // the items, which showed in version 2).
        tree.nextVersion = 4
        try tree.apply(.set(count: 7, icon: nil), "root.chat.c1")
        tree.clearShown(c1, subtree: false, through: 3, settled: nil, now: now)
        #expect(tree.aggregates(now: now)[c1]?.count == 7)
        #expect(tree.items[c1] == nil)
    }

    @Test("a seen at a rendered version marks what showed in it; what arrived after, late or not, stays unseen")
    func seenShown() throws {
        var tree = BadgeTree()
        let c1 = path("root.chat.c1")
        tree.apply(.addItem(item("m1")), at: c1, occurredAt: at(1), now: now)
        tree.apply(.increment(by: 2), at: c1, occurredAt: at(1), now: now)
        tree.nextVersion = 2
        tree.apply(.addItem(item("m0")), at: c1, occurredAt: at(0.5), now: now)
        tree.apply(.increment(by: 1), at: c1, occurredAt: at(3), now: now)
        tree.markShownSeen(.root, through: 1, settled: nil, now: now)
        var aggregates = tree.aggregates(now: now)
        #expect(aggregates[c1]?.count == 5)
        #expect(aggregates[c1]?.unseen == 2)
        #expect(aggregates[.root]?.unseen == 2)
        // A set is the node's value as of its time: the increments before it go, and no seen
        // covers it, so all of it is unseen (the items stay, m0 unseen).
        tree.nextVersion = 3
        try tree.apply(.set(count: 10, icon: nil), "root.chat.c1")
        aggregates = tree.aggregates(now: now)
        #expect(aggregates[c1]?.count == 12)
        #expect(aggregates[c1]?.unseen == 11)
    }

    @Test("increments and decrements of a node apply by time: a batch, and any order of arrival, give the same counter")
    func decrementsByTime() throws {
        let node = path("root.a")
        let operations: [(BadgeOperation, Double)] = [(.increment(by: 2), 1), (.decrement(by: 5), 2), (.decrement(by: 1), 3), (.increment(by: 4), 4)]
        var batch = BadgeBatch(now: now)
        for (operation, time) in operations.reversed() {
            batch.append(BadgeMutation(user: user("u1"), path: node, operation: operation, occurredAt: at(time)))
        }
        #expect(batch.increments.map(\.by) == [2, -5, -1, 4])
        // In time order: 2, then the decrement by 5 leaves nothing (no dot), the one by 1 meets
        // nothing, and 4 follows.
        for start in [nil, BadgeState(count: 1), BadgeState(count: 10)] {
            var sequential = BadgeTree(states: start.map { [node: $0] } ?? [:])
            var reversed = sequential
            var coalesced = sequential
            for (operation, time) in operations {
                sequential.apply(operation, at: node, occurredAt: at(time), now: now)
            }
            for (operation, time) in operations.reversed() {
                reversed.apply(operation, at: node, occurredAt: at(time), now: now)
            }
            coalesced.apply(batch, for: user("u1"), now: now)
            #expect(coalesced.counters == sequential.counters, "from \(String(describing: start))")
            #expect(reversed.counters == sequential.counters, "from \(String(describing: start))")
            let expected: Int64 = start?.count == 10 ? 10 : 4
            #expect(sequential.counters[node]?.count == expected, "from \(String(describing: start))")
        }
    }

    @Test("property: any arrival order of timed sets, increments, decrements, item adds and removes, clears, seens and mutes gives the same tree", arguments: [UInt64(1), 2, 3, 4, 5])
    func orderFree(seed: UInt64) throws {
        var random = SeededRandom(seed: seed &* 31)
        for round in 0..<200 {
            var generator = RandomBadgeOperations(users: [user("u1")], seed: seed &* 1_000 &+ UInt64(round))
            generator.weights = .orderFree
            generator.maximumDepth = 2
            generator.items = (0..<4).map { item("m\($0)") }
            let mutations = generator.sequence(count: generator.integer(in: 1...40))
            var inOrder = BadgeTree()
            for mutation in mutations { inOrder.apply(mutation, now: now) }
            for _ in 0..<3 {
                var shuffled = BadgeTree()
                for mutation in mutations.shuffled(using: &random) { shuffled.apply(mutation, now: now) }
                #expect(shuffled.aggregates(now: now) == inOrder.aggregates(now: now), "seed \(seed), round \(round)")
                #expect(shuffled.items == inOrder.items, "seed \(seed), round \(round)")
                // Batches of the shuffled order agree too.
                var batched = BadgeTree()
                var batch = BadgeBatch()
                for mutation in mutations.shuffled(using: &random) {
                    batch.append(mutation)
                    if random.next() % 5 == 0 {
                        batched.apply(batch, for: user("u1"), now: now)
                        batch = BadgeBatch()
                    }
                }
                batched.apply(batch, for: user("u1"), now: now)
                #expect(batched.items == inOrder.items, "seed \(seed), round \(round), in batches")
                #expect(batched.aggregates(now: now) == inOrder.aggregates(now: now), "seed \(seed), round \(round), in batches")
            }
        }
    }
}
