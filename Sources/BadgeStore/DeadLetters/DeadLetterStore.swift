public import Foundation
public import LibPQ

/// The rejected records kept in `rejected_record`: the ones waiting for the dead-letter topic,
/// and those `reddot dlq` lists and replays. Every function runs in the caller's connection and
/// transaction.
public enum DeadLetterStore {
    /// Dead letters not yet published to the dead-letter topic, oldest first, at most `limit`,
    /// locked (`FOR UPDATE SKIP LOCKED`) until the caller's transaction ends: publish them, then
    /// `markPublished` in the same transaction.
    public static func unpublished(limit: Int, on connection: PGConnection) throws(PGError) -> [StoredRejection] {
        guard limit > 0 else { return [] }
        return try connection.query(IngestSQL.unpublishedRejections, [limit]).rows.map { row throws(PGError) in
            try StoredRejection(row: row, statement: IngestSQL.unpublishedRejections.name)
        }
    }

    /// Marks dead letters as published (after the dead-letter producer's delivery report).
    public static func markPublished(ids: [Int64], on connection: PGConnection) throws(PGError) {
        guard !ids.isEmpty else { return }
        try connection.query(IngestSQL.markPublished, [ids])
    }

    /// Erased users whose tombstone the dead-letter topic has not had, oldest erasure first, at
    /// most `limit`: send a tombstone (the user's key, no value) for each, then
    /// `markTombstonesPublished`. Not locked (`erased_user` is distributed by user under Citus,
    /// which locks rows in one shard only): two ingest processes may both send one, which is
    /// harmless.
    public static func pendingTombstones(limit: Int, on connection: PGConnection) throws(PGError) -> [String] {
        guard limit > 0 else { return [] }
        return try connection.query(DeadLetterSQL.pendingTombstones, [limit]).rows.map { row throws(PGError) in try row.decode(0, as: String.self) }
    }

    /// Stamps the dead-letter tombstones of `users` sent.
    public static func markTombstonesPublished(_ users: [String], on connection: PGConnection) throws(PGError) {
        guard !users.isEmpty else { return }
        try connection.query(DeadLetterSQL.markTombstones, [users])
    }

    /// The rejected records that match, oldest first.
    public static func list(_ filter: DeadLetterFilter, on connection: PGConnection) throws(PGError) -> [StoredRejection] {
        try connection.query(
            DeadLetterSQL.list, [filter.afterID, filter.reason ?? "", filter.includeReplayed, filter.ids, filter.limit]
        ).rows.map { row throws(PGError) in try StoredRejection(row: row, statement: DeadLetterSQL.list.name) }
    }

    /// The matching records not replayed yet, oldest first, locked (`FOR UPDATE SKIP LOCKED`)
    /// until the caller's transaction ends, so two replays never take one record twice.
    public static func lockForReplay(_ filter: DeadLetterFilter, on connection: PGConnection) throws(PGError) -> [StoredRejection] {
        try connection.query(DeadLetterSQL.lockForReplay, [filter.afterID, filter.reason ?? "", filter.ids, filter.limit])
            .rows.map { row throws(PGError) in try StoredRejection(row: row, statement: DeadLetterSQL.lockForReplay.name) }
    }

    /// Marks records as replayed; they stay in the table.
    public static func markReplayed(ids: [Int64], on connection: PGConnection) throws(PGError) {
        guard !ids.isEmpty else { return }
        try connection.query(DeadLetterSQL.markReplayed, [ids])
    }
}

/// Which rejected records to list or replay.
public struct DeadLetterFilter: Sendable {
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

extension DeadLetterStore {
    /// Deletes the dead letters rejected before `olderThan` that are on the dead-letter topic
    /// already (published), `limit` at a time; one not yet published is kept whatever its age.
    ///
    /// - Returns: how many were deleted.
    public static func prune(olderThan: Date, limit: Int, on connection: PGConnection) throws(PGError) -> Int {
        guard limit > 0 else { return 0 }
        var total = 0
        while true {
            let deleted = try connection.query(DeadLetterSQL.prune, [olderThan, limit]).affectedRows
            total += deleted
            if deleted < limit { return total }
        }
    }
}
