public import BadgeCore
import BadgeStore
public import LibPQ

/// `reddot dlq`: the rejected records kept in `rejected_record`, for listing and for replaying
/// once their cause is fixed (a rule added, a bug fixed in a producer's mapping).
public enum DeadLetters {
    /// Which rejected records to list or replay.
    public struct Filter: Sendable {
        /// Only these ids (empty: any).
        public var ids: [Int64]
        /// Only this reason (`unknown_type`, …); nil: any.
        public var reason: String?
        /// Include records replayed already (listing only; a replay never takes them again).
        public var includeReplayed: Bool
        /// Only ids above this one (paging).
        public var afterID: Int64
        /// At most this many.
        public var limit: Int

        /// A filter; by default the first 100 records not replayed yet.
        public init(ids: [Int64] = [], reason: String? = nil, includeReplayed: Bool = false, afterID: Int64 = 0, limit: Int = 100) {
            self.ids = ids
            self.reason = reason
            self.includeReplayed = includeReplayed
            self.afterID = afterID
            self.limit = limit
        }
    }

    /// The rejected records that match, oldest first.
    public static func list(_ filter: Filter, on connection: PGConnection) throws(PGError) -> [StoredRejection] {
        try connection.query(
            DeadLetterSQL.list, [filter.afterID, filter.reason ?? "", filter.includeReplayed, filter.ids, filter.limit]
        ).rows.map { row throws(PGError) in try StoredRejection(row: row, statement: DeadLetterSQL.list.name) }
    }

    /// Replays the matching records not replayed yet, in the caller's transaction: each is decoded
    /// and mapped again with `rules`, as ingest would now. A record that passes is applied exactly
    /// once (its event id is deduplicated like any other: one applied since counts as done) and
    /// marked replayed; it stays in the table. One that still fails is left as it is.
    ///
    /// Rows are locked (`FOR UPDATE SKIP LOCKED`), so two replays never apply a record twice.
    public static func replay(_ filter: Filter, rules: RuleSet, on connection: PGConnection) throws -> ReplayOutcome {
        let rows = try connection.query(DeadLetterSQL.lockForReplay, [filter.afterID, filter.reason ?? "", filter.ids, filter.limit]).rows
        let stored = try rows.map { row throws(PGError) in try StoredRejection(row: row, statement: DeadLetterSQL.lockForReplay.name) }
        var outcome = ReplayOutcome()
        guard !stored.isEmpty else { return outcome }
        var idByOrigin: [TopicPartition: [Int64: Int64]] = [:]
        for rejection in stored {
            idByOrigin[TopicPartition(topic: rejection.record.topic, partition: rejection.record.partition), default: [:]][rejection.record.offset] =
                rejection.id
        }
        func id(of topic: String, _ partition: Int32, _ offset: Int64) -> Int64? {
            idByOrigin[TopicPartition(topic: topic, partition: partition)]?[offset]
        }
        let prepared = PreparedBatch(records: stored.map(\.record), rules: rules)
        for rejected in prepared.rejected {
            if let id = id(of: rejected.record.topic, rejected.record.partition, rejected.record.offset) {
                outcome.stillRejected.append((id, rejected.rejection))
            }
        }
        let eventIDs = prepared.accepted.map(\.operation.eventID.rawValue)
        let appliedBefore = Set(
            try connection.query(DeadLetterSQL.appliedAmong, [eventIDs]).rows.map { row throws(PGError) in try row.decode(0, as: String.self) })
        var batchOutcome = BatchOutcome()
        try IngestStore.applyEvents(prepared.accepted, into: &batchOutcome, on: connection)
        for event in prepared.accepted {
            guard let id = id(of: event.topic, event.partition, event.offset) else { continue }
            if appliedBefore.contains(event.operation.eventID.rawValue) {
                outcome.alreadyApplied.append(id)
            } else {
                outcome.replayed.append(id)
            }
        }
        try connection.query(DeadLetterSQL.markReplayed, [outcome.replayed + outcome.alreadyApplied])
        return outcome
    }
}

/// What a replay did, by rejected-record id.
public struct ReplayOutcome: Sendable {
    /// Applied now.
    public var replayed: [Int64] = []
    /// Their event id had been applied since (by a re-sent event): nothing applied, marked replayed.
    public var alreadyApplied: [Int64] = []
    /// Still not applicable, with today's reason; left as they were.
    public var stillRejected: [(id: Int64, rejection: EventRejection)] = []

    /// An empty outcome.
    public init() {}
}

enum DeadLetterSQL {
    static let columns = """
        id, topic, partition, record_offset, record_key, payload, reason, message, event_id, rejected_at, published_at, replayed_at
        """

    static let list = PGStatement(
        "dlq.list",
        """
        SELECT \(columns) FROM rejected_record
        WHERE id > $1 AND ($2 = '' OR reason = $2) AND ($3 OR replayed_at IS NULL)
          AND (cardinality($4::bigint[]) = 0 OR id = ANY($4::bigint[]))
        ORDER BY id
        LIMIT $5
        """)

    static let lockForReplay = PGStatement(
        "dlq.lock_for_replay",
        """
        SELECT \(columns) FROM rejected_record
        WHERE id > $1 AND ($2 = '' OR reason = $2) AND replayed_at IS NULL
          AND (cardinality($3::bigint[]) = 0 OR id = ANY($3::bigint[]))
        ORDER BY id
        LIMIT $4
        FOR UPDATE SKIP LOCKED
        """)

    static let appliedAmong = PGStatement(
        "dlq.applied_among", "SELECT event_id FROM applied_event WHERE event_id = ANY($1::text[])")

    static let markReplayed = PGStatement(
        "dlq.mark_replayed", "UPDATE rejected_record SET replayed_at = now() WHERE id = ANY($1::bigint[])")
}
