import LibPQ

/// The reads of one user's tree.
extension BadgeSQL {
    /// A user's visible version, aggregates within a subtree and the broadcasts within it that
    /// the user has not dismissed: one statement, one snapshot, two single-user range scans plus
    /// the active broadcasts (a dismissal counts from the own version it shows in). Rows: kind 0 (the version), 1 (an aggregate), 2 (a broadcast, its
    /// id in the second column).
    static let readTree = PGStatement(
        "badges.read_tree",
        """
        SELECT 0 AS kind,
               coalesce((SELECT version FROM user_version WHERE user_id = $1), 0)
                 + coalesce((SELECT version FROM broadcast_version), 0),
               NULL::text, NULL::bigint, NULL::text, NULL::bigint
        UNION ALL
        SELECT 1, 0, a.path::text, a.count, a.icon, a.unseen
        FROM badge_aggregate a
        WHERE a.user_id = $1 AND a.path <@ $2::ltree AND nlevel(a.path) <= $3
        UNION ALL
        SELECT 2, b.id, b.path::text, b.count, b.icon, b.count
        FROM broadcast b
        WHERE b.withdrawn_at IS NULL AND b.path <@ $2::ltree
          AND NOT EXISTS (
              SELECT 1 FROM broadcast_clear c
              WHERE c.user_id = $1 AND c.broadcast_id = b.id
                AND c.shown_in <= coalesce((SELECT version FROM user_version WHERE user_id = $1), 0))
        """)

    /// Whether the user has anything stored: a version (any change ever), own state or items.
    static let userExists = PGStatement(
        "badges.user_exists",
        """
        SELECT EXISTS (SELECT 1 FROM user_version WHERE user_id = $1)
            OR EXISTS (SELECT 1 FROM badge_state WHERE user_id = $1)
            OR EXISTS (SELECT 1 FROM badge_item WHERE user_id = $1)
        """)
}
