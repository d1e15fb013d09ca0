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
    }

    /// The table.
    public var kind: Kind
    /// Its number in that table: `seq` for a user's version, the broadcast version for broadcasts.
    public var number: Int64
    /// The Kafka key: the user id, or `*` for broadcasts.
    public var key: String
    /// The Kafka value: the record as JSON (`deploy/schema/change.schema.json`).
    public var payload: String
    /// Seconds from the change's transaction to when the record was read.
    public var age: Double
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
    /// order (a user's versions in order; broadcast versions in order); node texts capped at
    /// `countCap`.
    public static func pendingFeedRecords(limit: Int, countCap: Int64, on connection: PGConnection) throws(PGError) -> [FeedRecord] {
        var records: [FeedRecord] = []
        let display = BadgeDisplay(countCap: countCap)
        for row in try connection.query(BadgeSQL.pendingUserChanges, [limit]).rows {
            let seq = try row.decode(0, as: Int64.self)
            let user = try row.decode(1, as: String.self)
            let nodes: [OwnLayerChange.Node]
            let mutes: [MutedNode]?
            do {
                nodes = try OwnLayerChange.Node.decodeLog(try row.decode(9, as: String.self))
                mutes = try row.decode(12, as: String?.self).map { text throws(ChangeLogFormatError) in try MutedNode.decodeLog(text) }
            } catch {
                throw PGError(
                    code: .decoding, message: "change-log record \(seq) cannot be published: \(error)",
                    statement: BadgeSQL.pendingUserChanges.name)
            }
            let payload = FeedPayload.user(
                user: user, ownVersion: try row.decode(3, as: Int64.self), broadcastVersion: try row.decode(4, as: Int64.self),
                version: try row.decode(5, as: Int64.self), nodes: nodes,
                dismissedJSON: try row.decode(10, as: String.self), seenJSON: try row.decode(11, as: String.self),
                root: BadgeAggregate(count: try row.decode(6, as: Int64.self), unseen: try row.decode(7, as: Int64.self)),
                atJSON: try row.decode(8, as: String.self), mutes: mutes, display: display)
            records.append(FeedRecord(kind: .user, number: seq, key: user, payload: payload, age: try row.decode(2, as: Double.self)))
        }
        for row in try connection.query(BadgeSQL.pendingBroadcastChanges, [limit]).rows {
            records.append(
                FeedRecord(
                    kind: .broadcasts, number: try row.decode(0, as: Int64.self), key: broadcastFeedKey,
                    payload: try row.decode(2, as: String.self), age: try row.decode(1, as: Double.self)))
        }
        return records
    }

    /// Marks records published (Kafka acknowledged them).
    public static func markPublished(_ records: [FeedRecord], on connection: PGConnection) throws(PGError) {
        let users = records.filter { $0.kind == .user }.map(\.number)
        let broadcasts = records.filter { $0.kind == .broadcasts }.map(\.number)
        if !users.isEmpty { try connection.query(BadgeSQL.markUserChangesPublished, [users]) }
        if !broadcasts.isEmpty { try connection.query(BadgeSQL.markBroadcastChangesPublished, [broadcasts]) }
    }

    /// How many change-log records wait to be published.
    public static func unpublishedChanges(on connection: PGConnection) throws(PGError) -> Int64 {
        try connection.query(BadgeSQL.unpublishedCount).rows.first?.decode(0, as: Int64.self) ?? 0
    }
}
