import BadgeCore
public import LibPQ

/// One change-log record as the change feed publishes it.
public struct FeedRecord: Sendable, Hashable {
    /// Which table it comes from.
    public enum Kind: String, Sendable {
        /// A version of one user's own layer (`badge_change`), keyed by the user.
        case user
        /// A version of the set of active broadcasts (`broadcast_change`), one global record.
        case broadcasts
        /// An erased user's tombstone (`erased_user`): the user's key and no value, after the
        /// user's last record, so a compacted topic drops them all.
        case tombstone
    }

    /// The table.
    public var kind: Kind
    /// Its number in that table: `seq` for a user's version, the broadcast version for
    /// broadcasts, 0 for a tombstone.
    public var number: Int64
    /// The Kafka key: the user id, or `*` for broadcasts.
    public var key: String
    /// The Kafka value: the record as JSON (`deploy/schema/change.schema.json`), UTF-8; nil for
    /// a tombstone.
    public var payload: [UInt8]?
    /// Seconds from the change's transaction to when the record was read.
    public var age: Double
}

/// One round of the change feed: the records read, in the order to send them, and the cursor
/// they were read after. ``BadgeStore/finishFeedRound(_:failed:holder:on:)`` moves the cursor
/// past the ones Kafka acknowledged.
public struct FeedRound: Sendable {
    /// Users' versions in feed order (a user's versions in order), then broadcast versions in
    /// order, then erased users' tombstones.
    public var records: [FeedRecord]
    /// The cursor the users' versions were read after: the highest `seq` published, and the
    /// snapshot (text) of the read that published it.
    let cursor: (seq: Int64, snapshot: String)
    /// The snapshot of this round's read (nil when it read no user's version).
    let snapshot: String?
}

extension BadgeStore {
    /// The key of broadcast records (`*` is never a user id's whole key in practice; the
    /// record's `type` says what it is).
    public static let broadcastFeedKey = "*"

    /// Takes or renews the feed's lease for `holder` for `seconds`; true when `holder` holds it.
    public static func takeFeedLease(holder: String, seconds: Double, on connection: PGConnection) throws(PGError) -> Bool {
        try !connection.query(BadgeSQL.takeFeedLease, [holder, seconds]).rows.isEmpty
    }

    /// Gives up the feed's lease if `holder` holds it.
    public static func releaseFeedLease(holder: String, on connection: PGConnection) throws(PGError) {
        try connection.query(BadgeSQL.releaseFeedLease, [holder])
    }

    /// Up to `limit` records of each kind that the feed has not published, each kind in its
    /// order (a user's versions in order; broadcast versions in order), and erased users'
    /// tombstones last (after any version of the user read in the same round); node texts
    /// capped at `countCap`. Users' versions come after the feed's cursor: the ones above its `seq`, and
    /// the ones below it that committed after the snapshot it was read in.
    ///
    /// - Throws: `PGError`.
    public static func pendingFeedRecords(limit: Int, countCap: Int64, on connection: PGConnection) throws -> FeedRound {
        // One snapshot for the cursor, the records and the next cursor.
        try connection.withTransaction(.repeatableRead) { connection throws -> FeedRound in
            try pendingFeedRecords(limit: max(1, limit), display: BadgeDisplay(countCap: countCap), inSnapshotOn: connection)
        }
    }

    private static func pendingFeedRecords(limit: Int, display: BadgeDisplay, inSnapshotOn connection: PGConnection) throws(PGError) -> FeedRound {
        let citus = try citusInstalled(on: connection)
        let headStatement = citus ? BadgeSQL.feedHeadOfOutbox : BadgeSQL.feedHead
        guard let head = try connection.query(headStatement).rows.first else {
            throw PGError(code: .decoding, message: "the change feed's cursor row is missing (run reddot migrate up)", statement: headStatement.name)
        }
        let cursor = (seq: try head.decode(0, as: Int64.self), snapshot: try head.decode(1, as: String.self))
        let snapshot = try head.decode(2, as: String.self)
        // The next `limit` numbers from the lowest one above the cursor that this snapshot sees
        // (the ones between are not committed in it: they come as late records).
        let first = try head.decode(3, as: Int64?.self) ?? Int64.max
        let last = first.addingReportingOverflow(Int64(limit) - 1)
        let range: [any PGBindable] = [first, last.overflow ? Int64.max : last.partialValue, cursor.seq, cursor.snapshot]
        var records: [FeedRecord] = []
        var readUsers = true
        if citus {
            if let found = try outboxRecords(range, after: cursor.seq, display: display, on: connection) { records = found } else { readUsers = false }
        } else {
            for row in try connection.query(BadgeSQL.pendingUserChanges, range).rows {
                records.append(try userRecord(row, display: display, statement: BadgeSQL.pendingUserChanges))
            }
        }
        // Feed order: a user's later version has a higher `seq` (it was written after the
        // earlier one committed).
        records.sort { $0.number < $1.number }
        readUsers = readUsers && !records.isEmpty
        for row in try connection.query(BadgeSQL.pendingBroadcastChanges, [limit]).rows {
            records.append(
                FeedRecord(
                    kind: .broadcasts, number: try row.decode(0, as: Int64.self), key: broadcastFeedKey,
                    payload: Array(try row.decode(2, as: String.self).utf8), age: try row.decode(1, as: Double.self)))
        }
        for row in try connection.query(BadgeSQL.pendingTombstones, [limit]).rows {
            records.append(
                FeedRecord(kind: .tombstone, number: 0, key: try row.decode(0, as: String.self), payload: nil, age: try row.decode(1, as: Double.self)))
        }
        return FeedRound(records: records, cursor: cursor, snapshot: readUsers ? snapshot : nil)
    }

    /// A user's record from a row of `pendingUserChanges` (or `userChangesOfShard`).
    private static func userRecord(_ row: PGRow, display: BadgeDisplay, statement: PGStatement) throws(PGError) -> FeedRecord {
        let seq = try row.decode(0, as: Int64.self)
        let user = try row.decode(1, as: String.self)
        let nodes: [OwnLayerChange.Node]
        let mutes: [MutedNode]?
        do {
            nodes = try OwnLayerChange.Node.decodeLog(try row.decode(9, as: String.self))
            mutes = try row.decode(12, as: String?.self).map { text throws(ChangeLogFormatError) in try MutedNode.decodeLog(text) }
        } catch {
            throw PGError(code: .decoding, message: "change-log record \(seq) cannot be published: \(error)", statement: statement.name)
        }
        let payload = FeedPayload.user(
            user: user, ownVersion: try row.decode(3, as: Int64.self), broadcastVersion: try row.decode(4, as: Int64.self),
            version: try row.decode(5, as: Int64.self), nodes: nodes,
            dismissedJSON: try row.decode(10, as: String.self), seenJSON: try row.decode(11, as: String.self),
            root: BadgeAggregate(count: try row.decode(6, as: Int64.self), unseen: try row.decode(7, as: Int64.self)),
            atJSON: try row.decode(8, as: String.self), mutes: mutes, display: display)
        return FeedRecord(kind: .user, number: seq, key: user, payload: payload, age: try row.decode(2, as: Double.self))
    }

    /// On Citus: the records of the outbox's entries in `range` (`pendingOutbox`: the next
    /// numbers, and the late ones below the cursor's `seq` `after`), numbered by the outbox,
    /// read from the distributed log a shard of users at a time. Citus commits a transaction's
    /// part on the coordinator before its parts on the workers, so an entry may be there before
    /// its record: the records from the first such entry on are left for a later round, and
    /// when a late entry's record is not there yet the round reads no user's version (nil): its
    /// cursor would move past the entry for good.
    private static func outboxRecords(
        _ range: [any PGBindable], after cursorSeq: Int64, display: BadgeDisplay, on connection: PGConnection
    ) throws(PGError) -> [FeedRecord]? {
        var entries: [String: [(version: Int64, seq: Int64)]] = [:]
        for row in try connection.query(BadgeSQL.pendingOutbox, range).rows {
            entries[try row.decode(1, as: String.self), default: []].append((try row.decode(2, as: Int64.self), try row.decode(0, as: Int64.self)))
        }
        guard !entries.isEmpty else { return [] }
        var records: [FeedRecord] = []
        for group in try usersByShard(entries.keys.sorted(), on: connection) {
            var users: [String] = [], versions: [Int64] = [], seqs: [Int64] = []
            for user in group {
                for entry in entries[user, default: []] {
                    users.append(user)
                    versions.append(entry.version)
                    seqs.append(entry.seq)
                }
            }
            for row in try connection.query(BadgeSQL.userChangesOfShard, [group, users, versions, seqs]).rows {
                records.append(try userRecord(row, display: display, statement: BadgeSQL.userChangesOfShard))
            }
        }
        let found = Set(records.map(\.number))
        guard let firstMissing = entries.values.joined().map(\.seq).filter({ !found.contains($0) }).min() else { return records }
        if firstMissing <= cursorSeq { return nil }
        return records.filter { $0.number < firstMissing }
    }

    /// Ends a round that `holder` sent, of which Kafka refused the records at `failed` (indexes
    /// into `round.records`): moves the cursor past the users' versions up to the first refused
    /// one, in this round's snapshot, marks the broadcast versions up to the first refused
    /// one published, and stamps the tombstones delivered. What comes after a refused record is read and sent again next round, in
    /// order (at least once). False when `holder` no longer holds the lease (the cursor stays for
    /// the next holder; records it sent are sent again).
    @discardableResult
    public static func finishFeedRound(_ round: FeedRound, failed: Set<Int>, holder: String, on connection: PGConnection) throws(PGError) -> Bool {
        var seq = round.cursor.seq, firstFailedSeq = Int64.max, firstFailedBroadcast = Int64.max
        for (index, record) in round.records.enumerated() {
            switch (record.kind, failed.contains(index)) {
            case (.user, false): seq = max(seq, record.number)
            case (.user, true): firstFailedSeq = min(firstFailedSeq, record.number)
            case (.broadcasts, false): break
            case (.broadcasts, true): firstFailedBroadcast = min(firstFailedBroadcast, record.number)
            case (.tombstone, _): break
            }
        }
        if firstFailedSeq != .max { seq = min(seq, firstFailedSeq == .min ? .min : firstFailedSeq - 1) }
        var held = true
        if let snapshot = round.snapshot {
            held = try !connection.query(BadgeSQL.advanceFeedCursor, [holder, seq, snapshot]).rows.isEmpty
        }
        let broadcasts = round.records.filter { $0.kind == .broadcasts && $0.number < firstFailedBroadcast }.map(\.number)
        if held, !broadcasts.isEmpty { try connection.query(BadgeSQL.markBroadcastChangesPublished, [broadcasts]) }
        let tombstones = round.records.indices.filter { round.records[$0].kind == .tombstone && !failed.contains($0) }.map { round.records[$0].key }
        if held, !tombstones.isEmpty { try connection.query(BadgeSQL.markTombstonesPublished, [tombstones]) }
        // On Citus the outbox's published entries go once the cursor is past them.
        if held, round.snapshot != nil, try citusInstalled(on: connection) { try connection.query(BadgeSQL.pruneFeedOutbox) }
        return held
    }

    /// How many change-log records wait to be published (users' versions above the feed's
    /// cursor and unpublished broadcast versions, each counted up to a million).
    public static func unpublishedChanges(on connection: PGConnection) throws(PGError) -> Int64 {
        let citus = try citusInstalled(on: connection)
        let seq = try connection.query(BadgeSQL.feedCursorSeq).rows.first?.decode(0, as: Int64.self) ?? 0
        let count = citus ? BadgeSQL.unpublishedOutboxCount : BadgeSQL.unpublishedUserCount
        let users = try connection.query(count, [seq]).rows.first?.decode(0, as: Int64.self) ?? 0
        let broadcasts = try connection.query(BadgeSQL.unpublishedBroadcastCount).rows.first?.decode(0, as: Int64.self) ?? 0
        return users + broadcasts
    }
}
