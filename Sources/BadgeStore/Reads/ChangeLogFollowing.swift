public import BadgeCore
public import LibPQ

/// Where a reader that follows the change log stands (``BadgeStore/followChangeLog(from:limit:on:)``):
/// the highest `seq` it has read, the oldest transaction still running when it read (every
/// row of an older one was visible to it), and the transactions at or above that one whose
/// rows it has read.
///
/// It works on a hot standby, where `LISTEN` does not and where `pg_current_snapshot()` lists
/// no running transactions (only its `xmin` is right there): a row whose `seq` lies below the
/// cursor but whose transaction had not committed when the cursor was read is found by that
/// transaction id being at or above the cursor's `xmin` and not among those read (a
/// transaction's rows become visible together, so one read shows all of them).
public struct ChangeLogCursor: Sendable, Equatable {
    /// The highest `seq` read.
    public var seq: Int64
    /// `pg_snapshot_xmin` of the read's snapshot, as text (an `xid8`).
    public var oldestRunning: String
    /// The visible broadcast version at the read.
    public var broadcastVersion: Int64
    /// The transactions at or above `oldestRunning` whose rows were read (so none is read again).
    var read: Set<UInt64>

    /// How many transactions ``read`` holds: it grows while a write transaction on the primary
    /// stays open (its `xmin` stays), and each read sends it along.
    public var transactionsHeld: Int { read.count }
}

/// What one read of the change log found after a cursor.
public struct ChangeLogStep: Sendable {
    /// Each user's newest own version among the rows found (a user once).
    public var users: [UserID: Int64]
    /// The broadcast version now, when it moved past the cursor's.
    public var broadcastVersion: Int64?
    /// More rows waited than the read takes: the reader missed some, and should treat every
    /// user as changed (the cursor has moved to the head of the log).
    public var overflowed: Bool
    /// Where the next read starts.
    public var cursor: ChangeLogCursor
}

extension BadgeStore {
    /// The head of the change log: a cursor from which ``followChangeLog(from:limit:on:)``
    /// reports what commits later. One statement; works on a standby.
    public static func changeLogHead(on connection: PGConnection) throws(PGError) -> ChangeLogCursor {
        let rows = try connection.query(BadgeSQL.changeLogHead).rows
        guard let row = rows.first else { throw PGError(code: .client, message: "the change log's head answered no row") }
        return ChangeLogCursor(
            seq: try row.decode(0, as: Int64.self), oldestRunning: try row.decode(1, as: String.self),
            broadcastVersion: try row.decode(2, as: Int64.self), read: [])
    }

    /// The users' versions logged after `cursor` (those that committed since it was read,
    /// whatever their `seq`), and the broadcast version when it moved; up to `limit` rows, else
    /// `overflowed` with the cursor at the head. One statement; works on a standby.
    public static func followChangeLog(from cursor: ChangeLogCursor, limit: Int, on connection: PGConnection) throws(PGError) -> ChangeLogStep {
        let take = max(1, min(limit, 1_000_000))
        let rows = try connection.query(
            BadgeSQL.changeLogAfter, [cursor.seq, cursor.oldestRunning, Int64(take) + 1, cursor.read.map(String.init)]
        ).rows
        var users: [UserID: Int64] = [:]
        var found = 0
        var next = cursor
        for row in rows {
            guard let seq = try row.decode(0, as: Int64?.self) else {
                next.oldestRunning = try row.decode(3, as: String.self)
                next.broadcastVersion = max(cursor.broadcastVersion, try row.decode(4, as: Int64.self))
                continue
            }
            found += 1
            next.seq = max(next.seq, seq)
            if let xid = try row.decode(5, as: String?.self).flatMap(UInt64.init) { next.read.insert(xid) }
            guard let user = try? UserID(validating: try row.decode(1, as: String.self)) else { continue }
            let version = try row.decode(2, as: Int64.self)
            users[user] = max(users[user] ?? version, version)
        }
        let moved = next.broadcastVersion > cursor.broadcastVersion ? next.broadcastVersion : nil
        if found > take {
            var head = try changeLogHead(on: connection)
            head.broadcastVersion = max(head.broadcastVersion, cursor.broadcastVersion)
            return ChangeLogStep(users: [:], broadcastVersion: head.broadcastVersion > cursor.broadcastVersion ? head.broadcastVersion : nil, overflowed: true, cursor: head)
        }
        // A transaction below the new xmin has no row a later read could find.
        if let oldest = UInt64(next.oldestRunning) { next.read = next.read.filter { $0 >= oldest } }
        return ChangeLogStep(users: users, broadcastVersion: moved, overflowed: false, cursor: next)
    }
}

extension BadgeSQL {
    /// The highest `seq` of the change log, the `xmin` of this statement's snapshot, and the
    /// broadcast version.
    static let changeLogHead = PGStatement(
        "changes.head",
        """
        SELECT coalesce((SELECT max(seq) FROM badge_change), 0), pg_snapshot_xmin(pg_current_snapshot())::text,
               (SELECT version FROM broadcast_version)
        """)

    /// The users' versions after the cursor: `seq` above `$1`, or at or below it from a
    /// transaction at or above the cursor's `xmin` `$2` that is not among those read `$4` (it
    /// may have committed after the cursor's read; the `(xid, seq)` index finds those). Up to
    /// `$3` rows (seq, user, own version, transaction), then one row with this snapshot's
    /// `xmin` and the broadcast version.
    /// Planned for each value (not prepared): a generic plan cannot tell that `xid >= $2` is a
    /// few rows, and scans the log.
    static let changeLogAfter = PGStatement(
        "changes.after",
        """
        WITH found AS (
            SELECT seq, user_id, version, xid FROM badge_change WHERE seq > $1
            UNION ALL
            SELECT seq, user_id, version, xid FROM badge_change
            WHERE xid >= $2::xid8 AND seq <= $1 AND xid <> ALL ($4::text[]::xid8[])
            LIMIT $3
        )
        SELECT seq, user_id, version, NULL::text, NULL::bigint, xid::text FROM found
        UNION ALL
        SELECT NULL, NULL, NULL, pg_snapshot_xmin(pg_current_snapshot())::text, (SELECT version FROM broadcast_version), NULL
        """, prepared: false)
}
