public import BadgeCore
public import Foundation

/// Generates random badge mutations for property tests: a few users over a small path vocabulary
/// (labels `a`–`d` at depths 0–4 by default), so that paths, parents and subtrees collide often.
///
/// It mixes sets (dots and counts, with and without icons), increments, decrements, plain clears,
/// forced clears, item adds, item removes, seens and mutes (mutes, snoozes and unmutes) with
/// configurable weights. Mutations carry no expiry
/// unless ``expiries`` is set. Each carries an `occurredAt`, the previous one's plus a millisecond
/// from ``firstTime`` (a fixed time in the past): the generated order is the order they occurred
/// in, so a model that applies them in order agrees with a batch of them.
public struct RandomBadgeOperations: Sendable {
    /// Relative weights of the kinds of mutation.
    public struct Weights: Sendable, Hashable {
        /// A set with count 0 (a dot).
        public var setDot: Int
        /// A set with a count above 0.
        public var setCount: Int
        /// An increment.
        public var increment: Int
        /// A plain clear.
        public var clear: Int
        /// A forced clear.
        public var forcedClear: Int
        /// A decrement.
        public var decrement: Int
        /// An item add.
        public var addItem: Int
        /// An item remove.
        public var removeItem: Int
        /// A seen (of the node's subtree).
        public var seen: Int
        /// A mute, a snooze (ended, or ending far ahead) or an unmute of a node below `root`.
        public var mute: Int

        /// Weights with the given values; the defaults favour sets and increments.
        public init(
            setDot: Int = 3, setCount: Int = 3, increment: Int = 5, clear: Int = 3, forcedClear: Int = 1,
            decrement: Int = 2, addItem: Int = 4, removeItem: Int = 2, seen: Int = 2, mute: Int = 2
        ) {
            self.setDot = setDot
            self.setCount = setCount
            self.increment = increment
            self.clear = clear
            self.forcedClear = forcedClear
            self.decrement = decrement
            self.addItem = addItem
            self.removeItem = removeItem
            self.seen = seen
            self.mute = mute
        }

        /// Mostly increments, with now and then clears, decrements, items, seens and mutes: most
        /// users' rollups add their deltas, and some recount (a decremented counter always does).
        public static let additive = Weights(
            setDot: 0, setCount: 0, increment: 60, clear: 2, forcedClear: 1, decrement: 1, addItem: 2, removeItem: 1, seen: 3,
            mute: 1)

        /// Every kind, all of which follow the order-free rules now (sets and decrements by time
        /// too), with items and clears more often than the defaults, for the arrival-order tests.
        public static let orderFree = Weights(
            setDot: 2, setCount: 2, increment: 4, clear: 2, forcedClear: 1, decrement: 2, addItem: 6, removeItem: 2, seen: 2,
            mute: 2)
    }

    /// The users mutations are for (never empty).
    public let users: [UserID]
    /// The labels paths are made of.
    public var labels: [String]
    /// The deepest path made (labels after `root`).
    public var maximumDepth: Int
    /// The weights of the kinds of mutation.
    public var weights: Weights
    /// Icons chosen from (besides none) by sets.
    public var icons: [BadgeIcon]
    /// Expiries chosen from for sets and increments; empty (the default) for no expiry. When not
    /// empty, a third of sets and increments get one of them.
    public var expiries: [Date]
    /// The largest count of a set and `by` of an increment.
    public var maximumCount: Int64
    /// The item ids adds and removes choose from.
    public var items: [ItemID]
    /// The `occurredAt` of the next mutation (by default 2023-11-14T22:13:20Z, before any test's
    /// `now`); nil for none.
    public var firstTime: Date? = Date(timeIntervalSince1970: 1_700_000_000)
    private var random: SeededRandom

    /// A generator for `users` whose sequence is fixed by `seed`; an empty `users` stands for
    /// the one user `u1`.
    public init(users: [UserID], seed: UInt64) {
        self.users = users.isEmpty ? [UserID(rawValue: "u1")!] : users
        self.labels = ["a", "b", "c", "d"]
        self.maximumDepth = 4
        self.weights = Weights()
        self.icons = ["new", "hot"].compactMap { BadgeIcon(rawValue: $0) }
        self.expiries = []
        self.maximumCount = 20
        self.items = (0..<8).compactMap { ItemID(rawValue: "m\($0)") }
        self.random = SeededRandom(seed: seed)
    }

    /// A random path of the vocabulary, `root` included.
    public mutating func nextPath() -> BadgePath {
        let depth = Int.random(in: 0...max(maximumDepth, 0), using: &random)
        var path = BadgePath.root
        for _ in 0..<depth {
            guard let label = labels.randomElement(using: &random),
                let child = try? path.appending(label: label)
            else { break }
            path = child
        }
        return path
    }

    /// The next random mutation.
    public mutating func next() -> BadgeMutation {
        let user = users[Int.random(in: 0..<users.count, using: &random)]
        var path = nextPath()
        let icon = Bool.random(using: &random) ? icons.randomElement(using: &random) : nil
        let count = Int64.random(in: 1...max(maximumCount, 1), using: &random)
        let item = items.randomElement(using: &random) ?? ItemID(rawValue: "m")!
        // A snooze that has ended (at 2023-11-15) or ends far ahead; nil: a mute.
        let until = [nil, Date(timeIntervalSince1970: 1_700_050_000), Date(timeIntervalSince1970: 4_100_000_000)]
            .randomElement(using: &random) ?? nil
        let muting: BadgeOperation = Int.random(in: 0..<3, using: &random) == 0 ? .unmute : .mute(until: until)
        let kinds: [(Int, BadgeOperation)] = [
            (weights.setDot, .set(count: 0, icon: icon)),
            (weights.setCount, .set(count: count, icon: icon)),
            (weights.increment, .increment(by: count)),
            (weights.clear, .clear(force: false)),
            (weights.forcedClear, .clear(force: true)),
            (weights.decrement, .decrement(by: count)),
            (weights.addItem, .addItem(item)),
            (weights.removeItem, .removeItem(item)),
            (weights.seen, .seen),
            (weights.mute, muting),
        ]
        var pick = Int.random(in: 0..<max(kinds.map { max($0.0, 0) }.reduce(0, +), 1), using: &random)
        var operation = kinds[0].1
        for (weight, kind) in kinds where weight > 0 {
            if pick < weight {
                operation = kind
                break
            }
            pick -= weight
        }
        if operation.isMuteOperation, path == .root, let label = labels.first, let child = try? path.appending(label: label) {
            path = child
        }
        var expiresAt: Date?
        if !expiries.isEmpty, Int.random(in: 0..<3, using: &random) == 0 {
            switch operation {
            case .set, .increment: expiresAt = expiries.randomElement(using: &random)
            default: break
            }
        }
        let occurredAt = firstTime
        firstTime = firstTime?.addingTimeInterval(0.001)
        return BadgeMutation(user: user, path: path, operation: operation, expiresAt: expiresAt, occurredAt: occurredAt)
    }

    /// The next `count` random mutations.
    public mutating func sequence(count: Int) -> [BadgeMutation] {
        (0..<max(count, 0)).map { _ in next() }
    }

    /// A random integer in `range`, from the same seeded sequence (for test choices such as batch
    /// boundaries).
    public mutating func integer(in range: ClosedRange<Int>) -> Int {
        Int.random(in: range, using: &random)
    }
}
