import LibPQ

/// The statements of `reddot dlq`: listing and replaying rejected records.
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

    static let markReplayed = PGStatement(
        "dlq.mark_replayed", "UPDATE rejected_record SET replayed_at = now() WHERE id = ANY($1::bigint[])")

    static let pendingTombstones = PGStatement(
        "dlq.pending_tombstones",
        """
        SELECT user_id FROM erased_user WHERE dlq_tombstone_at IS NULL
        ORDER BY erased_at LIMIT $1
        """)

    static let markTombstones = PGStatement(
        "dlq.mark_tombstones", "UPDATE erased_user SET dlq_tombstone_at = now() WHERE user_id = ANY($1::text[])")

    /// One chunk of published dead letters rejected before `$1`.
    static let prune = PGStatement(
        "dlq.prune",
        """
        DELETE FROM rejected_record
        WHERE id IN (SELECT id FROM rejected_record WHERE published_at IS NOT NULL AND rejected_at < $1 ORDER BY id LIMIT $2)
        """)
}
