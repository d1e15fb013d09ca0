import LibPQ

/// The reads of one user's tree.
extension BadgeSQL {
    /// A user's own version and the broadcast version, aggregates within a subtree and the
    /// active broadcasts within it, each with whether the user dismissed or saw it (each counts
    /// from the first own version whose writes reach its stamp): one statement, one snapshot,
    /// two single-user range scans plus the active broadcasts and the aggregation modes. Rows:
    /// kind 0 (the two versions and the muted nodes of the own version, as `user_version.mutes`
    /// keeps them), 1 (an aggregate: down to the depth, and deeper on an active broadcast's chain,
    /// which merging it needs), 2 (a broadcast: its id, then 1 when dismissed, 2 when seen, else
    /// 0), 3 (a mode: its position, pattern and mode).
    static let readTree = PGStatement(
        "badges.read_tree",
        """
        WITH v AS (
            SELECT coalesce(u.version, 0) AS own, coalesce(u.writes_through, u.version, 0) AS reach, u.mutes
            FROM (SELECT 1) AS one LEFT JOIN user_version u ON u.user_id = $1
        ), deep AS (
            SELECT coalesce(array_agg(path), '{}') AS paths
            FROM broadcast WHERE withdrawn_at IS NULL AND path <@ $2::ltree AND nlevel(path) > $3
        )
        SELECT 0 AS kind, v.own, coalesce((SELECT version FROM broadcast_version), 0),
               v.mutes::text, NULL::bigint, NULL::text, NULL::bigint
        FROM v
        UNION ALL
        SELECT 1, 0, 0, a.path::text, a.count, a.icon, a.unseen
        FROM badge_aggregate a
        WHERE a.user_id = $1 AND a.path <@ $2::ltree AND (nlevel(a.path) <= $3 OR (SELECT paths FROM deep) <@ a.path)
        UNION ALL
        SELECT 3, m.position::bigint, 0, m.pattern, NULL, m.mode, NULL FROM aggregation_mode m
        UNION ALL
        SELECT 2, b.id,
               CASE WHEN EXISTS (
                        SELECT 1 FROM broadcast_clear c
                        WHERE c.user_id = $1 AND c.broadcast_id = b.id AND c.shown_in <= v.reach) THEN 1
                    WHEN EXISTS (
                        SELECT 1 FROM broadcast_seen s
                        WHERE s.user_id = $1 AND s.broadcast_id = b.id AND s.shown_in <= v.reach) THEN 2
                    ELSE 0 END,
               b.path::text, b.count, b.icon, b.count
        FROM broadcast b CROSS JOIN v
        WHERE b.withdrawn_at IS NULL AND b.path <@ $2::ltree

        """)

    /// The broadcast version and the active broadcasts (kind 0: the version; 1: a broadcast).
    static let readBroadcastSet = PGStatement(
        "badges.read_broadcast_set",
        """
        SELECT 0 AS kind, version, NULL::text, NULL::bigint, NULL::text FROM broadcast_version
        UNION ALL
        SELECT 1, id, path::text, count, icon FROM broadcast WHERE withdrawn_at IS NULL
        """)

    /// The logged broadcast versions in `($1, $2]`, one row per broadcast added or withdrawn (a
    /// version with neither has one row with a NULL id).
    static let readBroadcastChanges = PGStatement(
        "badges.read_broadcast_changes",
        """
        SELECT c.version, b.added, (b.item->>'id')::bigint, b.item->>'path', (b.item->>'count')::bigint, b.item->>'icon'
        FROM broadcast_change c
        LEFT JOIN LATERAL (
            SELECT true AS added, a AS item FROM jsonb_array_elements(c.added) AS a
            UNION ALL
            SELECT false, w FROM jsonb_array_elements(c.withdrawn) AS w
        ) b ON true
        WHERE c.version > $1 AND c.version <= $2
        """)

    /// Whether the user has anything stored: a version (any change ever), own state, increments
    /// or items.
    static let userExists = PGStatement(
        "badges.user_exists",
        """
        SELECT EXISTS (SELECT 1 FROM user_version WHERE user_id = $1)
            OR EXISTS (SELECT 1 FROM badge_state WHERE user_id = $1)
            OR EXISTS (SELECT 1 FROM badge_increment WHERE user_id = $1)
            OR EXISTS (SELECT 1 FROM badge_item WHERE user_id = $1)
        """)
}
