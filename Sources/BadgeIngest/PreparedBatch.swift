public import BadgeCore

/// One poll's records, decoded, validated and mapped by the rules, in record order: no I/O.
///
/// Every record lands in exactly one of ``accepted`` and ``rejected``; a bad record never stops
/// the good records beside it (DESIGN §3). ``IngestStore/commit(_:group:expectedOffsets:on:)``
/// writes the result in one transaction.
public struct PreparedBatch: Sendable {
    /// The records, as given.
    public let records: [IngestRecord]
    /// The records that map to an operation, in record order.
    public let accepted: [AcceptedEvent]
    /// The records that cannot be applied, in record order.
    public let rejected: [RejectedRecord]
    /// For each partition in the batch, the offset to store after it: its highest offset + 1.
    public let nextOffsets: [TopicPartition: Int64]
    /// For each partition in the batch whose high watermark the consumer knows, how many
    /// records waited in it after the batch (stored with the offsets; the rollup coalesces while
    /// ingest is far behind). Set by the ingest worker; empty until then.
    public var waiting: [TopicPartition: Int64] = [:]

    /// Decodes, validates and maps `records` with `rules`, through ``EventIntake``.
    ///
    /// A record without a value is rejected as `malformed_json`; every other rejection is the
    /// intake's (see ``EventDecoder`` and ``RuleSet/map(_:)``), with the event id it names.
    public init(records: [IngestRecord], rules: RuleSet) {
        let intake = EventIntake(rules: rules)
        var accepted: [AcceptedEvent] = []
        var rejected: [RejectedRecord] = []
        var nextOffsets: [TopicPartition: Int64] = [:]
        for record in records {
            let partition = record.topicPartition
            let next = record.offset + 1
            if let stored = nextOffsets[partition] {
                nextOffsets[partition] = max(stored, next)
            } else {
                nextOffsets[partition] = next
            }
            guard let payload = record.payload else {
                let rejection = EventRejection(reason: .malformedJSON, message: "record has no value")
                rejected.append(RejectedRecord(record: record, rejection: rejection, eventID: nil))
                continue
            }
            switch intake.map(payload) {
            case .failure(let refused):
                rejected.append(
                    RejectedRecord(record: record, rejection: refused.rejection, eventID: refused.eventID?.rawValue))
            case .success(let operation):
                accepted.append(
                    AcceptedEvent(
                        topic: record.topic, partition: record.partition, offset: record.offset, operation: operation))
            }
        }
        self.records = records
        self.accepted = accepted
        self.rejected = rejected
        self.nextOffsets = nextOffsets
    }
}

extension PreparedBatch {
    /// Whether the users of `batches` are at least half as many as their user events (on
    /// average at most two events a user; broadcasts are not counted): a rollup round would
    /// gather few writes of theirs, so ingest brings them current itself a little behind too.
    public static func usersAreSpread(_ batches: [PreparedBatch]) -> Bool {
        var users: Set<UserID> = []
        var events = 0
        for batch in batches {
            for event in batch.accepted {
                guard case .users(let audience) = event.operation.audience else { continue }
                users.formUnion(audience)
                events += audience.count
            }
        }
        return users.count >= events - users.count
    }
}

/// A record that mapped to one badge operation, with where it came from.
public struct AcceptedEvent: Sendable, Hashable {
    /// The topic it was read from.
    public var topic: String
    /// Its partition.
    public var partition: Int32
    /// Its offset in the partition.
    public var offset: Int64
    /// The operation it maps to (its event id, audience, path, operation and expiry).
    public var operation: MappedOperation

    /// Creates an accepted event.
    public init(topic: String, partition: Int32, offset: Int64, operation: MappedOperation) {
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.operation = operation
    }

    /// The record's partition.
    public var topicPartition: TopicPartition { TopicPartition(topic: topic, partition: partition) }
}
