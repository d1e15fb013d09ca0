public import BadgeCore
import BadgeStore
public import Foundation
public import LibPQ

/// Ingest's writes to PostgreSQL: the stored Kafka offsets (compare-and-set), event-id dedupe,
/// badge operations, broadcasts and rejected records, all of one batch in the caller's
/// transaction (DESIGN §4), plus the dead-letter queue and the pruning of old event ids.
///
/// Every function runs on a connection the caller leased; none opens a transaction itself.
public enum IngestStore {
    /// The stored offsets (the next offset to read) of `group` for `partitions`; a partition
    /// without a stored row is absent from the answer.
    public static func storedOffsets(
        group: String, partitions: [TopicPartition], on connection: PGConnection
    ) throws(PGError) -> [TopicPartition: Int64] {
        guard !partitions.isEmpty else { return [:] }
        let result = try connection.query(
            IngestSQL.storedOffsets, [group, partitions.map(\.topic), partitions.map(\.partition)])
        var offsets: [TopicPartition: Int64] = [:]
        for row in result.rows {
            let partition = TopicPartition(
                topic: try row.decode(0, as: String.self), partition: try row.decode(1, as: Int32.self))
            offsets[partition] = try row.decode(2, as: Int64.self)
        }
        return offsets
    }

    /// Writes one batch. The caller wraps it in one transaction and rolls back if it throws.
    ///
    /// In order: (1) compare-and-set the stored offset of every partition of the batch from
    /// `expectedOffsets[partition]` (absent: no row may exist yet) to `batch.nextOffsets`;
    /// (2) record the accepted event ids, skipping every id applied before or earlier in this
    /// batch; (3) apply the new events' per-user mutations as one coalesced ``BadgeBatch`` and
    /// mark their users dirty; (4) store broadcasts once (set, incr: a new row; clear: withdraw
    /// the active ones at the path, with force within its subtree); (5) store every rejected
    /// record, once per topic, partition and offset. Each step is one or two statements over
    /// arrays, whatever the batch size.
    ///
    /// - Throws: ``IngestError`` `.fenced` before any other write when a stored offset is not
    ///   the expected one (another consumer owns the partition: roll back, give it up);
    ///   `PGError` from the database (retry the whole batch when `isRetriable`).
    public static func commit(
        _ batch: PreparedBatch, group: String, expectedOffsets: [TopicPartition: Int64], on connection: PGConnection
    ) throws -> BatchOutcome {
        try advanceOffsets(batch.nextOffsets, group: group, expected: expectedOffsets, on: connection)

        var outcome = BatchOutcome()
        for rejected in batch.rejected {
            outcome.rejected[rejected.rejection.reason, default: 0] += 1
        }

        try applyEvents(batch.accepted, into: &outcome, on: connection)
        try insertRejected(batch.rejected, on: connection)
        return outcome
    }

    /// Steps 2–4 of `commit`, also used to replay dead letters: records the events' ids,
    /// skipping those applied before (counted as duplicates), applies the new ones' per-user
    /// mutations as one coalesced batch, marks their users dirty, and stores broadcasts once.
    static func applyEvents(_ accepted: [AcceptedEvent], into outcome: inout BatchOutcome, on connection: PGConnection) throws {
        // Dedupe: an id is new once, at its first record in the batch.
        var fresh: Set<String> = []
        if !accepted.isEmpty {
            let ids = accepted.map(\.operation.eventID.rawValue)
            for row in try connection.query(IngestSQL.recordEvents, [ids]).rows {
                fresh.insert(try row.decode(0, as: String.self))
            }
        }

        var badges = BadgeBatch()
        var broadcasts = BroadcastWrites()
        for event in accepted {
            let operation = event.operation
            guard fresh.remove(operation.eventID.rawValue) != nil else {
                outcome.duplicates += 1
                continue
            }
            outcome.applied += 1
            switch operation.audience {
            case .users:
                badges.append(contentsOf: operation.mutations())
            case .everyone:
                broadcasts.append(operation)
                outcome.broadcasts += 1
            }
        }

        if !badges.isEmpty {
            let applied = try BadgeStore.apply(badges, on: connection)
            let users = badges.users
            try BadgeStore.markDirty(users, bumping: applied.dismissedBroadcasts, on: connection)
            outcome.users = users.count
        }
        try broadcasts.write(on: connection)
    }

    /// Step 1 of `commit`: one statement for every partition, then the first lost one, if any.
    static func advanceOffsets(
        _ nextOffsets: [TopicPartition: Int64], group: String, expected: [TopicPartition: Int64],
        on connection: PGConnection
    ) throws {
        guard !nextOffsets.isEmpty else { return }
        let partitions = nextOffsets.keys.sorted()  // one lock order for every writer
        let expectedOffsets: [Int64?] = partitions.map { expected[$0] }
        let newOffsets: [Int64] = partitions.map { nextOffsets[$0] ?? 0 }
        let result = try connection.query(
            IngestSQL.advanceOffsets,
            [group, partitions.map(\.topic), partitions.map(\.partition), expectedOffsets, newOffsets])
        var moved: Set<TopicPartition> = []
        for row in result.rows {
            moved.insert(
                TopicPartition(topic: try row.decode(0, as: String.self), partition: try row.decode(1, as: Int32.self)))
        }
        guard let lost = partitions.first(where: { !moved.contains($0) }) else { return }
        let found = try storedOffsets(group: group, partitions: [lost], on: connection)[lost]
        throw IngestError.fenced(lost, expected: expected[lost], found: found)
    }

    /// Step 5 of `commit`.
    static func insertRejected(_ rejected: [RejectedRecord], on connection: PGConnection) throws(PGError) {
        guard !rejected.isEmpty else { return }
        var topics: [String] = [], partitions: [Int32] = [], offsets: [Int64] = []
        var keys: [String?] = [], payloads: [String?] = []
        var reasons: [String] = [], messages: [String] = [], eventIDs: [String?] = []
        for entry in rejected {
            topics.append(entry.record.topic)
            partitions.append(entry.record.partition)
            offsets.append(entry.record.offset)
            keys.append(entry.record.key.map(ByteaHex.encode))
            payloads.append(entry.record.payload.map(ByteaHex.encode))
            reasons.append(entry.rejection.reason.rawValue)
            messages.append(storable(entry.rejection.message))
            eventIDs.append(entry.eventID.map(storable))
        }
        try connection.query(
            IngestSQL.insertRejected, [topics, partitions, offsets, keys, payloads, reasons, messages, eventIDs])
    }

    /// Text PostgreSQL accepts: without NUL characters.
    static func storable(_ text: String) -> String {
        guard text.utf8.contains(0) else { return text }
        return String(text.unicodeScalars.map { $0 == "\0" ? "\u{FFFD}" : Character($0) })
    }

    /// Dead letters not yet published to the dead-letter topic, oldest first, at most `limit`,
    /// locked (`FOR UPDATE SKIP LOCKED`) until the caller's transaction ends: publish them, then
    /// `markPublished` in the same transaction.
    public static func unpublishedRejections(limit: Int, on connection: PGConnection) throws(PGError) -> [StoredRejection] {
        guard limit > 0 else { return [] }
        var rejections: [StoredRejection] = []
        for row in try connection.query(IngestSQL.unpublishedRejections, [limit]).rows {
            rejections.append(try StoredRejection(row: row, statement: IngestSQL.unpublishedRejections.name))
        }
        return rejections
    }

    /// Marks dead letters as published (after the dead-letter producer's delivery report).
    public static func markPublished(ids: [Int64], on connection: PGConnection) throws(PGError) {
        guard !ids.isEmpty else { return }
        try connection.query(IngestSQL.markPublished, [ids])
    }

    /// Deletes the applied event ids recorded before `olderThan`, `limit` rows per statement
    /// (each its own transaction unless the caller opened one), skipping rows another
    /// transaction holds.
    ///
    /// - Returns: how many ids were deleted.
    public static func pruneAppliedEvents(olderThan: Date, limit: Int, on connection: PGConnection) throws(PGError) -> Int {
        guard limit > 0 else { return 0 }
        var total = 0
        while true {
            let deleted = try connection.query(IngestSQL.pruneAppliedEvents, [olderThan, limit]).affectedRows
            total += deleted
            if deleted < limit { return total }
        }
    }
}

/// The broadcasts of one batch, in record order, reduced to two statements: withdraw the
/// stored broadcasts that the batch's clears hit, then insert the batch's new broadcasts (those
/// a later clear of the batch hits are inserted already withdrawn).
struct BroadcastWrites {
    struct NewBroadcast {
        var eventID: String
        var path: BadgePath
        var count: Int64
        var icon: String?
        var expiresAt: Date?
        var withdrawn = false
    }

    var created: [NewBroadcast] = []
    var clears: [(path: BadgePath, force: Bool)] = []

    mutating func append(_ operation: MappedOperation) {
        switch operation.operation {
        case .set(let count, let icon):
            created.append(
                NewBroadcast(
                    eventID: operation.eventID.rawValue, path: operation.path, count: max(count, 0),
                    icon: icon?.rawValue, expiresAt: operation.expiresAt))
        case .increment(let by):
            created.append(
                NewBroadcast(
                    eventID: operation.eventID.rawValue, path: operation.path, count: max(by, 0), icon: nil,
                    expiresAt: operation.expiresAt))
        case .clear(let force):
            for index in created.indices where !created[index].withdrawn {
                let path = created[index].path
                if path == operation.path || (force && path.isWithin(operation.path)) {
                    created[index].withdrawn = true
                }
            }
            clears.append((operation.path, force))
        }
    }

    /// Writes the batch's broadcasts and, if the set of active ones changed, bumps the
    /// broadcast version (which notifies every query service).
    func write(on connection: PGConnection) throws(PGError) {
        var changed = false
        if !clears.isEmpty {
            changed = try connection.query(
                IngestSQL.withdrawBroadcasts, [clears.map(\.path.rawValue), clears.map(\.force)]
            ).affectedRows > 0
        }
        if !created.isEmpty {
            changed = changed || created.contains { !$0.withdrawn }
            try connection.query(
                IngestSQL.insertBroadcasts,
                [
                    created.map(\.eventID), created.map(\.path.rawValue), created.map(\.count),
                    created.map(\.icon), created.map(\.expiresAt), created.map(\.withdrawn),
                ])
        }
        if changed {
            try BadgeStore.bumpBroadcastVersion(on: connection)
        }
    }
}

/// What one committed batch did.
public struct BatchOutcome: Sendable, Hashable {
    /// Events applied (to users or as broadcasts), duplicates not included.
    public var applied: Int
    /// Accepted events skipped because their id was applied before or earlier in the batch.
    public var duplicates: Int
    /// Rejected records by reason (a re-delivered one is counted again, but stored once).
    public var rejected: [RejectionReason: Int]
    /// Distinct users whose badge state the batch wrote (and marked dirty).
    public var users: Int
    /// Broadcast events applied (sets, increments and clears for `audience: all`).
    public var broadcasts: Int

    /// An outcome with the given counts.
    public init(
        applied: Int = 0, duplicates: Int = 0, rejected: [RejectionReason: Int] = [:], users: Int = 0,
        broadcasts: Int = 0
    ) {
        self.applied = applied
        self.duplicates = duplicates
        self.rejected = rejected
        self.users = users
        self.broadcasts = broadcasts
    }

    /// All rejected records of the batch.
    public var rejectedCount: Int { rejected.values.reduce(0, +) }
}

/// A dead letter as stored in `rejected_record`, waiting to be published.
public struct StoredRejection: Sendable, Hashable {
    /// Decodes the columns `id, topic, partition, record_offset, record_key, payload, reason,
    /// message, event_id, rejected_at[, published_at, replayed_at]`.
    init(row: PGRow, statement: String) throws(PGError) {
        func bytes(_ column: Int) throws(PGError) -> [UInt8]? {
            guard let text = try row.decode(column, as: String?.self) else { return nil }
            guard let bytes = ByteaHex.decode(text) else {
                throw PGError(code: .decoding, message: "column \(column) is not bytea in hex form", statement: statement)
            }
            return bytes
        }
        let record = IngestRecord(
            topic: try row.decode(1, as: String.self), partition: try row.decode(2, as: Int32.self),
            offset: try row.decode(3, as: Int64.self), key: try bytes(4), payload: try bytes(5))
        self.init(
            id: try row.decode(0, as: Int64.self), record: record, reason: try row.decode(6, as: String.self),
            message: try row.decode(7, as: String.self), eventID: try row.decode(8, as: String?.self),
            rejectedAt: try row.decode(9, as: Date.self),
            publishedAt: row.values.count > 10 ? try row.decode(10, as: Date?.self) : nil,
            replayedAt: row.values.count > 11 ? try row.decode(11, as: Date?.self) : nil)
    }

    /// The row id (for ``IngestStore/markPublished(ids:on:)``).
    public var id: Int64
    /// The original record, bytes unchanged.
    public var record: IngestRecord
    /// The ``RejectionReason`` raw value (`malformed_json`, …).
    public var reason: String
    /// The rejection message.
    public var message: String
    /// The event id, when the record had a readable one.
    public var eventID: String?
    /// When it was stored.
    public var rejectedAt: Date
    /// When it was sent to the dead-letter topic (nil: not yet).
    public var publishedAt: Date?
    /// When `reddot dlq replay` applied it (nil: not replayed).
    public var replayedAt: Date?

    /// Creates a stored rejection.
    public init(
        id: Int64, record: IngestRecord, reason: String, message: String, eventID: String?, rejectedAt: Date,
        publishedAt: Date? = nil, replayedAt: Date? = nil
    ) {
        self.id = id
        self.record = record
        self.reason = reason
        self.message = message
        self.eventID = eventID
        self.rejectedAt = rejectedAt
        self.publishedAt = publishedAt
        self.replayedAt = replayedAt
    }
}
