public import Foundation
public import LibPQ

extension BadgeStore {
    /// What one step of ``pruneWithdrawnBroadcasts(olderThan:limit:on:)`` removed.
    public struct WithdrawnPrune: Sendable, Hashable {
        /// Users' dismissals (clears and seens) of the broadcasts, at most `limit` of each kind.
        public var dismissals: Int
        /// Broadcasts removed (only those with no dismissal left).
        public var broadcasts: Int
    }

    /// One step of the retention of withdrawn broadcasts: deletes up to `limit` of the users'
    /// clears and up to `limit` of their seens of broadcasts withdrawn before `cutoff`, then the
    /// broadcasts withdrawn before `cutoff` that have none left. A withdrawn broadcast shows in
    /// no tree, so nothing a user sees changes; the change log keeps its own copy for the
    /// versions it can still rebuild (keep `cutoff` older than its retention). Call it until it
    /// removes nothing.
    public static func pruneWithdrawnBroadcasts(olderThan cutoff: Date, limit: Int, on connection: PGConnection) throws(PGError)
        -> WithdrawnPrune
    {
        let citus = try citusInstalled(on: connection)
        // Citus deletes from a reference table (`broadcast`) only in a transaction that has not
        // written distributed tables over parallel connections, as the dismissals' deletes do.
        if citus { try connection.execute(script: "SET LOCAL citus.multi_shard_modify_mode TO 'sequential'", name: "broadcasts.citus_sequential") }
        let row = try connection.query(BroadcastRetentionSQL.pruneDismissals, [cutoff, limit]).singleRow()
        let dismissals = try row.decode(0, as: Int.self) + row.decode(1, as: Int.self)
        let broadcasts: Int
        if citus {
            // Citus refuses a delete from a reference table that reads distributed ones: the
            // candidates, then those without dismissals, then the delete by id. A dismissal
            // written in between goes with its broadcast (`ON DELETE CASCADE`), as one written
            // just before the shipped statement's would stay: a withdrawn broadcast shows nowhere.
            let old = try connection.query(BroadcastRetentionSQL.withdrawnBefore, [cutoff]).rows.map { row throws(PGError) in
                try row.decode(0, as: Int64.self)
            }
            let kept = try Set(connection.query(BroadcastRetentionSQL.dismissed, [old]).rows.map { row throws(PGError) in
                try row.decode(0, as: Int64.self)
            })
            let gone = old.filter { !kept.contains($0) }
            broadcasts = gone.isEmpty ? 0 : try connection.query(BroadcastRetentionSQL.deleteBroadcasts, [gone]).affectedRows
        } else {
            broadcasts = try connection.query(BroadcastRetentionSQL.pruneBroadcasts, [cutoff]).affectedRows
        }
        return WithdrawnPrune(dismissals: dismissals, broadcasts: broadcasts)
    }
}

enum BroadcastRetentionSQL {
    static let pruneDismissals = PGStatement(
        "broadcasts.prune_withdrawn_dismissals",
        """
        WITH old AS (SELECT id FROM broadcast WHERE withdrawn_at < $1::timestamptz),
        clears AS (
            DELETE FROM broadcast_clear d USING (
                SELECT user_id, broadcast_id FROM broadcast_clear WHERE broadcast_id IN (SELECT id FROM old) LIMIT $2
            ) x
            WHERE d.user_id = x.user_id AND d.broadcast_id = x.broadcast_id
            RETURNING 1
        ), seens AS (
            DELETE FROM broadcast_seen d USING (
                SELECT user_id, broadcast_id FROM broadcast_seen WHERE broadcast_id IN (SELECT id FROM old) LIMIT $2
            ) x
            WHERE d.user_id = x.user_id AND d.broadcast_id = x.broadcast_id
            RETURNING 1
        )
        SELECT (SELECT count(*) FROM clears)::int, (SELECT count(*) FROM seens)::int
        """)

    /// Citus's form of `pruneBroadcasts`, in three statements (`pruneWithdrawnBroadcasts`).
    static let withdrawnBefore = PGStatement(
        "broadcasts.withdrawn_before", "SELECT id FROM broadcast WHERE withdrawn_at < $1::timestamptz ORDER BY id")
    static let dismissed = PGStatement(
        "broadcasts.dismissed",
        """
        SELECT DISTINCT broadcast_id FROM broadcast_clear WHERE broadcast_id = ANY($1::bigint[])
        UNION SELECT DISTINCT broadcast_id FROM broadcast_seen WHERE broadcast_id = ANY($1::bigint[])
        """)
    static let deleteBroadcasts = PGStatement("broadcasts.delete", "DELETE FROM broadcast WHERE id = ANY($1::bigint[])")

    static let pruneBroadcasts = PGStatement(
        "broadcasts.prune_withdrawn",
        """
        DELETE FROM broadcast b
        WHERE b.withdrawn_at < $1::timestamptz
          AND NOT EXISTS (SELECT 1 FROM broadcast_clear c WHERE c.broadcast_id = b.id)
          AND NOT EXISTS (SELECT 1 FROM broadcast_seen s WHERE s.broadcast_id = b.id)
        """)
}
