public import BadgeCore

/// What one ingest batch writes, in the store's terms (the Kafka side builds it from its records):
/// the partitions' offsets to move, the accepted events' operations and the rejected records.
public struct IngestBatchWrite: Sendable {
    /// The consumer group whose stored offsets move.
    public var group: String
    /// For each partition of the batch, the stored offset expected and the one to store.
    public var offsets: [OffsetAdvance]
    /// The accepted events' operations, in record order.
    public var events: [MappedOperation]
    /// The records that cannot be applied, in record order.
    public var rejected: [RejectedRow]
    /// Whether to try plain inserts first (see
    /// ``IngestTransaction/applyEvents(_:into:newRowsFirst:on:)``); false writes with merging
    /// inserts only, while a recent batch's plain inserts met stored rows (`MergingStretch`).
    public var newRowsFirst: Bool
    /// Whether the batch's transaction also brings its users current (see
    /// ``IngestTransaction/commit(_:on:)``); false leaves every one to the rollup.
    public var rollUp: Bool
    /// With `rollUp`, the most users the batch brings current itself (in user order); the rest
    /// are left to the rollup. Each is an entry of PostgreSQL's shared lock table until the
    /// batch commits (``IngestTransaction/rollUpLimit(writers:on:)`` sizes it to the server).
    public var rollUpLimit: Int

    /// A batch write.
    public init(
        group: String, offsets: [OffsetAdvance], events: [MappedOperation], rejected: [RejectedRow], newRowsFirst: Bool = true,
        rollUp: Bool = false, rollUpLimit: Int = IngestTransaction.rollUpLimit
    ) {
        self.group = group
        self.offsets = offsets
        self.events = events
        self.rejected = rejected
        self.newRowsFirst = newRowsFirst
        self.rollUp = rollUp
        self.rollUpLimit = rollUpLimit
    }
}

/// A Kafka partition as the store names it (the `consumer_offset` and `rejected_record` keys).
public struct StoredPartition: Sendable, Hashable, Comparable {
    /// The topic.
    public var topic: String
    /// The partition number.
    public var partition: Int32

    /// A partition.
    public init(topic: String, partition: Int32) {
        self.topic = topic
        self.partition = partition
    }

    /// Topic first, then partition: the one lock order of every writer.
    public static func < (lhs: StoredPartition, rhs: StoredPartition) -> Bool {
        (lhs.topic, lhs.partition) < (rhs.topic, rhs.partition)
    }
}

/// One partition's compare-and-set: from `expected` (nil: no stored row yet) to `next`.
public struct OffsetAdvance: Sendable, Hashable {
    /// The partition.
    public var partition: StoredPartition
    /// The stored next offset the writer expects; nil when it expects no row.
    public var expected: Int64?
    /// The next offset to store (the batch's highest offset + 1).
    public var next: Int64
    /// How many records waited in the partition after the batch, when known (the rollup
    /// coalesces while ingest is far behind: `BadgeStore.ingestWaiting`).
    public var waiting: Int64?

    /// An advance.
    public init(partition: StoredPartition, expected: Int64?, next: Int64, waiting: Int64? = nil) {
        self.partition = partition
        self.expected = expected
        self.next = next
        self.waiting = waiting.map { max(0, $0) }
    }
}

/// A record's origin and bytes as kept in `rejected_record`.
public struct StoredRecord: Sendable, Hashable {
    /// The topic it was read from.
    public var topic: String
    /// Its partition.
    public var partition: Int32
    /// Its offset in the partition.
    public var offset: Int64
    /// The key, unchanged (nil: none).
    public var key: [UInt8]?
    /// The value, unchanged (nil: none).
    public var payload: [UInt8]?

    /// A stored record.
    public init(topic: String, partition: Int32, offset: Int64, key: [UInt8]?, payload: [UInt8]?) {
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.key = key
        self.payload = payload
    }
}

/// A record that cannot be applied, as ingest stores it.
public struct RejectedRow: Sendable, Hashable {
    /// The record.
    public var record: StoredRecord
    /// Why it was rejected.
    public var rejection: EventRejection
    /// The event id, when the record had a readable one.
    public var eventID: String?

    /// A rejected row.
    public init(record: StoredRecord, rejection: EventRejection, eventID: String?) {
        self.record = record
        self.rejection = rejection
        self.eventID = eventID
    }
}

/// A lost compare-and-set: the stored offset of `partition` was not the expected one, so another
/// consumer owns the partition. Nothing of the batch was written; roll back and give it up.
public struct OffsetConflict: Error, Sendable, Hashable {
    /// The partition.
    public var partition: StoredPartition
    /// The offset the writer expected (nil: no row).
    public var expected: Int64?
    /// The offset found (nil: no row).
    public var found: Int64?
}

/// What one committed batch did.
public struct BatchOutcome: Sendable, Hashable {
    /// Events applied (to users or as broadcasts), duplicates not included.
    public var applied: Int
    /// Accepted events skipped because they were applied before, or earlier in the batch, to
    /// each of their users (a broadcast: its id).
    public var duplicates: Int
    /// Rejected records by reason (a re-delivered one is counted again, but stored once).
    public var rejected: [RejectionReason: Int]
    /// Distinct users whose badge state the batch wrote (and marked dirty).
    public var users: Int
    /// Broadcast events applied (sets, increments and clears for `audience: all`).
    public var broadcasts: Int
    /// Times the batch was written a second time with merging inserts, after its plain inserts
    /// met a stored row (see ``IngestTransaction/applyEvents(_:into:newRowsFirst:on:)``).
    public var rewrites: Int
    /// Accepted events dropped because every user they name was erased on request
    /// (`UserData.erase`; an event that names others too still reaches those).
    public var erased: Int = 0
    /// Users the batch's own transaction brought current (``IngestBatchWrite/rollUp``); the
    /// others of `users` wait for the rollup.
    public var rolledUp: Int = 0

    /// An outcome with the given counts.
    public init(
        applied: Int = 0, duplicates: Int = 0, rejected: [RejectionReason: Int] = [:], users: Int = 0,
        broadcasts: Int = 0, rewrites: Int = 0
    ) {
        self.applied = applied
        self.duplicates = duplicates
        self.rejected = rejected
        self.users = users
        self.broadcasts = broadcasts
        self.rewrites = rewrites
    }

    /// All rejected records of the batch.
    public var rejectedCount: Int { rejected.values.reduce(0, +) }
}
