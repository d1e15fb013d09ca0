public import BadgeCore
public import Foundation

/// Generates random badge mutations for property tests: a few users over a small path vocabulary
/// (labels `a`–`d` at depths 0–4 by default), so that paths, parents and subtrees collide often.
///
/// It mixes sets (dots and counts, with and without icons), increments, plain clears and forced
/// clears with configurable weights. Mutations carry no expiry unless ``expiries`` is set.
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

        /// Weights with the given values; the defaults favour sets and increments.
        public init(setDot: Int = 3, setCount: Int = 3, increment: Int = 5, clear: Int = 3, forcedClear: Int = 1) {
            self.setDot = setDot
            self.setCount = setCount
            self.increment = increment
            self.clear = clear
            self.forcedClear = forcedClear
        }
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
        let path = nextPath()
        let total = max(weights.setDot + weights.setCount + weights.increment + weights.clear + weights.forcedClear, 1)
        var pick = Int.random(in: 0..<total, using: &random)
        let operation: BadgeOperation
        let icon = Bool.random(using: &random) ? icons.randomElement(using: &random) : nil
        let count = Int64.random(in: 1...max(maximumCount, 1), using: &random)
        if pick < weights.setDot {
            operation = .set(count: 0, icon: icon)
        } else if (pick - weights.setDot) < weights.setCount {
            operation = .set(count: count, icon: icon)
        } else {
            pick -= weights.setDot + weights.setCount
            if pick < weights.increment {
                operation = .increment(by: count)
            } else if pick - weights.increment < weights.clear {
                operation = .clear(force: false)
            } else {
                operation = .clear(force: true)
            }
        }
        var expiresAt: Date?
        if !expiries.isEmpty, Int.random(in: 0..<3, using: &random) == 0 {
            if case .clear = operation {} else { expiresAt = expiries.randomElement(using: &random) }
        }
        return BadgeMutation(user: user, path: path, operation: operation, expiresAt: expiresAt)
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
