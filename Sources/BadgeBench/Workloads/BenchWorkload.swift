import BadgeCore

/// N synthetic direct-operation events, encoded as producers send them and keyed by user, over
/// `users` × `paths` (`root.bench.p0…`), drawn from a seeded generator so that runs are
/// comparable: the counter workload is 90% `incr` by 1 and 10% `set` with a count of 0–9; the
/// items workload is 90% `add` of a new item and 10% `remove` of an item added earlier (at its
/// user and path).
public struct BenchWorkload: Sendable {
    /// What the events do.
    public enum Kind: String, Sendable, CaseIterable {
        /// 90% `incr` by 1, 10% `set`.
        case counter
        /// 90% `add` of a new item, 10% `remove` of an earlier one.
        case items
        /// Every event an `incr` by 1 (what `bench pipeline` and `bench backlog` publish).
        case increments
    }

    /// Per event: the record key (the user id's bytes).
    public let keys: [[UInt8]]
    /// Per event: the JSON payload, as producers send it.
    public let payloads: [[UInt8]]
    /// Per event: the user's number.
    public let userIndexes: [Int32]
    /// Per event: the path's number (`root.bench.p<number>`).
    public let pathIndexes: [Int32]
    /// Per event: `incr`: the amount; `set`: the count.
    public let counts: [Int64]
    /// What user ids start with (`u`, then the user's number).
    public let userPrefix: String
    /// What the events do.
    public let kind: Kind
    /// How many of the events are `incr` or `add` (the rest are `set` or `remove`).
    public let incrementCount: Int
    /// The payloads' bytes in all.
    public let payloadBytes: Int

    /// How many events.
    public var count: Int { payloads.count }

    /// `events` events over `users` × `paths`, drawn from `seed`; event ids are `<idPrefix>-<n>`.
    ///
    /// - Throws: a validation error when a prefix makes an invalid event or user id.
    public init(
        events: Int, users: Int, paths: Int, seed: UInt64, idPrefix: String, userPrefix: String, kind: Kind = .counter
    ) throws {
        var generator = SplitMix64(seed: seed)
        let encoder = EventEncoder()
        let badgePaths = try (0..<paths).map { try BadgePath(validating: "root.bench.p\($0)") }
        var keys: [[UInt8]] = []
        var payloads: [[UInt8]] = []
        var userIndexes: [Int32] = []
        var pathIndexes: [Int32] = []
        var counts: [Int64] = []
        keys.reserveCapacity(events)
        payloads.reserveCapacity(events)
        var increments = 0
        var bytes = 0
        var added: [(user: Int32, path: Int32, item: Int)] = []
        for index in 0..<events {
            var user = Int32(generator.next() % UInt64(users))
            var path = Int32(generator.next() % UInt64(paths))
            let isSet = generator.next() % 10 == 0
            var amount: Int64 = isSet ? Int64(generator.next() % 10) : 1
            let operation: BadgeOperation
            switch kind {
            case .counter:
                operation = isSet ? .set(count: amount, icon: nil) : .increment(by: amount)
                if !isSet { increments += 1 }
            case .increments:
                amount = 1
                operation = .increment(by: 1)
                increments += 1
            case .items:
                if isSet, !added.isEmpty {
                    let earlier = added[Int(generator.next() % UInt64(added.count))]
                    (user, path, amount) = (earlier.user, earlier.path, 0)
                    operation = .removeItem(try ItemID(validating: "i\(earlier.item)"))
                } else {
                    added.append((user, path, index))
                    amount = 1
                    operation = .addItem(try ItemID(validating: "i\(index)"))
                    increments += 1
                }
            }
            let userText = "\(userPrefix)\(user)"
            let event = BadgeEvent(
                id: try EventID(validating: "\(idPrefix)-\(index)"),
                audience: .users([try UserID(validating: userText)]),
                body: .operation(path: badgePaths[Int(path)], operation: operation))
            let payload = encoder.encode(event)
            bytes += payload.count
            keys.append(Array(userText.utf8))
            payloads.append(payload)
            userIndexes.append(user)
            pathIndexes.append(path)
            counts.append(amount)
        }
        self.keys = keys
        self.payloads = payloads
        self.userIndexes = userIndexes
        self.pathIndexes = pathIndexes
        self.counts = counts
        self.userPrefix = userPrefix
        self.kind = kind
        self.incrementCount = increments
        self.payloadBytes = bytes
    }

    /// How many events may be published but not yet committed on the mock cluster: about 2 MB
    /// of records per partition (it keeps ~5 MB), and at least four batches.
    public func inFlightWindow(partitions: Int, batchSize: Int) -> Int {
        let average = count > 0 ? payloadBytes / count : 100
        let perRecord = average + 60
        let perPartition = 2_000_000 / perRecord
        return max(4 * batchSize, partitions * perPartition)
    }

    /// One batch of rows for the plain upsert, distinct by (user, path).
    public struct UpsertBatch: Sendable {
        /// The user ids.
        public var users: [String] = []
        /// The paths, as ltree text.
        public var paths: [String] = []
        /// The counts.
        public var counts: [Int64] = []
    }

    /// The rows in batches of `size` events, each batch's rows distinct by (user, path) as one
    /// `INSERT … ON CONFLICT DO UPDATE` requires (the last tuple of a pair wins).
    public func upsertBatches(size: Int) -> [UpsertBatch] {
        var batches: [UpsertBatch] = []
        var start = 0
        while start < count {
            let end = min(count, start + size)
            var slot: [Int64: Int] = [:]
            var batch = UpsertBatch()
            for index in start..<end {
                let key = Int64(userIndexes[index]) << 32 | Int64(pathIndexes[index])
                if let existing = slot[key] {
                    batch.counts[existing] = counts[index]
                    continue
                }
                slot[key] = batch.users.count
                batch.users.append("\(userPrefix)\(userIndexes[index])")
                batch.paths.append("root.bench.p\(pathIndexes[index])")
                batch.counts.append(counts[index])
            }
            batches.append(batch)
            start = end
        }
        return batches
    }
}

