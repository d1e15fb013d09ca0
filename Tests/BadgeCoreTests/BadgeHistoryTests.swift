import BadgeCore
import TestSupport
import Testing

@Suite("Rebuilding a user's view at an earlier version from the change log")
struct BadgeHistoryTests {
    let paths = ["root.chat", "root.chat.c1", "root.chat.c2", "root.feed", "root.feed.f1"].map(path)

    /// Random own changes (aggregates, dismissals) and broadcast changes, as the log records them,
    /// with the layers after each step.
    func simulate(seed: UInt64, steps: Int) -> (points: [BadgeLayers], own: [OwnLayerChange], broadcast: [BroadcastSetChange], reachedAt: Int64?) {
        var random = SplitMix64(seed: seed)
        var point = BadgeLayers(userVersion: 0, broadcastVersion: 0)
        var points = [point]
        var own: [OwnLayerChange] = []
        var broadcast: [BroadcastSetChange] = []
        var nextBroadcastID: Int64 = 1
        var reachedAt: Int64?
        for _ in 0..<steps {
            if random.next() % 3 == 0 {
                var added: [BroadcastBadge] = []
                var withdrawn: [BroadcastBadge] = []
                if random.next() % 2 == 0 || point.broadcasts.isEmpty {
                    let path = paths[Int(random.next() % UInt64(paths.count))]
                    added.append(BroadcastBadge(id: nextBroadcastID, path: path, count: Int64(random.next() % 4)))
                    nextBroadcastID += 1
                } else if let victim = point.broadcasts.values.min(by: { $0.id < $1.id }) {
                    withdrawn.append(victim)
                }
                for badge in added { point.broadcasts[badge.id] = badge }
                for badge in withdrawn { point.broadcasts[badge.id] = nil }
                point.broadcastVersion += 1
                broadcast.append(BroadcastSetChange(version: point.broadcastVersion, added: added, withdrawn: withdrawn))
            } else {
                point.userVersion += 1
                var nodes: [OwnLayerChange.Node] = []
                for path in paths where random.next() % 3 == 0 {
                    let before = point.aggregates[path]
                    let after: BadgeAggregate? =
                        random.next() % 3 == 0 ? nil : BadgeAggregate(count: Int64(random.next() % 5), unseen: Int64(random.next() % 2))
                    guard before != after else { continue }
                    point.aggregates[path] = after
                    nodes.append(.init(path: path, before: before, after: after))
                }
                if let target = point.broadcasts.keys.first(where: { point.dismissals[$0] == nil }), random.next() % 2 == 0 {
                    point.dismissals[target] = point.userVersion
                }
                own.append(OwnLayerChange(version: point.userVersion, broadcastVersion: point.broadcastVersion, nodes: nodes))
                reachedAt = point.broadcastVersion
            }
            points.append(point)
        }
        return (points, own, broadcast, reachedAt)
    }

    @Test("every earlier version rebuilds to exactly what the user saw then, step by step", arguments: 0..<40)
    func rebuildsEveryVersion(seed: UInt64) {
        let (points, own, broadcast, reachedAt) = simulate(seed: seed, steps: 30)
        let history = BadgeHistory(current: points[points.count - 1], reachedAt: reachedAt, ownChanges: own, broadcastChanges: broadcast)
        for (index, point) in points.enumerated() {
            #expect(point.version == Int64(index))
            let rebuilt = history.layers(since: point.version)
            #expect(rebuilt == Array(points[index...]), "seed \(seed), since \(point.version)")
            #expect(history.layers(at: point.version)?.visibleAggregates == point.visibleAggregates)
        }
        #expect(history.layers(since: points[points.count - 1].version + 1) == nil)
        #expect(history.layers(since: -1) == nil)
    }

    @Test("a version the log no longer reaches, or beyond the step limit, gives nil", arguments: 0..<20)
    func prunedLogGivesNil(seed: UInt64) {
        let (points, own, broadcast, reachedAt) = simulate(seed: seed, steps: 30)
        // The oldest ten own records and broadcast records are pruned.
        let keptOwn = own.filter { $0.version > 5 }
        let keptBroadcast = broadcast.filter { $0.version > 3 }
        let history = BadgeHistory(
            current: points[points.count - 1], reachedAt: reachedAt, ownChanges: keptOwn, broadcastChanges: keptBroadcast)
        for point in points {
            guard let rebuilt = history.layers(at: point.version) else {
                // Nil only where a pruned record lies on the way back (own version 5 was reached at a
                // broadcast version no kept record tells).
                #expect(point.userVersion <= 5 || point.broadcastVersion < 3)
                continue
            }
            #expect(rebuilt == point)
        }
        let latest = points[points.count - 1].version
        #expect(history.layers(at: latest - 3, limit: 2) == nil)
        #expect(history.layers(at: latest - 2, limit: 2) == points[points.count - 3])
    }

    @Test("a dismissal shows from its own version; the broadcast counts until then")
    func dismissalsFollowTheOwnVersion() {
        let broadcast = BroadcastBadge(id: 7, path: path("root.news"), count: 2)
        var layers = BadgeLayers(userVersion: 3, broadcastVersion: 1, broadcasts: [7: broadcast], dismissals: [7: 4])
        #expect(layers.visibleAggregates[BadgePath.root]?.count == 2)
        layers.userVersion = 4
        #expect(layers.visibleAggregates[BadgePath.root] == nil)
    }
}
