import BadgeCore
import Foundation
import TestSupport
import Testing

@Suite("Aggregation properties")
struct AggregationPropertyTests {
    /// Recomputes every aggregate naively from the own states: for each node that is a state's
    /// path or an ancestor of one, sum the unexpired states within it.
    func naiveAggregates(_ states: [BadgePath: BadgeState], now: Date) -> [BadgePath: BadgeAggregate] {
        let live = states.filter { !$0.value.isExpired(at: now) }
        var candidates: Set<BadgePath> = []
        for path in live.keys {
            candidates.insert(path)
            candidates.formUnion(path.ancestors)
        }
        var result: [BadgePath: BadgeAggregate] = [:]
        for node in candidates {
            var total: Int64 = 0
            var unseen: Int64 = 0
            for (path, state) in live where path.isWithin(node) {
                let (sum, overflow) = total.addingReportingOverflow(state.count)
                total = overflow ? .max : sum
                let (unseenSum, unseenOverflow) = unseen.addingReportingOverflow(state.unseen)
                unseen = unseenOverflow ? .max : unseenSum
            }
            result[node] = BadgeAggregate(count: total, icon: live[node]?.icon, unseen: unseen)
        }
        return result
    }

    /// A naive restatement of the operation table, on plain values.
    func naiveApply(
        _ mutation: BadgeMutation, to states: inout [String: (count: Int64, icon: String?, expiresAt: Date?)], now: Date
    ) {
        let key = mutation.path.rawValue
        switch mutation.operation {
        case .set(let count, let icon):
            states[key] = (count, icon?.rawValue, mutation.expiresAt)
        case .increment(let by):
            if let old = states[key], !(old.expiresAt.map { $0 <= now } ?? false) {
                states[key] = (max(old.count, 0) + by, old.icon, mutation.expiresAt ?? old.expiresAt)
            } else {
                states[key] = (by, nil, mutation.expiresAt)
            }
        case .clear(false):
            states[key] = nil
        case .decrement(let by):
            if let old = states[key], !(old.expiresAt.map { $0 <= now } ?? false) {
                // One that meets a count of its size or less leaves nothing shown: count 0,
                // no icon, no dot (a count of -1 here), the expiry kept.
                states[key] = old.count > by ? (old.count - by, old.icon, old.expiresAt) : (-1, nil, old.expiresAt)
            } else {
                // On nothing it stays, taking what follows it: nothing does (they occur later).
                states[key] = (-1, nil, nil)
            }
        case .clear(true):
            states = states.filter { $0.key != key && !$0.key.hasPrefix(key + ".") }
        case .addItem, .removeItem, .seen, .mute, .unmute:
            break  // items, seen and mutes have their own property tests (ItemModelTests, MuteModelTests), and are not generated here
        }
    }

    /// Checks the tree answer's invariants: each count is own plus children, nothing empty lingers.
    func checkNode(_ node: BadgeNode, states: [BadgePath: BadgeState], now: Date) -> Bool {
        let own = states[node.path].flatMap { $0.isExpired(at: now) ? nil : $0.count } ?? 0
        let sum = node.children.reduce(own) { $0 + $1.count }
        let hasState = states[node.path].map { !$0.isExpired(at: now) } ?? false
        guard node.shown, node.count == sum, hasState || !node.children.isEmpty else { return false }
        guard node.children.map(\.path) == node.children.map(\.path).sorted() else { return false }
        return node.children.allSatisfy { $0.path.parent == node.path && checkNode($0, states: states, now: now) }
    }

    @Test("property: aggregates equal a naive recomputation, across thousands of random sequences")
    func aggregatesMatchNaiveModel() throws {
        let single = [user("u1")]
        var checked = 0
        for seed in UInt64(1)...2_000 {
            var generator = RandomBadgeOperations(users: single, seed: seed)
            generator.weights = RandomBadgeOperations.Weights(forcedClear: seed % 2 == 0 ? 1 : 0, addItem: 0, removeItem: 0, seen: 0, mute: 0)
            generator.expiries = [now.addingTimeInterval(5), now.addingTimeInterval(20)]
            var tree = BadgeTree()
            var model: [String: (count: Int64, icon: String?, expiresAt: Date?)] = [:]
            var clock = now
            for mutation in generator.sequence(count: 30) {
                clock = clock.addingTimeInterval(Double(generator.integer(in: 0...2)))
                tree.apply(mutation, now: clock)
                naiveApply(mutation, to: &model, now: clock)
                checked += 1
            }
            let modelStates = Dictionary(
                uniqueKeysWithValues: model.filter { $0.value.count >= 0 }.map { key, value in
                    (key, BadgeState(count: value.count, icon: value.icon.flatMap(BadgeIcon.init(rawValue:)),
                                     expiresAt: value.expiresAt))
                })
            #expect(
                Dictionary(uniqueKeysWithValues: tree.counters.map { ($0.key.rawValue, $0.value) }) == modelStates,
                "seed \(seed)")
            for instant in [clock, now.addingTimeInterval(10), now.addingTimeInterval(30)] {
                let aggregates = tree.aggregates(now: instant)
                #expect(aggregates == naiveAggregates(tree.counters, now: instant), "seed \(seed)")
                let root = try #require(tree.node(at: .root, now: instant))
                if aggregates.isEmpty {
                    #expect(!root.shown && root.count == 0 && root.children.isEmpty)
                } else {
                    #expect(checkNode(root, states: tree.counters, now: instant), "seed \(seed)")
                    var visited = 0
                    func count(_ node: BadgeNode) { visited += 1; node.children.forEach(count) }
                    count(root)
                    #expect(visited == aggregates.count, "every shown node answers exactly once, seed \(seed)")
                }
            }
        }
        #expect(checked == 60_000)
    }
}
