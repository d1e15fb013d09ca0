import LibPQ

/// The change feed's statements: the publisher's lease and cursor, the records it has yet to
/// publish (their Kafka payloads built in Swift), and moving past them.
extension BadgeSQL {
    /// Takes or renews the lease for holder `$1` for `$2` seconds; a row comes back only when
    /// `$1` holds it.
    static let takeFeedLease = PGStatement(
        "feed.take_lease",
        """
        UPDATE change_feed_lease SET holder = $1, expires_at = now() + make_interval(secs => $2)
        WHERE holder = $1 OR expires_at < now()
        RETURNING true
        """)

    /// Gives the lease up (at shutdown), so another publisher takes over at once.
    static let releaseFeedLease = PGStatement(
        "feed.release_lease", "UPDATE change_feed_lease SET expires_at = '-infinity' WHERE holder = $1")

    /// The feed's cursor (the highest `seq` of a user's version it has published, and the
    /// snapshot, as text, of the read that published it), the snapshot of this read (the next
    /// cursor's), and the lowest `seq` above the cursor that this read sees (NULL: none).
    static let feedHead = PGStatement(
        "feed.head",
        """
        SELECT f.published_seq, f.published_snapshot::text, pg_current_snapshot()::text,
               (SELECT min(c.seq) FROM badge_change c WHERE c.seq > f.published_seq)
        FROM change_feed_lease f
        """)

    /// The users' versions the feed has yet to publish, in no order: those with `seq` from `$1`
    /// up to `$2`, and every one at or below the cursor's `seq` `$3` whose transaction had not
    /// committed in the cursor's snapshot `$4` (it committed since, or commits later and is
    /// found then). Each row: seq, key (the user), seconds since the change, own version,
    /// broadcast version, visible version (their sum), the root totals, the time as JSON, the
    /// logged nodes as their JSON text, the ids of the broadcasts dismissed and seen in the
    /// version as JSON arrays, and the logged muted nodes (NULL when the version did not change
    /// them). The record is written from these in Swift (`FeedPayload`): built as JSON here it
    /// cost about 110 µs a record.
    ///
    /// A range, not `ORDER BY seq LIMIT`: the planner read a fresh log by bitmap and sorted the
    /// wide rows on disk. Planned for each cursor (not prepared), with the snapshot's
    /// in-progress list taken apart as text (`xmin:xmax:xip,…`) so the planner sees the ids:
    /// with a generic plan, or a list from a subquery, it scanned the log.
    static let pendingUserChanges = PGStatement(
        "feed.pending_user_changes",
        """
        WITH pending AS (
            SELECT * FROM badge_change WHERE seq >= $1 AND seq <= $2
            UNION ALL
            SELECT * FROM badge_change
            WHERE (xid = ANY (string_to_array(split_part($4, ':', 3), ',')::xid8[]) OR xid >= pg_snapshot_xmax($4::pg_snapshot))
              AND seq <= $3
        )
        SELECT c.seq, c.user_id, extract(epoch FROM clock_timestamp() - c.changed_at)::float8,
               c.version, c.broadcast_version, c.version + c.broadcast_version, c.root_count, c.root_unseen,
               to_json(c.changed_at)::text, c.nodes::text, \(broadcastsInVersion("c", table: "broadcast_clear")),
               \(broadcastsInVersion("c", table: "broadcast_seen")), c.mutes::text
        FROM pending c
        """, prepared: false)

    /// Moves the cursor to `seq` `$2` and snapshot `$3` while holder `$1` holds the lease; a row
    /// comes back only then (a holder whose lease ran out leaves the cursor to the next one).
    static let advanceFeedCursor = PGStatement(
        "feed.advance_cursor",
        """
        UPDATE change_feed_lease SET published_seq = $2, published_snapshot = $3::pg_snapshot
        WHERE holder = $1 AND expires_at > now()
        RETURNING true
        """)

    /// Up to `$1` unpublished records of broadcast versions, in order: version, seconds since
    /// the change, and the record (JSON).
    static let pendingBroadcastChanges = PGStatement(
        "feed.pending_broadcast_changes",
        """
        SELECT c.version, extract(epoch FROM clock_timestamp() - c.changed_at)::float8,
               jsonb_build_object(
                   'type', 'broadcasts', 'version', c.version, 'previous_version', c.version - 1,
                   'added', c.added, 'withdrawn', c.withdrawn, 'at', c.changed_at)::text
        FROM broadcast_change c
        WHERE c.published_at IS NULL
        ORDER BY c.version
        LIMIT $1
        """)

    static let markBroadcastChangesPublished = PGStatement(
        "feed.mark_broadcast_changes",
        "UPDATE broadcast_change SET published_at = now() WHERE version = ANY($1::bigint[]) AND published_at IS NULL")

    /// Up to `$1` erased users whose tombstone the feed has not published, oldest erasure
    /// first: the user and seconds since the erasure.
    static let pendingTombstones = PGStatement(
        "feed.pending_tombstones",
        """
        SELECT user_id, extract(epoch FROM clock_timestamp() - erased_at)::float8
        FROM erased_user WHERE changes_tombstone_at IS NULL
        ORDER BY erased_at
        LIMIT $1
        """)

    /// Stamps the tombstones of users `$1` published.
    static let markTombstonesPublished = PGStatement(
        "feed.mark_tombstones",
        """
        UPDATE erased_user SET changes_tombstone_at = now()
        WHERE user_id = ANY($1::text[]) AND changes_tombstone_at IS NULL
        """)

    /// How many users' versions wait above `seq` `$1`, counted up to a million (planned for
    /// the value: the feed-order index reads only those).
    static let unpublishedUserCount = PGStatement(
        "feed.unpublished_users",
        "SELECT count(*) FROM (SELECT 1 FROM badge_change WHERE seq > $1 LIMIT 1000000) AS u", prepared: false)

    /// How many broadcast versions wait to be published, counted up to a million (a partial
    /// index: cheap while the feed keeps up).
    static let unpublishedBroadcastCount = PGStatement(
        "feed.unpublished_broadcasts",
        "SELECT count(*) FROM (SELECT 1 FROM broadcast_change WHERE published_at IS NULL LIMIT 1000000) AS b")
}
