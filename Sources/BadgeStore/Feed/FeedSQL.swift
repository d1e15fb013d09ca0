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
    static let feedHead = PGStatement("feed.head", head(of: "badge_change"))

    /// `feedHead` with the lowest `seq` above the cursor in `table` (`badge_change`, or the
    /// outbox on Citus).
    private static func head(of table: String) -> String {
        """
        SELECT f.published_seq, f.published_snapshot::text, pg_current_snapshot()::text,
               (SELECT min(c.seq) FROM \(table) c WHERE c.seq > f.published_seq)
        FROM change_feed_lease f
        """
    }

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
            \(pending("*", of: "badge_change"))
        )
        SELECT \(userRecordColumns(seq: "c.seq", pin: .none))
        FROM pending c
        """, prepared: false)

    /// The `columns` of the rows of `table` (`badge_change`, or the outbox on Citus) that
    /// `pendingUserChanges` reads: `seq` from `$1` up to `$2`, and at or below the cursor's `$3`
    /// those whose transaction had not committed in the cursor's snapshot `$4`.
    private static func pending(_ columns: String, of table: String) -> String {
        """
        SELECT \(columns) FROM \(table) WHERE seq >= $1 AND seq <= $2
            UNION ALL
            SELECT \(columns) FROM \(table)
            WHERE (xid = ANY (string_to_array(split_part($4, ':', 3), ',')::xid8[]) OR xid >= pg_snapshot_xmax($4::pg_snapshot))
              AND seq <= $3
        """
    }

    /// The columns of a user's record as the feed reads it from the change-log row `c`, with
    /// `seq` its number in feed order (see `pendingUserChanges`); `pin` on the tables of
    /// dismissals.
    private static func userRecordColumns(seq: String, pin: Pin) -> String {
        """
        \(seq), c.user_id, extract(epoch FROM clock_timestamp() - c.changed_at)::float8,
               c.version, c.broadcast_version, c.version + c.broadcast_version, c.root_count, c.root_unseen,
               to_json(c.changed_at)::text, c.nodes::text, \(broadcastsInVersion("c", table: "broadcast_clear", pin: pin)),
               \(broadcastsInVersion("c", table: "broadcast_seen", pin: pin)), c.mutes::text
        """
    }

    // On Citus (docs/SHARDING.md, "The change feed on Citus"): each round that logs users'
    // versions also writes their numbers in feed order to `change_feed_outbox`, a table on the
    // coordinator (deploy/citus/layout.sql), whose `seq` and transaction ids are the
    // coordinator's: the feed's cursor and snapshot order them as they order the log on one
    // server. The records themselves are read from the distributed log a shard at a time.

    /// `feedHead` over the coordinator's outbox.
    static let feedHeadOfOutbox = PGStatement("feed.head_of_outbox", head(of: "change_feed_outbox"))

    /// `pendingUserChanges` over the coordinator's outbox: seq, user, version.
    static let pendingOutbox = PGStatement("feed.pending_outbox", pending("seq, user_id, version", of: "change_feed_outbox"), prepared: false)

    /// The records of the users' versions (`$2[i]`, `$3[i]`) numbered `$4[i]` in feed order,
    /// as `pendingUserChanges` returns them; `$1`: the users of the Citus shard they are in. A
    /// version whose row is not there yet (its transaction has committed on the coordinator and
    /// not yet on the worker) returns nothing.
    static let userChangesOfShard = PGStatement(
        "feed.user_changes_of_shard",
        """
        SELECT \(userRecordColumns(seq: "o.seq", pin: .users("$1::text[]")))
        FROM unnest($2::text[], $3::bigint[], $4::bigint[]) AS o(user_id, version, seq)
        JOIN badge_change c ON c.user_id = o.user_id AND c.version = o.version
        WHERE c.user_id = ANY($1::text[])
        """)

    /// Records the users' versions (`$1[i]`, `$2[i]`) a round on Citus logged, in feed order.
    static let recordFeedOutbox = PGStatement(
        "feed.record_outbox",
        "INSERT INTO change_feed_outbox (user_id, version) SELECT * FROM unnest($1::text[], $2::bigint[]) ORDER BY 1")

    /// Deletes the outbox's entries the feed has published (at or below its cursor's `seq` and
    /// committed in its snapshot).
    static let pruneFeedOutbox = PGStatement(
        "feed.prune_outbox",
        """
        DELETE FROM change_feed_outbox o USING change_feed_lease f
        WHERE o.seq <= f.published_seq AND pg_visible_in_snapshot(o.xid, f.published_snapshot)
        """)

    /// Deletes the outbox's entries of the users' versions (`$1[i]`, `$2[i]`) (their records
    /// were pruned from the log), returning for each whether the feed had yet to publish it.
    static let dropFromFeedOutbox = PGStatement(
        "feed.drop_from_outbox",
        """
        DELETE FROM change_feed_outbox o USING change_feed_lease f, unnest($1::text[], $2::bigint[]) AS x(user_id, version)
        WHERE o.user_id = x.user_id AND o.version = x.version
        RETURNING o.seq > f.published_seq OR NOT pg_visible_in_snapshot(o.xid, f.published_snapshot)
        """)

    /// `unpublishedUserCount` over the coordinator's outbox.
    static let unpublishedOutboxCount = PGStatement(
        "feed.unpublished_outbox",
        "SELECT count(*) FROM (SELECT 1 FROM change_feed_outbox WHERE seq > $1 LIMIT 1000000) AS u", prepared: false)

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
