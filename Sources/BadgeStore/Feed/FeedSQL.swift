import LibPQ

/// The change feed's statements: the publisher's lease, the records it has yet to publish (their
/// Kafka payloads built here), and marking them published.
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

    /// Up to `$1` unpublished records of users' versions, in feed order: seq, key (the user),
    /// seconds since the change, own version, broadcast version, visible version (their sum),
    /// the root totals, the time as JSON, the logged nodes as their JSON text, the ids of the
    /// broadcasts dismissed and seen in the version as JSON arrays, and the logged muted nodes
    /// (NULL when the version did not change them). The record is written from these in
    /// Swift (`FeedPayload`): built as JSON here it cost about 110 µs a record, most of the
    /// feed's database time.
    static let pendingUserChanges = PGStatement(
        "feed.pending_user_changes",
        """
        SELECT c.seq, c.user_id, extract(epoch FROM clock_timestamp() - c.changed_at)::float8,
               c.version, c.broadcast_version, c.version + c.broadcast_version, c.root_count, c.root_unseen,
               to_json(c.changed_at)::text, c.nodes::text, \(broadcastsInVersion("c", table: "broadcast_clear")),
               \(broadcastsInVersion("c", table: "broadcast_seen")), c.mutes::text
        FROM badge_change c
        WHERE c.published_at IS NULL
        ORDER BY c.seq
        LIMIT $1
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

    static let markUserChangesPublished = PGStatement(
        "feed.mark_user_changes",
        "UPDATE badge_change SET published_at = now() WHERE seq = ANY($1::bigint[]) AND published_at IS NULL")

    static let markBroadcastChangesPublished = PGStatement(
        "feed.mark_broadcast_changes",
        "UPDATE broadcast_change SET published_at = now() WHERE version = ANY($1::bigint[]) AND published_at IS NULL")

    /// How many records wait to be published, counted up to a million of each kind (cheap while
    /// the feed keeps up: a partial index).
    static let unpublishedCount = PGStatement(
        "feed.unpublished",
        """
        SELECT (SELECT count(*) FROM (SELECT 1 FROM badge_change WHERE published_at IS NULL LIMIT 1000000) AS u)
             + (SELECT count(*) FROM (SELECT 1 FROM broadcast_change WHERE published_at IS NULL LIMIT 1000000) AS b)
        """)
}
