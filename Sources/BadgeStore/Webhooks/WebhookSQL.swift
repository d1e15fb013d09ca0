import LibPQ

/// The webhooks' statements (``WebhookStore``).
enum WebhookSQL {
    static let put = PGStatement(
        "webhooks.put",
        """
        INSERT INTO webhook_subscription AS s (id, url, secret, paths, kinds, origin, updated_at)
        VALUES ($1, $2, $3, $4::text[], $5::text[], $6, now())
        ON CONFLICT (id) DO UPDATE SET url = EXCLUDED.url, secret = EXCLUDED.secret, paths = EXCLUDED.paths,
            kinds = EXCLUDED.kinds, origin = EXCLUDED.origin, updated_at = EXCLUDED.updated_at
        RETURNING (xmax = 0)
        """)

    static let list = PGStatement(
        "webhooks.list",
        """
        SELECT id, url, secret, array_to_json(paths)::text, array_to_json(kinds)::text, origin
        FROM webhook_subscription ORDER BY id
        """)

    static let remove = PGStatement(
        "webhooks.remove",
        """
        WITH gone AS (DELETE FROM webhook_subscription WHERE id = $1 RETURNING id),
        pending AS (DELETE FROM webhook_delivery d USING gone WHERE d.subscription_id = gone.id AND d.state = 'pending')
        SELECT EXISTS (SELECT 1 FROM gone)
        """)

    static let removeFileExcept = PGStatement(
        "webhooks.remove_file_except",
        """
        WITH gone AS (DELETE FROM webhook_subscription WHERE origin = 'file' AND NOT (id = ANY($1::text[])) RETURNING id),
        pending AS (DELETE FROM webhook_delivery d USING gone WHERE d.subscription_id = gone.id AND d.state = 'pending')
        SELECT count(*)::int FROM gone
        """)

    static let positions = PGStatement(
        "webhooks.positions",
        "SELECT user_id, own_version, root_count, root_unseen FROM webhook_user WHERE user_id = ANY($1::text[])")

    static let insertDeliveries = PGStatement(
        "webhooks.insert_deliveries",
        """
        INSERT INTO webhook_delivery (user_id, id, subscription_id, kind, payload)
        SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[])
        ORDER BY 1, 2
        ON CONFLICT (user_id, id) DO NOTHING
        """)

    static let movePositions = PGStatement(
        "webhooks.move_positions",
        """
        INSERT INTO webhook_user AS w (user_id, own_version, root_count, root_unseen)
        SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[]) ORDER BY 1
        ON CONFLICT (user_id) DO UPDATE SET own_version = EXCLUDED.own_version, root_count = EXCLUDED.root_count,
            root_unseen = EXCLUDED.root_unseen
        WHERE w.own_version < EXCLUDED.own_version
        """)

    /// Deliveries of removed subscriptions die here rather than wait for a sender.
    static let claim = PGStatement("webhooks.claim", claim(from: "webhook_delivery"))

    /// Where Citus is installed (`TableParts.claimInTurn`): the users of the first `$1` due
    /// deliveries, read without locks, then `claim` over one shard's users (`$3`).
    static let citusClaim = TableParts.citusClaim(
        "webhooks", table: "webhook_delivery", due: "state = 'pending' AND next_attempt_at <= now()", claim: claim(from:pin:))

    /// The SQL of `claim` over one part of `webhook_delivery` (`TableParts`): the table, or one
    /// of its partitions (catalog text, never input); `pin` on each of its reads.
    static func claim(from part: String, pin: BadgeSQL.Pin = .none) -> String {
        """
        WITH due AS (
            SELECT d.user_id, d.id, s.id IS NULL AS orphan
            FROM \(part) d LEFT JOIN webhook_subscription s ON s.id = d.subscription_id
            WHERE d.state = 'pending' AND d.next_attempt_at <= now()\(pin.on("d"))
            ORDER BY d.next_attempt_at
            LIMIT $1
            FOR UPDATE OF d SKIP LOCKED
        ), orphans AS (
            UPDATE \(part) d SET state = 'dead', finished_at = now(), last_error = 'the subscription was removed'
            FROM due WHERE due.orphan AND d.user_id = due.user_id AND d.id = due.id\(pin.on("d"))
        )
        UPDATE \(part) d
        SET attempts = d.attempts + 1, next_attempt_at = now() + make_interval(secs => $2::float8)
        FROM due, webhook_subscription s
        WHERE NOT due.orphan AND d.user_id = due.user_id AND d.id = due.id AND s.id = d.subscription_id\(pin.on("d"))
        RETURNING d.user_id, d.id, d.subscription_id, d.kind, d.payload, d.attempts, s.url, s.secret
        """
    }

    static let delivered = PGStatement(
        "webhooks.delivered",
        """
        UPDATE webhook_delivery SET state = 'delivered', finished_at = now(), last_error = NULL
        WHERE user_id = $1 AND id = $2 AND state = 'pending'
        """)

    static let retry = PGStatement(
        "webhooks.retry",
        """
        UPDATE webhook_delivery SET next_attempt_at = now() + make_interval(secs => $3::float8), last_error = $4
        WHERE user_id = $1 AND id = $2 AND state = 'pending'
        """)

    static let dead = PGStatement(
        "webhooks.dead",
        """
        UPDATE webhook_delivery SET state = 'dead', finished_at = now(), last_error = $3
        WHERE user_id = $1 AND id = $2 AND state = 'pending'
        """)

    static let replay = PGStatement(
        "webhooks.replay",
        """
        UPDATE webhook_delivery SET state = 'pending', attempts = 0, next_attempt_at = now(), finished_at = NULL
        WHERE state = 'dead'
          AND ($1::text IS NULL OR id = $1) AND ($2::text IS NULL OR user_id = $2) AND ($3::text IS NULL OR subscription_id = $3)
        """)

    static let listDeliveries = PGStatement(
        "webhooks.list_deliveries",
        """
        SELECT user_id, id, subscription_id, kind, state, attempts, last_error,
               to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
        FROM webhook_delivery
        WHERE state = $1 AND ($2::text IS NULL OR subscription_id = $2)
        ORDER BY created_at DESC, user_id, id
        LIMIT $3
        """)

    static let prune = PGStatement(
        "webhooks.prune",
        """
        DELETE FROM webhook_delivery d USING (
            SELECT user_id, id FROM webhook_delivery
            WHERE state <> 'pending' AND finished_at < now() - make_interval(secs => $1::float8)
            LIMIT $2
        ) old
        WHERE d.user_id = old.user_id AND d.id = old.id
        """)
}
