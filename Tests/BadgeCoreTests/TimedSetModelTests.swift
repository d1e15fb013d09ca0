import BadgeCore
import Foundation
import TestSupport
import Testing

/// Sets, decrements, icons and expiries by the time they occurred (DESIGN §2): each rule in
/// both arrival orders.
@Suite("Timed sets and decrements in the model")
struct TimedSetModelTests {
    let node = path("root.promo.p1")

    func at(_ seconds: Double) -> Date { now.addingTimeInterval(seconds - 1_000) }

    /// The node's counter after applying `operations` (with their times) in the given order, and
    /// in the reverse order: both must be the same.
    func bothOrders(_ operations: [(BadgeOperation, Double, Date?)], at path: BadgePath? = nil) -> (BadgeState?, BadgeState?) {
        let path = path ?? node
        var forward = BadgeTree()
        var backward = BadgeTree()
        for (operation, time, expiry) in operations {
            forward.apply(operation, at: path, expiresAt: expiry, occurredAt: at(time), now: now)
        }
        for (operation, time, expiry) in operations.reversed() {
            backward.apply(operation, at: path, expiresAt: expiry, occurredAt: at(time), now: now)
        }
        return (forward.counters[path], backward.counters[path])
    }

    @Test("a clear takes a set that occurred at or before it, and leaves a later one, whichever arrives first")
    func setAndClear() {
        let (taken, takenLate) = bothOrders([(.set(count: 2, icon: nil), 1, nil), (.clear(force: false), 2, nil)])
        #expect(taken == nil && takenLate == nil)
        let (kept, keptLate) = bothOrders([(.set(count: 2, icon: nil), 3, nil), (.clear(force: false), 2, nil)])
        #expect(kept == BadgeState(count: 2) && keptLate == kept)
        // At the same time, the clear wins.
        let (tie, tieLate) = bothOrders([(.set(count: 2, icon: nil), 2, nil), (.clear(force: false), 2, nil)])
        #expect(tie == nil && tieLate == nil)
        // A forced clear of an ancestor too.
        var tree = BadgeTree()
        tree.apply(.clear(force: true), at: path("root.promo"), occurredAt: at(2), now: now)
        tree.apply(.set(count: 1, icon: nil), at: node, occurredAt: at(1), now: now)
        #expect(tree.counters[node] == nil)
    }

    @Test("of two sets the later-timed holds, with its icon and expiry; an earlier one arriving late changes nothing")
    func setAndSet() throws {
        let soon = now.addingTimeInterval(60)
        let (state, late) = bothOrders([
            (.set(count: 5, icon: try icon("hot")), 1, soon), (.set(count: 2, icon: try icon("new")), 2, nil),
        ])
        #expect(state == BadgeState(count: 2, icon: try icon("new")))
        #expect(late == state)
        // At one time: the larger count, then icon, then expiry (none the largest).
        let (tie, tieLate) = bothOrders([(.set(count: 5, icon: nil), 1, soon), (.set(count: 5, icon: nil), 1, nil)])
        #expect(tie == BadgeState(count: 5) && tieLate == tie)
    }

    @Test("a set replaces what occurred up to it: earlier increments and decrements go, later ones stay")
    func setAndIncrements() {
        let (state, late) = bothOrders([
            (.increment(by: 4), 1, nil), (.decrement(by: 1), 1.5, nil), (.set(count: 10, icon: nil), 2, nil), (.increment(by: 3), 3, nil),
            (.decrement(by: 2), 4, nil),
        ])
        #expect(state?.count == 11)
        #expect(late == state)
    }

    @Test("a decrement takes from what occurred before it: one that arrives before its increment still takes it; at 0 nothing shows")
    func decrements() {
        let (state, late) = bothOrders([(.increment(by: 3), 1, nil), (.decrement(by: 2), 2, nil)])
        #expect(state?.count == 1 && late == state)
        // A decrement that occurred before the increment meets nothing.
        let (early, earlyLate) = bothOrders([(.decrement(by: 2), 1, nil), (.increment(by: 3), 2, nil)])
        #expect(early?.count == 3 && earlyLate == early)
        // One that takes a set to 0 takes its dot and icon; what follows starts from 0.
        let (gone, goneLate) = bothOrders([(.set(count: 2, icon: try? icon("new")), 1, nil), (.decrement(by: 5), 2, nil)])
        #expect(gone == nil && goneLate == nil)
        let (again, againLate) = bothOrders([
            (.set(count: 2, icon: try? icon("new")), 1, nil), (.decrement(by: 5), 2, nil), (.increment(by: 1), 3, nil),
        ])
        #expect(again == BadgeState(count: 1) && againLate == again)
    }

    @Test("a decrement after a seen takes from the unseen part first; one before it keeps the unseen part within the count")
    func decrementsAndSeen() {
        var tree = BadgeTree()
        tree.apply(.increment(by: 3), at: node, occurredAt: at(1), now: now)
        tree.apply(.seen, at: .root, occurredAt: at(2), now: now)
        tree.apply(.increment(by: 2), at: node, occurredAt: at(3), now: now)
        tree.apply(.decrement(by: 1), at: node, occurredAt: at(4), now: now)
        #expect(tree.aggregates(now: now)[node] == BadgeAggregate(count: 4, unseen: 1))
        tree.apply(.decrement(by: 2), at: node, occurredAt: at(1.5), now: now)
        #expect(tree.aggregates(now: now)[node] == BadgeAggregate(count: 2, unseen: 1))
    }

    @Test("a set is seen in full when a seen at or after its time covers it, whichever arrives first")
    func setAndSeen() {
        for (setTime, seen) in [(1.0, true), (3.0, false)] {
            var forward = BadgeTree()
            forward.apply(.set(count: 4, icon: nil), at: node, occurredAt: at(setTime), now: now)
            forward.apply(.seen, at: .root, occurredAt: at(2), now: now)
            var backward = BadgeTree()
            backward.apply(.seen, at: .root, occurredAt: at(2), now: now)
            backward.apply(.set(count: 4, icon: nil), at: node, occurredAt: at(setTime), now: now)
            #expect(forward.aggregates(now: now)[node]?.unseen == (seen ? 0 : 4))
            #expect(backward.aggregates(now: now) == forward.aggregates(now: now))
        }
    }

    @Test("an increment's expiry holds only over one given earlier, whichever arrives first")
    func expiries() {
        let soon = now.addingTimeInterval(60)
        let later = now.addingTimeInterval(600)
        let (state, late) = bothOrders([(.increment(by: 1), 1, later), (.increment(by: 1), 2, soon)])
        #expect(state?.expiresAt == soon && late == state)
        // A set's expiry is given at its time: an earlier increment's does not replace it.
        let (set, setLate) = bothOrders([(.set(count: 1, icon: nil), 2, nil), (.increment(by: 1), 3, later)])
        #expect(set?.expiresAt == later && setLate == set)
        // A clear keeps on the increments it leaves only an expiry given after it.
        let (carried, carriedLate) = bothOrders([(.increment(by: 1), 1, soon), (.clear(force: false), 2, nil), (.increment(by: 1), 3, nil)])
        #expect(carried == BadgeState(count: 1) && carriedLate == carried)
    }

    @Test("a clear at a rendered version keeps the set's time: an earlier set or increment arriving later stays replaced")
    func clearShownKeepsTheSetTime() {
        var tree = BadgeTree()
        tree.apply(.set(count: 3, icon: nil), at: node, occurredAt: at(5), now: now)
        tree.nextVersion = 2
        tree.clearShown(node, subtree: false, through: 1, settled: nil, now: now)
        #expect(tree.counters[node] == nil)
        tree.apply(.set(count: 9, icon: nil), at: node, occurredAt: at(4), now: now)
        tree.apply(.increment(by: 2), at: node, occurredAt: at(3), now: now)
        #expect(tree.counters[node] == nil)
        tree.apply(.increment(by: 1), at: node, occurredAt: at(6), now: now)
        #expect(tree.counters[node]?.count == 1)
    }

    @Test("the fold of old increments keeps what shows, decrements included, and the set's time")
    func fold() {
        var tree = BadgeTree()
        tree.apply(.set(count: 2, icon: try? icon("new")), at: node, occurredAt: at(1), now: now)
        tree.apply(.increment(by: 3), at: node, occurredAt: at(2), now: now)
        tree.apply(.decrement(by: 4), at: node, occurredAt: at(3), now: now)
        tree.nextVersion = 2
        tree.apply(.increment(by: 5), at: node, occurredAt: at(4), now: now)
        let before = tree.aggregates(now: now)
        tree.foldIncrements(shownThrough: 1)
        #expect(tree.aggregates(now: now) == before)
        #expect(tree.increments[node]?.count == 1)
        tree.apply(.set(count: 7, icon: nil), at: node, occurredAt: at(0.5), now: now)
        #expect(tree.aggregates(now: now) == before)
    }
}
