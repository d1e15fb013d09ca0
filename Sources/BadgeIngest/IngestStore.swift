import BadgeCore
public import BadgeStore
public import LibPQ

/// The Kafka side's door to BadgeStore's ingest transaction (``IngestTransaction``): it turns a
/// ``PreparedBatch`` and Kafka partitions into the store's terms, and a lost offset
/// compare-and-set into ``IngestError`` `.fenced`. All SQL is in BadgeStore (`Sources/BadgeStore/Ingest`).
public enum IngestStore {
    /// The stored offsets (the next offset to read) of `group` for `partitions`; a partition
    /// without a stored row is absent from the answer.
    public static func storedOffsets(
        group: String, partitions: [TopicPartition], on connection: PGConnection
    ) throws(PGError) -> [TopicPartition: Int64] {
        let stored = try IngestTransaction.storedOffsets(group: group, partitions: partitions.map(\.stored), on: connection)
        var offsets: [TopicPartition: Int64] = [:]
        for (partition, offset) in stored {
            offsets[TopicPartition(topic: partition.topic, partition: partition.partition)] = offset
        }
        return offsets
    }

    /// Writes one batch with ``IngestTransaction/commit(_:on:)``: the offsets of its partitions
    /// move from `expectedOffsets[partition]` (absent: no row may exist yet) to
    /// `batch.nextOffsets`. With `newRowsFirst`, its new rows go in with plain inserts first
    /// (see ``IngestTransaction/applyEvents(_:into:newRowsFirst:on:)``); with `rollUp`, the
    /// transaction also brings the batch's users current where it can, at most `rollUpLimit`
    /// (``IngestBatchWrite/rollUp``).
    /// The caller wraps it in one transaction and rolls back if it throws.
    ///
    /// - Throws: ``IngestError`` `.fenced` before any other write when a stored offset is not
    ///   the expected one (another consumer owns the partition: roll back, give it up);
    ///   `PGError` from the database (retry the whole batch when `isRetriable`).
    public static func commit(
        _ batch: PreparedBatch, group: String, expectedOffsets: [TopicPartition: Int64], newRowsFirst: Bool = true,
        rollUp: Bool = false, rollUpLimit: Int = IngestTransaction.rollUpLimit, on connection: PGConnection
    ) throws -> BatchOutcome {
        let write = IngestBatchWrite(
            group: group,
            offsets: batch.nextOffsets.map { partition, next in
                OffsetAdvance(
                    partition: partition.stored, expected: expectedOffsets[partition], next: next, waiting: batch.waiting[partition])
            },
            events: batch.accepted.map(\.operation),
            rejected: batch.rejected.map { RejectedRow(record: StoredRecord($0.record), rejection: $0.rejection, eventID: $0.eventID) },
            newRowsFirst: newRowsFirst, rollUp: rollUp, rollUpLimit: rollUpLimit)
        do {
            return try IngestTransaction.commit(write, on: connection)
        } catch let conflict as OffsetConflict {
            throw IngestError.fenced(
                TopicPartition(topic: conflict.partition.topic, partition: conflict.partition.partition),
                expected: conflict.expected, found: conflict.found)
        }
    }
}

extension TopicPartition {
    /// The partition in the store's terms.
    var stored: StoredPartition { StoredPartition(topic: topic, partition: partition) }
}

extension StoredRecord {
    /// The stored copy of a Kafka record (headers are not kept).
    public init(_ record: IngestRecord) {
        self.init(topic: record.topic, partition: record.partition, offset: record.offset, key: record.key, payload: record.payload)
    }
}

extension IngestRecord {
    /// A Kafka record rebuilt from its stored copy (without headers), to decode it again.
    public init(_ record: StoredRecord) {
        self.init(topic: record.topic, partition: record.partition, offset: record.offset, key: record.key, payload: record.payload)
    }
}
