import LibPQ

/// The badge statements. Every one binds its values (arrays for set-based writes) and names one
/// user or a list of users, so each is an index range scan on `(user_id, path)`.
enum BadgeSQL {
    static let maxCount = "9223372036854775807"

    static let forceClear = PGStatement(
        "badges.force_clear",
        """
        DELETE FROM badge_state s
        USING unnest($1::text[], $2::ltree[]) AS c(user_id, path)
        WHERE s.user_id = c.user_id AND s.path <@ c.path
        """)

    static let clear = PGStatement(
        "badges.clear",
        """
        DELETE FROM badge_state s
        USING unnest($1::text[], $2::ltree[]) AS c(user_id, path)
        WHERE s.user_id = c.user_id AND s.path = c.path
        """)

    static let set = PGStatement(
        "badges.set",
        """
        INSERT INTO badge_state AS s (user_id, path, count, icon, expires_at)
        SELECT * FROM unnest($1::text[], $2::ltree[], $3::bigint[], $4::text[], $5::timestamptz[])
        ON CONFLICT (user_id, path) DO UPDATE
        SET count = excluded.count, icon = excluded.icon, expires_at = excluded.expires_at, updated_at = now()
        """)

    /// An expired row counts as absent: the increment starts from zero and drops its icon.
    static let increment = PGStatement(
        "badges.increment",
        """
        INSERT INTO badge_state AS s (user_id, path, count, icon, expires_at)
        SELECT u, p, c, NULL, e FROM unnest($1::text[], $2::ltree[], $3::bigint[], $4::timestamptz[]) AS i(u, p, c, e)
        ON CONFLICT (user_id, path) DO UPDATE
        SET count = CASE
                WHEN s.expires_at <= now() THEN excluded.count
                WHEN s.count > \(maxCount) - excluded.count THEN \(maxCount)
                ELSE s.count + excluded.count END,
            icon = CASE WHEN s.expires_at <= now() THEN NULL ELSE s.icon END,
            expires_at = CASE WHEN s.expires_at <= now() THEN excluded.expires_at
                ELSE coalesce(excluded.expires_at, s.expires_at) END,
            updated_at = now()
        """)

    /// Marks users dirty without rewriting marks that exist. `DO UPDATE … WHERE …` that updates
    /// nothing still locks the existing row, so it waits for a rollup worker that holds it; when
    /// that worker deletes the row and commits, the insert happens after all. A mark is never
    /// lost (plain `DO NOTHING` would not wait, and its mark could be deleted under it). Users in
    /// `$2` get `bump` (their version must move even if no aggregate does).
    static let markDirty = PGStatement(
        "badges.mark_dirty",
        """
        INSERT INTO dirty_user AS d (user_id, bump)
        SELECT u, u = ANY($2::text[]) FROM unnest($1::text[]) AS u
        ON CONFLICT (user_id) DO UPDATE SET bump = true WHERE excluded.bump AND NOT d.bump
        """)

    /// Records, per user, the dismissal of the active broadcasts each clear hits (the path
    /// itself; with force, its subtree). Returns the users with a new dismissal.
    static let dismissBroadcasts = PGStatement(
        "badges.dismiss_broadcasts",
        """
        INSERT INTO broadcast_clear (user_id, broadcast_id)
        SELECT DISTINCT c.user_id, b.id
        FROM unnest($1::text[], $2::ltree[], $3::bool[]) AS c(user_id, path, force)
        JOIN broadcast b ON b.withdrawn_at IS NULL AND (b.path = c.path OR (c.force AND b.path <@ c.path))
        ORDER BY 1, 2
        ON CONFLICT (user_id, broadcast_id) DO NOTHING
        RETURNING user_id
        """)

    /// Bumps the version of the set of active broadcasts and notifies every query service.
    static let bumpBroadcastVersion = PGStatement(
        "badges.bump_broadcast_version",
        """
        WITH bumped AS (
            UPDATE broadcast_version SET version = version + 1, changed_at = now() RETURNING version
        )
        SELECT version, pg_notify($1, json_build_object('broadcast_version', version)::text) FROM bumped
        """)

    /// Per-user transaction locks, always taken in ascending key order.
    static let lockUsers = PGStatement(
        "badges.lock_users",
        """
        SELECT pg_advisory_xact_lock(1919247460, k)
        FROM (SELECT DISTINCT hashtext(u) AS k FROM unnest($1::text[]) AS u ORDER BY 1) AS keys
        """)

    static let claimDirtyUsers = PGStatement(
        "badges.claim_dirty_users",
        "SELECT user_id, bump FROM dirty_user WHERE user_id = ANY($1::text[]) FOR UPDATE SKIP LOCKED")

    static let claimOldestDirtyUsers = PGStatement(
        "badges.claim_oldest_dirty_users",
        "SELECT user_id, dirtied_at FROM dirty_user ORDER BY dirtied_at LIMIT $1 FOR UPDATE SKIP LOCKED")

    /// The number of users waiting for a rollup.
    static let queueDepth = PGStatement("badges.queue_depth", "SELECT count(*) FROM dirty_user")

    /// Deletes up to `$1` expired own-state rows (rows another transaction holds are left for
    /// next time) and returns their users, to be marked dirty in the same transaction.
    static let expireBadges = PGStatement(
        "badges.expire_badges",
        """
        WITH expired AS (
            DELETE FROM badge_state s
            USING (
                SELECT user_id, path FROM badge_state
                WHERE expires_at <= now()
                ORDER BY expires_at
                LIMIT $1
                FOR UPDATE SKIP LOCKED
            ) AS e
            WHERE s.user_id = e.user_id AND s.path = e.path
            RETURNING s.user_id
        )
        SELECT DISTINCT user_id FROM expired
        """)

    /// Withdraws the broadcasts whose expiry has passed, as of their expiry.
    static let expireBroadcasts = PGStatement(
        "badges.expire_broadcasts",
        "UPDATE broadcast SET withdrawn_at = expires_at WHERE withdrawn_at IS NULL AND expires_at <= now()")

    static let removeDirty = PGStatement(
        "badges.remove_dirty", "DELETE FROM dirty_user WHERE user_id = ANY($1::text[])")

    /// Recomputes every aggregate of the listed users from unexpired own state, writes only the
    /// rows that changed, bumps versions of users with any change, and notifies.
    static let recompute = PGStatement(
        "badges.recompute",
        """
        WITH users AS (
            SELECT unnest($1::text[]) AS user_id
        ), own AS (
            SELECT s.user_id, s.path, s.count, s.icon
            FROM badge_state s JOIN users u ON s.user_id = u.user_id
            WHERE s.expires_at IS NULL OR s.expires_at > now()
        ), fresh AS (
            SELECT e.user_id, e.path, least(sum(e.count), \(maxCount))::bigint AS count, max(o.icon) AS icon
            FROM (
                SELECT o.user_id, subpath(o.path, 0, level) AS path, o.count
                FROM own o CROSS JOIN LATERAL generate_series(1, nlevel(o.path)) AS level
            ) e
            LEFT JOIN own o ON o.user_id = e.user_id AND o.path = e.path
            GROUP BY e.user_id, e.path
        ), removed AS (
            DELETE FROM badge_aggregate a
            USING users u
            WHERE a.user_id = u.user_id
              AND NOT EXISTS (SELECT 1 FROM fresh f WHERE f.user_id = a.user_id AND f.path = a.path)
            RETURNING a.user_id
        ), written AS (
            INSERT INTO badge_aggregate AS a (user_id, path, count, icon)
            SELECT user_id, path, count, icon FROM fresh
            ON CONFLICT (user_id, path) DO UPDATE
            SET count = excluded.count, icon = excluded.icon
            WHERE (a.count, a.icon) IS DISTINCT FROM (excluded.count, excluded.icon)
            RETURNING a.user_id
        ), bumped AS (
            INSERT INTO user_version AS v (user_id, version)
            SELECT DISTINCT user_id, 1 FROM (
                SELECT user_id FROM removed
                UNION ALL SELECT user_id FROM written
                UNION ALL SELECT unnest($3::text[])
            ) AS c
            ON CONFLICT (user_id) DO UPDATE SET version = v.version + 1, changed_at = now()
            RETURNING v.user_id, v.version
        )
        SELECT user_id, version, pg_notify($2, json_build_object('user', user_id, 'version', version)::text)
        FROM bumped
        """)

    /// A user's visible version, aggregates within a subtree and the broadcasts within it that
    /// the user has not dismissed: one statement, one snapshot, two single-user range scans plus
    /// the active broadcasts. Rows: kind 0 (the version), 1 (an aggregate), 2 (a broadcast, its
    /// id in the second column).
    static let readTree = PGStatement(
        "badges.read_tree",
        """
        SELECT 0 AS kind,
               coalesce((SELECT version FROM user_version WHERE user_id = $1), 0)
                 + coalesce((SELECT version FROM broadcast_version), 0),
               NULL::text, NULL::bigint, NULL::text
        UNION ALL
        SELECT 1, 0, a.path::text, a.count, a.icon
        FROM badge_aggregate a
        WHERE a.user_id = $1 AND a.path <@ $2::ltree AND nlevel(a.path) <= $3
        UNION ALL
        SELECT 2, b.id, b.path::text, b.count, b.icon
        FROM broadcast b
        WHERE b.withdrawn_at IS NULL AND b.path <@ $2::ltree
          AND NOT EXISTS (SELECT 1 FROM broadcast_clear c WHERE c.user_id = $1 AND c.broadcast_id = b.id)
        """)

    /// Whether the user has anything stored: a version (any change ever) or own state.
    static let userExists = PGStatement(
        "badges.user_exists",
        """
        SELECT EXISTS (SELECT 1 FROM user_version WHERE user_id = $1)
            OR EXISTS (SELECT 1 FROM badge_state WHERE user_id = $1)
        """)
}
