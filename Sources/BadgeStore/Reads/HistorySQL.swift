import LibPQ

/// The reads of the change log (DESIGN §6a), run together in one snapshot.
extension BadgeSQL {
    /// The user's own version, the broadcast version at which it was reached, the broadcast
    /// version and the user's muted nodes (one row; all but the broadcast version NULL for a user
    /// with no version yet).
    static let historyHead = PGStatement(
        "history.head",
        """
        SELECT u.version, u.broadcast_version, b.version, u.mutes::text
        FROM broadcast_version b LEFT JOIN user_version u ON u.user_id = $1
        """)

    /// The user's muted nodes as of own version `$2`: the latest logged change of them up to it,
    /// else `[]` when the log still holds the user's first version (a user's mutes start
    /// empty); no row when the log no longer tells.
    static let historyMutesAt = PGStatement(
        "history.mutes_at",
        """
        SELECT m.mutes::text FROM (
            SELECT c.mutes FROM badge_change c
            WHERE c.user_id = $1 AND c.version <= $2 AND c.mutes IS NOT NULL
            ORDER BY c.version DESC LIMIT 1
        ) AS m
        UNION ALL
        SELECT '[]' WHERE NOT EXISTS (
            SELECT 1 FROM badge_change c WHERE c.user_id = $1 AND c.version <= $2 AND c.mutes IS NOT NULL
        ) AND ($2 <= 0 OR EXISTS (SELECT 1 FROM badge_change c WHERE c.user_id = $1 AND c.version = 1))
        """)

    /// All of the user's aggregates.
    static let historyAggregates = PGStatement(
        "history.aggregates", "SELECT path::text, count, icon, unseen FROM badge_aggregate WHERE user_id = $1")

    /// The active broadcasts.
    static let historyBroadcasts = PGStatement(
        "history.broadcasts", "SELECT id, path::text, count, icon FROM broadcast WHERE withdrawn_at IS NULL")

    /// The user's dismissals, with the own version each shows in (``broadcastMarks(in:)``).
    static let historyDismissals = PGStatement("history.dismissals", broadcastMarks(in: "broadcast_clear"))

    /// The user's seen broadcasts, with the own version each shows in (``broadcastMarks(in:)``).
    static let historySeens = PGStatement("history.seens", broadcastMarks(in: "broadcast_seen"))

    /// The user `$1`'s rows of `table` (`broadcast_clear`, `broadcast_seen`: the broadcasts they
    /// dismissed or saw), with the own version each shows in: the first version whose writes
    /// reach its stamp, as the log tells; the next version when the current one does not reach
    /// it yet; 0 when it showed before the oldest logged version (or before the log began).
    private static func broadcastMarks(in table: String) -> String {
        """
        SELECT d.broadcast_id,
               CASE WHEN d.shown_in > coalesce(v.writes_through, v.version, 0) THEN coalesce(v.version, 0) + 1
                    WHEN f.version IS NULL OR coalesce(f.prior_writes_through, f.version - 1) >= d.shown_in THEN 0
                    ELSE f.version
               END
        FROM \(table) d
        LEFT JOIN user_version v ON v.user_id = d.user_id
        LEFT JOIN LATERAL (
            SELECT c.version, c.prior_writes_through FROM badge_change c
            WHERE c.user_id = d.user_id AND coalesce(c.writes_through, c.version) >= d.shown_in
            ORDER BY c.version LIMIT 1
        ) AS f ON true
        WHERE d.user_id = $1
        """
    }

    /// The user's logged own versions after `$2`, one row per changed node (a version that
    /// changed no aggregate has one row with a NULL path), each with the version's muted nodes
    /// when it changed them.
    static let historyOwnChanges = PGStatement(
        "history.own_changes",
        """
        SELECT c.version, c.broadcast_version, n.node->>0,
               (n.node->1->>'count')::bigint, n.node->1->>'icon', (n.node->1->>'unseen')::bigint,
               (n.node->2->>'count')::bigint, n.node->2->>'icon', (n.node->2->>'unseen')::bigint, c.mutes::text
        FROM badge_change c
        LEFT JOIN LATERAL jsonb_array_elements(c.nodes) AS n(node) ON true
        WHERE c.user_id = $1 AND c.version > $2
        """)

    /// For each pair of `$1` (users) and `$2` (own versions), in the order given: up to `$3` of
    /// the user's logged own versions after the version, in order, each row led by the pair's
    /// position (from 1): the version, the broadcast version it was made under, the changed
    /// nodes as the log stores them, the broadcasts dismissed and seen in it
    /// (``broadcastsInVersion(_:table:pin:)``) and the muted nodes when it changed them. In no
    /// order (the caller sorts: a sort here would copy the wide rows once more). One index
    /// range of the log's primary key per pair, so the reads of many users' streams that wake
    /// together are one statement (DESIGN §10).
    /// In its form for one Citus shard, `$4` are the users of the shard (those of `$1`).
    static let ownChangesAfter = ShardForms("history.own_changes_after", users: "$4::text[]") { pin in
        """
        SELECT r.n, c.version, c.broadcast_version, c.nodes::text, \(broadcastsInVersion("c", table: "broadcast_clear", pin: pin)),
               \(broadcastsInVersion("c", table: "broadcast_seen", pin: pin)), c.mutes::text
        FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS r(user_id, after, n)
        CROSS JOIN LATERAL (
            SELECT * FROM badge_change c WHERE c.user_id = r.user_id AND c.version > r.after\(pin.on("c")) ORDER BY c.version LIMIT $3
        ) AS c
        """
    }

    /// The ids of the broadcasts the logged version `record` (an alias of `badge_change`)
    /// dismissed (`table` `broadcast_clear`) or marked seen (`broadcast_seen`), as the text of
    /// a JSON array (`[]`: none): the user's rows of `table` numbered after the writes of the
    /// version before and up to this version's.
    ///
    /// Looked up only when there is a broadcast at all (one probe of `broadcast`, a small global
    /// table, per statement): every row of `table` names one (a foreign key that cascades), so
    /// without one there is nothing to find. The two lookups per version were half of the change
    /// feed's read of a range of the log, and about 0.7 ms of every 1.6 ms read of 320 versions
    /// where no broadcast was ever made (BENCHMARKS.md).
    static func broadcastsInVersion(_ record: String, table: String, pin: Pin = .none) -> String {
        """
        CASE WHEN (SELECT EXISTS (SELECT 1 FROM broadcast)) THEN coalesce((
                   SELECT json_agg(d.broadcast_id ORDER BY d.broadcast_id) FROM \(table) d
                   WHERE d.user_id = \(record).user_id AND d.shown_in <= coalesce(\(record).writes_through, \(record).version)
                     AND d.shown_in > coalesce(\(record).prior_writes_through, \(record).version - 1)\(pin.on("d")))::text, '[]') ELSE '[]' END
        """
    }

    /// Deletes up to `$2` of the oldest own-layer records logged before `$1`; each row tells
    /// whether the change feed had yet to publish it (above its cursor, or not committed in the
    /// cursor's snapshot). Planned for each cutoff (not prepared): a generic plan may scan the
    /// whole table when nothing is old, where the BRIN index on `changed_at` reads a block range
    /// or two.
    static let pruneOwnChanges = PGStatement(
        "history.prune_own_changes",
        """
        DELETE FROM badge_change c
        USING (
            SELECT user_id, version FROM badge_change WHERE changed_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED
        ) AS old, change_feed_lease f
        WHERE c.user_id = old.user_id AND c.version = old.version
        RETURNING c.seq > f.published_seq OR coalesce(NOT pg_visible_in_snapshot(c.xid, f.published_snapshot), false)
        """, prepared: false)

    /// `pruneOwnChanges` where Citus distributes the log: Citus refuses `FOR UPDATE` over many
    /// shards and a join of the distributed log with the coordinator's tables, so the subquery
    /// takes no lock (a row another transaction holds makes the delete wait), and the records
    /// come back by key: whether the change feed had published each is in its entry of the
    /// coordinator's outbox, deleted with it (`dropFromFeedOutbox`).
    static let pruneOwnChangesDistributed = PGStatement(
        "history.prune_own_changes_distributed",
        """
        DELETE FROM badge_change c
        USING (SELECT user_id, version FROM badge_change WHERE changed_at < $1 LIMIT $2) AS old
        WHERE c.user_id = old.user_id AND c.version = old.version
        RETURNING c.user_id, c.version
        """, prepared: false)

    /// The change feed's cursor (`seq`).
    static let feedCursorSeq = PGStatement("history.feed_cursor_seq", "SELECT published_seq FROM change_feed_lease")

    /// Deletes up to `$2` of the oldest broadcast records logged before `$1`.
    static let pruneBroadcastChanges = PGStatement(
        "history.prune_broadcast_changes",
        """
        DELETE FROM broadcast_change c
        USING (SELECT version FROM broadcast_change WHERE changed_at < $1 ORDER BY version LIMIT $2 FOR UPDATE SKIP LOCKED) AS old
        WHERE c.version = old.version
        RETURNING c.published_at IS NULL
        """)

    /// The number of records in the change log, as PostgreSQL estimates it (no table scan).
    static let changeLogSize = PGStatement(
        "history.size",
        """
        SELECT coalesce(sum(greatest(reltuples, 0)), 0)::bigint FROM pg_class
        WHERE oid IN ('badge_change'::regclass, 'broadcast_change'::regclass)
        """)
}
