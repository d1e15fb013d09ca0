import LibPQ

/// The writes of users' own state, dirty marks and broadcast dismissals.
extension BadgeSQL {
    /// The number of this transaction's write of the user in `column` (its `user_write`
    /// sequence), which every row it writes is stamped with (`shown_in`): the row shows in every
    /// version whose `writes_through` reaches it. The writer takes it first (`takeWriteNumbers`,
    /// through `markDirty`) and holds it until it commits; without it the stamp is NULL and the
    /// write fails.
    static func writeNumber(of column: String, pin: Pin = .none) -> String {
        "(SELECT uw.seq FROM user_write uw WHERE uw.user_id = \(column)\(pin.on("uw")))"
    }

    /// How far the writes of the user in `column`'s current version reach (0: no version yet;
    /// a version made before migration 0007 reaches its own number).
    static func writesThrough(of column: String, pin: Pin = .none) -> String {
        "coalesce((SELECT coalesce(v.writes_through, v.version) FROM user_version v WHERE v.user_id = \(column)\(pin.on("v"))), 0)"
    }

    /// A statement in its shipped form and in its form for the users of one Citus shard, whose
    /// users are its parameter `users` (`$1` unless said; `Pin.users`): `sql` puts
    /// `pin.on(alias)` after the conditions on each per-user table it names.
    struct ShardForms: Sendable {
        let shipped: PGStatement
        let ofShard: PGStatement

        init(_ name: String, users: String = "$1::text[]", prepared: Bool = true, _ sql: (Pin) -> String) {
            shipped = PGStatement(name, sql(.none), prepared: prepared)
            ofShard = PGStatement(name + "_of_shard", sql(.users(users)), prepared: prepared)
        }

        /// `ofShard` when `shard`, else `shipped`.
        func form(_ shard: Bool) -> PGStatement { shard ? ofShard : shipped }

        /// Both forms' names.
        var names: [String] { [shipped.name, ofShard.name] }
    }

    /// What a statement adds to each per-user table it names: nothing (`none`), or, for Citus,
    /// a filter to the users of one shard (`users(parameter)`, an array of their ids): Citus runs
    /// a statement with joins, correlated subqueries or data-modifying CTEs only when it can
    /// prune every distributed table in it to one shard by such a filter (docs/SHARDING.md, rule
    /// 10). The shipped statements go without it: where the users' key is not the index
    /// condition, the filter compares the whole array with every row.
    enum Pin: Sendable {
        case none
        case users(String)

        /// Whether this adds nothing.
        var isNone: Bool {
            if case .none = self { true } else { false }
        }

        /// ` AND alias.user_id = ANY(parameter)`, or nothing.
        func on(_ alias: String) -> String {
            switch self {
            case .none: ""
            case .users(let parameter): " AND \(alias).user_id = ANY(\(parameter))"
            }
        }
    }

    /// Whether the increment or item `row` (an alias) is seen: a seen at a version marked it, or
    /// a seen mark of its node or of an ancestor reaches its time.
    static func isSeen(_ row: String, pin: Pin = .none) -> String {
        """
        (\(row).seen OR EXISTS (
            SELECT 1 FROM badge_seen_mark m
            WHERE m.user_id = \(row).user_id AND m.path @> \(row).path AND m.seen_through >= \(row).occurred_at\(pin.on("m"))))
        """
    }

    /// The unseen part of a state's `count` with its `seen_count` (NULL: a row from before
    /// migration 3, all seen; a NULL count gives 0): `BadgeState.unseen`.
    static func unseenOfState(count: String, seen: String) -> String {
        "greatest(\(count) - coalesce(\(seen), \(count)), 0)"
    }

    /// The `unseen` argument of `badge_fold` for an increment or decrement row: an increment's
    /// amount when not seen, a decrement's 1 when not seen, else 0 (migration 0013).
    static func foldUnseen(amount: String, seen: String) -> String {
        "CASE WHEN \(seen) THEN 0 WHEN \(amount) >= 0 THEN \(amount) ELSE 1 END"
    }

    /// Clears counters: of each node (with `$4`, of each node of its subtree; a node several
    /// clears reach takes the latest time), the increments and decrements that occurred up to
    /// `$3` go, and the state goes too unless its set occurred later (then nothing changes) or
    /// later increments stay: then it carries them (count 0, no icon, nothing seen, no dot of its
    /// own; the set's time kept, the expiry only when given after `$3`). An expired state goes
    /// with all its increments.
    /// Returns the states hit.
    static let clearCounters = ShardForms("badges.clear_counters") { pin in
        """
        WITH c AS (
            SELECT * FROM unnest($1::text[], $2::ltree[], $3::timestamptz[], $4::bool[]) AS c(user_id, path, through, subtree)
        ), reached AS (
            SELECT s.user_id, s.path, max(c.through) AS through, s.set_at, coalesce(s.expires_at <= now(), false) AS expired
            FROM badge_state s JOIN c ON s.user_id = c.user_id AND (s.path = c.path OR (c.subtree AND s.path <@ c.path))\(pin.on("s"))
            GROUP BY s.user_id, s.path
        ), hit AS (
            SELECT r.user_id, r.path, r.through, r.expired,
                   EXISTS (
                       SELECT 1 FROM badge_increment i
                       WHERE i.user_id = r.user_id AND i.path = r.path AND i.occurred_at > r.through\(pin.on("i"))
                   ) AS keeps
            FROM reached r
            WHERE r.expired OR r.set_at IS NULL OR r.set_at <= r.through
        ), wiped AS (
            DELETE FROM badge_increment i USING hit h
            WHERE i.user_id = h.user_id AND i.path = h.path AND (h.expired OR NOT h.keeps OR i.occurred_at <= h.through)\(pin.on("i"))
        ), carried AS (
            UPDATE badge_state s SET count = 0, icon = NULL, seen_count = 0, keeps_dot = false, updated_at = now(),
                   expires_at = CASE WHEN s.expires_from > h.through THEN s.expires_at END,
                   expires_from = CASE WHEN s.expires_from > h.through THEN s.expires_from END
            FROM hit h
            WHERE s.user_id = h.user_id AND s.path = h.path AND h.keeps AND NOT h.expired\(pin.on("s"))
        ), gone AS (
            DELETE FROM badge_state s USING hit h
            WHERE s.user_id = h.user_id AND s.path = h.path AND (h.expired OR NOT h.keeps)\(pin.on("s"))
        )
        SELECT count(*) FROM hit
        """
    }

    /// Sets (`BadgeTree.applySet`): a set holds unless a clear mark that reaches its node is at
    /// or after its time `$6`, or the node's unexpired state holds a set that supersedes it (a
    /// later time; at one time the larger count, then icon, then expiry, none the largest:
    /// `BadgeSet.supersedes`). One that holds takes the node's increments and decrements that
    /// occurred up to it (all of an expired state's) and replaces the state: a dot even at
    /// count 0, seen in full when a seen mark of the node or of an ancestor reaches its time, with
    /// its expiry unless a later increment gave one.
    static let set = ShardForms("badges.set") { pin in
        """
        WITH w AS (
            SELECT * FROM unnest($1::text[], $2::ltree[], $3::bigint[], $4::text[], $5::timestamptz[], $6::timestamptz[])
                AS w(user_id, path, count, icon, expires_at, at)
        ), held AS (
            SELECT w.*, coalesce(o.expires_at <= now(), false) AS expired
            FROM w LEFT JOIN badge_state o ON o.user_id = w.user_id AND o.path = w.path\(pin.on("o"))
            WHERE NOT EXISTS (
                    SELECT 1 FROM badge_clear_mark m
                    WHERE m.user_id = w.user_id AND m.cleared_through >= w.at AND (m.path = w.path OR (m.subtree AND m.path @> w.path))\(pin.on("m"))
                )
              AND (o.set_at IS NULL OR o.expires_at <= now()
                   OR (w.at, w.count, coalesce(w.icon, '') COLLATE "C", coalesce(w.expires_at, 'infinity'))
                    > (o.set_at, o.count, coalesce(o.icon, '') COLLATE "C", coalesce(o.expires_at, 'infinity')))
        ), wiped AS (
            DELETE FROM badge_increment i USING held h
            WHERE i.user_id = h.user_id AND i.path = h.path AND (h.expired OR i.occurred_at <= h.at)\(pin.on("i"))
        )
        INSERT INTO badge_state AS s (user_id, path, count, icon, expires_at, seen_count, keeps_dot, shown_in, set_at, expires_from, updated_at)
        SELECT h.user_id, h.path, h.count, h.icon, h.expires_at,
               CASE WHEN EXISTS (
                   SELECT 1 FROM badge_seen_mark m WHERE m.user_id = h.user_id AND m.path @> h.path AND m.seen_through >= h.at\(pin.on("m"))
               ) THEN h.count ELSE 0 END,
               true, \(writeNumber(of: "h.user_id", pin: pin)), h.at, h.at, now()
        FROM held h
        ON CONFLICT (user_id, path) DO UPDATE
        SET count = excluded.count, icon = excluded.icon, updated_at = excluded.updated_at,
            keeps_dot = true, shown_in = excluded.shown_in, seen_count = excluded.seen_count, set_at = excluded.set_at,
            -- An expiry a later increment gave stays, as it would had the set arrived first.
            expires_at = CASE WHEN s.expires_from > excluded.set_at AND s.expires_at > excluded.updated_at THEN s.expires_at ELSE excluded.expires_at END,
            expires_from = CASE WHEN s.expires_from > excluded.set_at AND s.expires_at > excluded.updated_at THEN s.expires_from ELSE excluded.expires_from END
        """
    }

    /// The expired states of the given nodes go, with their increments (an increment of an
    /// expired state starts from nothing): for the nodes `addIncrements` left out.
    static let dropExpiredStates = ShardForms("badges.drop_expired_states") { pin in
        """
        WITH expired AS (
            SELECT s.user_id, s.path FROM badge_state s
            JOIN unnest($1::text[], $2::ltree[]) AS n(user_id, path) ON s.user_id = n.user_id AND s.path = n.path
            WHERE s.expires_at <= now()\(pin.on("s"))
        ), wiped AS (
            DELETE FROM badge_increment i USING expired e WHERE i.user_id = e.user_id AND i.path = e.path\(pin.on("i"))
        )
        DELETE FROM badge_state s USING expired e WHERE s.user_id = e.user_id AND s.path = e.path\(pin.on("s"))
        """
    }

    /// Adds increments and decrements (negative amounts), each at the time it occurred (amounts
    /// at one time add up, within ±the largest count, and show first in the next version),
    /// unless a clear mark that reaches its node, or the set its state holds, is at or after that
    /// time. A node needs no state for its increments (see `carryIncrements`): one is made
    /// (count 0, no icon, no dot of its own) only to hold an expiry given with them, or to mark
    /// it `debited` (its count is then a fold in time order, see `ownRows`) when a decrement
    /// comes; an existing state takes the expiry and the mark. An existing state is not locked
    /// unless one of them changes (writers of one user hold its write number anyway). The increments of a node whose
    /// state has expired are left out: the nodes come back, for `dropExpiredStates` and a
    /// second call. With `.fail`, an increment at a time its node already has fails the
    /// statement instead of adding up (see ``RowConflicts``), and what the new rows add to
    /// their nodes (count, and unseen unless a seen mark reaches their time) is recorded in
    /// `badge_delta` for the rollup to add (for the users of `$6`, returned instead: a writer
    /// that rolls them up itself hands them to its round, `HeldDeltas`; for the users of `$7`,
    /// whom `markDirty` left unmarked for it, on the dirty mark this statement gives each, one
    /// row per user instead of one per node, migration 31); a user whose
    /// increments meet a state with an expiry or a debited one gets a recount instead (their
    /// dirty mark at the writer's number says so; a user the writer left unmarked gets one).
    static func addIncrements(_ conflicts: RowConflicts) -> ShardForms {
        switch conflicts {
        case .merge: return addIncrementsMerging
        case .fail: return addNewIncrements
        }
    }

    private static let addIncrementsMerging = addIncrementsStatement(
        "badges.add_increments",
        onConflict: """
            ON CONFLICT (user_id, path, occurred_at) DO UPDATE
            SET amount = least(greatest(i.amount + excluded.amount, -\(maxCount)), \(maxCount)),
                shown_in = excluded.shown_in, seen = false
            """
    ) { _ in "" }
    /// Only new rows, so each adds its whole amount: their deltas are exact. The deltas of the
    /// users of `$6` (a writer that rolls them up in the same transaction, `HeldDeltas`) are
    /// returned instead of stored, beside the expired nodes' rows (whose amounts are `NULL`).
    private static let addNewIncrements = addIncrementsStatement(
        "badges.add_new_increments", onConflict: "RETURNING i.user_id, i.path, i.occurred_at, i.amount, i.shown_in"
    ) { pin in
            """
            , delta AS (
                SELECT a.user_id, a.path, least(sum(a.amount), \(maxCount))::bigint AS amount,
                       least(coalesce(sum(a.amount) FILTER (WHERE NOT EXISTS (
                           SELECT 1 FROM badge_seen_mark m
                           WHERE m.user_id = a.user_id AND m.path @> a.path AND m.seen_through >= a.occurred_at\(pin.on("m")))), 0), \(maxCount))::bigint
                           AS unseen,
                       min(a.shown_in) AS seq, h.user_id IS NOT NULL AS held, m.user_id IS NOT NULL AS marked
                FROM added a
                -- Joins (hashed), not `<> ALL($6)`, which compares every row with every user.
                LEFT JOIN (SELECT DISTINCT unnest($6::text[]) AS user_id) AS h ON h.user_id = a.user_id
                LEFT JOIN (SELECT DISTINCT unnest($7::text[]) AS user_id) AS m ON m.user_id = a.user_id
                WHERE a.amount > 0
                GROUP BY a.user_id, a.path, h.user_id, m.user_id
            ), recorded AS (
                INSERT INTO badge_delta (user_id, path, amount, unseen, seq)
                SELECT user_id, path, amount, unseen, seq FROM delta WHERE NOT held AND NOT marked
            ), recounted AS (
                -- The write's mark asks for a recount; a user the writer left unmarked (it
                -- rolls them up itself, `markDirty`'s `$4`) gets one that does. (Users of `$7`
                -- get theirs below.)
                INSERT INTO dirty_mark AS d (user_id, seq, bump, recount)
                SELECT k.user_id, \(writeNumber(of: "k.user_id", pin: pin)), false, true
                FROM (SELECT DISTINCT user_id FROM kept WHERE timed AND NOT (user_id = ANY($7::text[])) ORDER BY 1) AS k
                ON CONFLICT (user_id, seq) DO UPDATE SET recount = true, additive = false WHERE NOT d.recount OR d.additive
            ), carrying AS (
                -- The marks of the users of `$7` (whom `markDirty` left unmarked for this), each
                -- with its deltas (migration 31): `additive` unless the write needs a recount
                -- (a timed state), and `recount` for builds that do not read `additive`.
                INSERT INTO dirty_mark (user_id, seq, bump, recount, additive, delta_paths, delta_amounts, delta_unseen)
                SELECT m.user_id, \(writeNumber(of: "m.user_id", pin: pin)), false, true,
                       NOT EXISTS (SELECT 1 FROM kept k WHERE k.user_id = m.user_id AND k.timed),
                       array_agg(m.path) FILTER (WHERE m.path IS NOT NULL), array_agg(m.amount) FILTER (WHERE m.path IS NOT NULL),
                       array_agg(m.unseen) FILTER (WHERE m.path IS NOT NULL)
                FROM (
                    -- Each user's deltas and a row of the user's own, grouped by user: no join
                    -- of the users with the deltas, which the planner, guessing one delta, ran
                    -- as a loop over both (2.8 million comparisons for a batch of 1,440 users,
                    -- 0.4 s) once the deltas' user ids compared bytewise and `$7`'s did not
                    -- (migration 32): a merge join needs both sides sorted alike.
                    SELECT d.user_id, d.path, d.amount, d.unseen FROM delta d WHERE d.marked
                    UNION ALL
                    SELECT unnest($7::text[]), NULL, NULL, NULL
                ) AS m
                GROUP BY m.user_id
                ORDER BY 1
            )
            """
    }

    private static func addIncrementsStatement(_ name: String, onConflict: String, deltas: (Pin) -> String) -> ShardForms {
        ShardForms(name) { pin in
            let deltas = deltas(pin)
            return """
            WITH a AS (
                SELECT * FROM unnest($1::text[], $2::ltree[], $3::timestamptz[], $4::bigint[], $5::timestamptz[])
                    AS a(user_id, path, occurred_at, amount, expires_at)
            ), kept AS (
                SELECT a.*, w.seq AS next, s.user_id IS NOT NULL AS stored,
                       coalesce(s.expires_at <= now(), false) AS expired,
                       s.expires_at IS NOT NULL OR a.expires_at IS NOT NULL OR coalesce(s.debited, false) OR a.amount < 0 AS timed
                FROM a
                LEFT JOIN user_write w ON w.user_id = a.user_id\(pin.on("w"))
                LEFT JOIN badge_state s ON s.user_id = a.user_id AND s.path = a.path\(pin.on("s"))
                WHERE (s.set_at IS NULL OR a.occurred_at > s.set_at OR s.expires_at <= now())
                  AND NOT EXISTS (
                    SELECT 1 FROM badge_clear_mark m
                    WHERE m.user_id = a.user_id AND m.cleared_through >= a.occurred_at
                      AND (m.path = a.path OR (m.subtree AND m.path @> a.path))\(pin.on("m"))
                )
            ), marked AS (
                -- Per node: the expiry of its latest increment that gives one (at one time the
                -- latest expiry), and whether a decrement comes.
                SELECT user_id, path, bool_or(stored) AS stored, min(next) AS next, bool_or(amount < 0) AS debits,
                       (array_agg(expires_at ORDER BY occurred_at DESC, expires_at DESC) FILTER (WHERE expires_at IS NOT NULL))[1]
                           AS expires_at,
                       max(occurred_at) FILTER (WHERE expires_at IS NOT NULL) AS expires_from
                FROM kept WHERE NOT expired AND (expires_at IS NOT NULL OR amount < 0)
                GROUP BY user_id, path
            ), carried AS (
                INSERT INTO badge_state (user_id, path, count, icon, expires_at, seen_count, keeps_dot, shown_in, debited, expires_from)
                SELECT user_id, path, 0, NULL, expires_at, 0, false, next, debits, expires_from
                FROM marked WHERE NOT stored ORDER BY user_id, path
                ON CONFLICT (user_id, path) DO NOTHING
            ), expiring AS (
                UPDATE badge_state s
                SET expires_at = CASE WHEN m.later THEN m.expires_at ELSE s.expires_at END,
                    expires_from = CASE WHEN m.later THEN m.expires_from ELSE s.expires_from END,
                    debited = s.debited OR m.debits, updated_at = now()
                FROM (
                    SELECT m.*, m.expires_from IS NOT NULL AND (
                               o.expires_from IS NULL
                               OR (m.expires_from, m.expires_at) > (o.expires_from, coalesce(o.expires_at, 'infinity'))) AS later
                    FROM marked m JOIN badge_state o ON o.user_id = m.user_id AND o.path = m.path\(pin.on("o"))
                    WHERE m.stored
                ) AS m
                WHERE s.user_id = m.user_id AND s.path = m.path AND (m.later OR (m.debits AND NOT s.debited))\(pin.on("s"))
            ), added AS (
                INSERT INTO badge_increment AS i (user_id, path, occurred_at, amount, shown_in)
                SELECT user_id, path, occurred_at, amount, next FROM kept WHERE NOT expired
                \(onConflict)
            )\(deltas)
            SELECT DISTINCT user_id, path::text, NULL::bigint, NULL::bigint, NULL::bigint FROM kept WHERE expired\(
                deltas.isEmpty ? "" : "\nUNION ALL\nSELECT user_id, path::text, amount, unseen, seq FROM delta WHERE held")
            """
        }
    }

    /// Gives every node with increments but no state, among the given nodes (with `$3`, their
    /// subtrees), the state that carries them (count 0, no icon, nothing seen, no dot of its
    /// own; its first version that of its earliest increment): what clears and decrements, which
    /// reach increments through their node's state, need first. An increment alone makes no
    /// state: a node's increments count without one (`ownRows`), so ingest writes one row per
    /// increment of a new node.
    static let carryIncrements = ShardForms("badges.carry_increments") { pin in
        """
        WITH n AS (
            SELECT * FROM unnest($1::text[], $2::ltree[], $3::bool[]) AS n(user_id, path, subtree)
        )
        INSERT INTO badge_state (user_id, path, count, icon, expires_at, seen_count, keeps_dot, shown_in)
        SELECT x.user_id, x.path, 0, NULL, NULL, 0, false, min(x.shown_in)
        FROM (
            SELECT i.user_id, i.path, i.shown_in
            FROM n JOIN badge_increment i ON i.user_id = n.user_id AND i.path = n.path
            WHERE NOT n.subtree\(pin.on("i"))
            UNION ALL
            SELECT i.user_id, i.path, i.shown_in
            FROM n JOIN badge_increment i ON i.user_id = n.user_id AND i.path <@ n.path
            WHERE n.subtree\(pin.on("i"))
        ) AS x
        WHERE NOT EXISTS (SELECT 1 FROM badge_state s WHERE s.user_id = x.user_id AND s.path = x.path\(pin.on("s")))
        GROUP BY x.user_id, x.path
        ORDER BY 1, 2
        ON CONFLICT (user_id, path) DO NOTHING
        """
    }

    /// Records clear marks (keeping the latest time of each) and removes for good the live items
    /// they reach that occurred up to then. Returns the items removed.
    static let markCleared = ShardForms("badges.mark_cleared") { pin in
        """
        WITH c AS (
            SELECT * FROM unnest($1::text[], $2::ltree[], $3::bool[], $4::timestamptz[]) AS c(user_id, path, subtree, through)
        ), marked AS (
            INSERT INTO badge_clear_mark AS m (user_id, path, subtree, cleared_through, marked_at)
            SELECT user_id, path, subtree, through, now() FROM c
            ON CONFLICT (user_id, path, subtree) DO UPDATE
            SET cleared_through = greatest(m.cleared_through, excluded.cleared_through), marked_at = excluded.marked_at
        )
        UPDATE badge_item i SET removed_at = now()
        FROM c
        WHERE i.user_id = c.user_id AND i.removed_at IS NULL AND i.occurred_at <= c.through
          AND (i.path = c.path OR (c.subtree AND i.path <@ c.path))\(pin.on("i"))
        """
    }

    /// The counters' part of `seen`s: every unexpired counter within each root whose set
    /// occurred up to the seen's time `$3` (or that no timed set left) has seen its whole count.
    static let markCountersSeen = ShardForms("badges.mark_counters_seen") { pin in
        """
        UPDATE badge_state s SET seen_count = s.count
        FROM unnest($1::text[], $2::ltree[], $3::timestamptz[]) AS c(user_id, path, through)
        WHERE s.user_id = c.user_id AND s.path <@ c.path AND s.seen_count IS DISTINCT FROM s.count
          AND (s.expires_at IS NULL OR s.expires_at > now()) AND (s.set_at IS NULL OR s.set_at <= c.through)\(pin.on("s"))
        """
    }

    /// The items' part of `seen`s: the latest time each applies up to. `marked_at` comes from
    /// the inserted row: Citus refuses a function that is not immutable (`now()`) in
    /// `DO UPDATE SET` (docs/SHARDING.md).
    static let markSeen = ShardForms("badges.mark_seen") { pin in
        """
        INSERT INTO badge_seen_mark AS m (user_id, path, seen_through, marked_at)
        SELECT *, now() FROM unnest($1::text[], $2::ltree[], $3::timestamptz[])
        ON CONFLICT (user_id, path) DO UPDATE
        SET seen_through = greatest(m.seen_through, excluded.seen_through), marked_at = excluded.marked_at
        WHERE m.seen_through < excluded.seen_through
        """
    }

    /// Removes items for good: a tombstone row, whether or not the item was there.
    static let removeItems = ShardForms("badges.remove_items") { pin in
        """
        INSERT INTO badge_item AS i (user_id, path, item, occurred_at, removed_at)
        SELECT u, p, it, now(), now() FROM unnest($1::text[], $2::ltree[], $3::text[]) AS r(u, p, it)
        ON CONFLICT (user_id, path, item) DO UPDATE SET removed_at = excluded.removed_at WHERE i.removed_at IS NULL
        """
    }

    /// Stores mutes and unmutes (`$1` users, `$2` paths, `$3` muted, `$4` until, `$5` times):
    /// each node keeps the one that holds, by `BadgeMute.supersedes`'s order (the later time; at
    /// one time an unmute, then the longer mute), stamped with the user's write number
    /// (`markDirty` takes it first): the version that covers it recounts the user's muted nodes.
    static let storeMutes = ShardForms("badges.store_mutes") { pin in
        """
        INSERT INTO badge_mute AS m (user_id, path, muted, until, occurred_at, written_in, stored_at)
        SELECT u, p, muted, until, t, \(writeNumber(of: "u", pin: pin)), now()
        FROM unnest($1::text[], $2::ltree[], $3::bool[], $4::timestamptz[], $5::timestamptz[]) AS r(u, p, muted, until, t)
        ON CONFLICT (user_id, path) DO UPDATE
        SET muted = excluded.muted, until = excluded.until, occurred_at = excluded.occurred_at, woken = false,
            written_in = excluded.written_in, stored_at = excluded.stored_at
        WHERE (excluded.occurred_at, NOT excluded.muted, coalesce(excluded.until, 'infinity'))
            > (m.occurred_at, NOT m.muted, coalesce(m.until, 'infinity'))
        """
    }

    /// Adds items: a live row with the earliest time an add said, unless the item is gone (a
    /// tombstone stays one), and gone at once when a clear mark reaching its node is at or after
    /// that time. With `.fail`, an item its node already has (live or gone) fails the statement
    /// (see ``RowConflicts``).
    static func addItems(_ conflicts: RowConflicts) -> ShardForms {
        switch conflicts {
        case .merge: return addItemsMerging
        case .fail: return addNewItems
        }
    }

    private static let addItemsMerging = addItemsStatement(
        "badges.add_items",
        onConflict: """
            ON CONFLICT (user_id, path, item) DO UPDATE
            SET occurred_at = least(i.occurred_at, excluded.occurred_at), removed_at = excluded.removed_at
            WHERE i.removed_at IS NULL AND (i.occurred_at > excluded.occurred_at OR excluded.removed_at IS NOT NULL)
            """)
    private static let addNewItems = addItemsStatement("badges.add_new_items", onConflict: "")

    private static func addItemsStatement(_ name: String, onConflict: String) -> ShardForms {
        ShardForms(name) { pin in
            """
            INSERT INTO badge_item AS i (user_id, path, item, occurred_at, removed_at, shown_in)
            SELECT a.u, a.p, a.it, a.t,
                CASE WHEN EXISTS (
                    SELECT 1 FROM badge_clear_mark m
                    WHERE m.user_id = a.u AND m.cleared_through >= a.t
                      AND (m.path = a.p OR (m.subtree AND m.path @> a.p))\(pin.on("m"))
                ) THEN now() END,
                \(writeNumber(of: "a.u", pin: pin))
            FROM unnest($1::text[], $2::ltree[], $3::text[], $4::timestamptz[]) AS a(u, p, it, t)
            \(onConflict)
            """
        }
    }

    /// Takes the next number of each user's write sequence (`$1`: sorted, unique: one lock order
    /// for every writer) and holds it until the transaction ends: another writer of the same user
    /// waits for this one, a rollup round never does (it only reads the sequence). Returns each
    /// user's number.
    static let takeWriteNumbers = PGStatement("badges.take_write_numbers", numberWrites)

    /// See `takeWriteNumbers`.
    private static let numberWrites = """
        INSERT INTO user_write AS w (user_id, seq)
        SELECT u, 1 FROM unnest($1::text[]) AS u
        ON CONFLICT (user_id) DO UPDATE SET seq = w.seq + 1
        RETURNING w.user_id, w.seq
        """

    /// `holdWriteSequences` for users of one Citus shard (`$1`, sorted): Citus refuses the row
    /// lock of a lateral subquery, and locks rows only in a statement it can send to one shard.
    /// The same order: `user_id` is bytewise (`COLLATE "C"`), as the sorted ids are.
    static let holdWriteSequencesOfShard = PGStatement(
        "badges.hold_write_sequences_of_shard",
        "SELECT user_id FROM user_write WHERE user_id = ANY($1::text[]) ORDER BY user_id FOR NO KEY UPDATE")

    /// Holds the write sequence of each user of `$1` (sorted, unique: the order every writer
    /// takes them in) without taking a number, until the transaction ends: the fold, which
    /// changes how a user's counters are stored but not what they show, so that no writer of
    /// the same users runs meanwhile, and no rollup round has anything to do afterwards. A user
    /// without a sequence has never been written, so has nothing to fold.
    static let holdWriteSequences = PGStatement(
        "badges.hold_write_sequences",
        """
        SELECT w.user_id
        FROM unnest($1::text[]) WITH ORDINALITY AS u(user_id, n)
        CROSS JOIN LATERAL (SELECT w.user_id FROM user_write w WHERE w.user_id = u.user_id FOR NO KEY UPDATE) AS w
        ORDER BY u.n
        """)

    /// Takes each user's next write number (`takeWriteNumbers`: `$1` sorted and unique) and
    /// leaves a dirty mark with it for the rollup: `bump` `$2[i]` (their version must move even if
    /// no aggregate does) and `recount` `$3[i]` (false: only increments changed, which the
    /// rollup adds as deltas); no mark where `$4[i]` is false (a writer that holds the user's
    /// rollup lock and rolls them up itself in the same transaction). Marks are only ever
    /// inserted by writers, so no writer waits for a rollup round that holds older ones.
    static let markDirty = ShardForms("badges.mark_dirty") { pin in
        """
        WITH numbered AS (
            \(numberWrites)
        )
        INSERT INTO dirty_mark (user_id, seq, bump, recount)
        SELECT n.user_id, n.seq, f.bump, f.recount
        FROM numbered n
        JOIN unnest($1::text[], $2::bool[], $3::bool[], $4::bool[]) AS f(user_id, bump, recount, mark) ON f.user_id = n.user_id
        WHERE f.mark
        """
    }

    /// The dirty marks a writer that meant to roll the users of `$1` (sorted) up itself did not
    /// leave (`markDirty`'s `$4`), at each user's write number, asking for no recount; a mark
    /// the write left after all (a timed state's recount) stays.
    static let markWritten = ShardForms("badges.mark_written") { pin in
        """
        INSERT INTO dirty_mark (user_id, seq, bump, recount)
        SELECT u, \(writeNumber(of: "u", pin: pin)), false, false FROM unnest($1::text[]) AS u
        ON CONFLICT (user_id, seq) DO NOTHING
        """
    }

    /// Stores deltas a writer held for its own round (`HeldDeltas`: user, path, amount, unseen,
    /// write number) in `badge_delta`, for the rollup, when the round did not run.
    static let storeHeldDeltas = PGStatement(
        "badges.store_held_deltas",
        """
        INSERT INTO badge_delta (user_id, path, amount, unseen, seq)
        SELECT * FROM unnest($1::text[], $2::ltree[], $3::bigint[], $4::bigint[], $5::bigint[])
        """)

    /// Records, per user, the dismissal of the active broadcasts each clear reaches
    /// (``markBroadcasts(in:)``). Returns the users with a new dismissal.
    static let dismissBroadcasts = ShardForms("badges.dismiss_broadcasts") { markBroadcasts(in: "broadcast_clear", pin: $0) }

    /// Records, per user, that each seen marks seen the active broadcasts it reaches (a seen
    /// covers its subtree: pass `true` as its force) (``markBroadcasts(in:)``). Returns the users
    /// with a new seen broadcast.
    static let seeBroadcasts = ShardForms("badges.see_broadcasts") { markBroadcasts(in: "broadcast_seen", pin: $0) }

    /// Inserts into `table` (`broadcast_clear`, `broadcast_seen`), per user `$1[i]`, the active
    /// broadcasts an action at `$2[i]` reaches: the path itself, with `$3[i]` (force) its subtree;
    /// stored up to the action's time `$4[i]` (NULL: any); for an action at a rendered version,
    /// first shown in broadcast version `$5[i]` or before (NULL: any; a broadcast from before the
    /// change log has none: version 0). The rule of `BroadcastBadge.isReached`. Returns the users
    /// with a new row.
    private static func markBroadcasts(in table: String, pin: Pin) -> String {
        """
        INSERT INTO \(table) (user_id, broadcast_id, shown_in)
        SELECT DISTINCT c.user_id, b.id, \(writeNumber(of: "c.user_id", pin: pin))
        FROM unnest($1::text[], $2::ltree[], $3::bool[], $4::timestamptz[], $5::bigint[])
            AS c(user_id, path, subtree, acted_at, shown_through)
        JOIN broadcast b ON b.withdrawn_at IS NULL AND (b.path = c.path OR (c.subtree AND b.path <@ c.path))
            AND (c.acted_at IS NULL OR b.created_at <= c.acted_at)
            AND (c.shown_through IS NULL OR coalesce(b.shown_in, 0) <= c.shown_through)
        ORDER BY 1, 2
        ON CONFLICT (user_id, broadcast_id) DO NOTHING
        RETURNING user_id
        """
    }

    /// Bumps the version of the set of active broadcasts, logs what the new version added and
    /// withdrew (the broadcasts whose `shown_in` or `withdrawn_in` it is), and notifies every
    /// query service. Hold `lockBroadcastsExclusive` from before those rows were written.
    static let bumpBroadcastVersion = PGStatement(
        "badges.bump_broadcast_version",
        """
        WITH bumped AS (
            UPDATE broadcast_version SET version = version + 1, changed_at = now() RETURNING version
        ), logged AS (
            INSERT INTO broadcast_change (version, added, withdrawn, changed_at)
            SELECT v.version,
                   coalesce((SELECT jsonb_agg(\(broadcastJSON("b")) ORDER BY b.id) FROM broadcast b
                             WHERE b.shown_in = v.version AND (b.withdrawn_in IS NULL OR b.withdrawn_in > v.version)), '[]'),
                   coalesce((SELECT jsonb_agg(\(broadcastJSON("b")) ORDER BY b.id) FROM broadcast b
                             WHERE b.withdrawn_in = v.version AND b.shown_in < v.version), '[]'),
                   clock_timestamp()
            FROM bumped v
        )
        SELECT version, pg_notify($1, \(ChangeNotification.broadcastPayloadSQL(version: "version"))) FROM bumped
        """)

    /// A broadcast row as the change log keeps it.
    static func broadcastJSON(_ row: String) -> String {
        "jsonb_build_object('id', \(row).id, 'path', \(row).path::text, 'count', \(row).count, 'icon', \(row).icon)"
    }

    /// Taken by every writer of the set of active broadcasts before it writes (so the versions
    /// it stamps are right), and shared by every recompute (`lockBroadcastsShared`): a user's own
    /// versions and the broadcast versions are totally ordered (DESIGN §6a).
    static let lockBroadcastsExclusive = PGStatement(
        "badges.lock_broadcasts_exclusive", "SELECT pg_advisory_xact_lock(1919247461, 0)")

    /// See `lockBroadcastsExclusive`.
    static let lockBroadcastsShared = PGStatement(
        "badges.lock_broadcasts_shared", "SELECT pg_advisory_xact_lock_shared(1919247461, 0)")

    /// `lockBroadcastsShared` without waiting: whether this transaction holds it now.
    static let tryLockBroadcastsShared = PGStatement(
        "badges.try_lock_broadcasts_shared", "SELECT pg_try_advisory_xact_lock_shared(1919247461, 0)")
}

/// The statements of a clear of what the client saw.
extension BadgeSQL {
    /// Whether the user has a change waiting for the rollup (a dirty mark). Ask after taking
    /// the user's write number, so no writer of the user is still in flight.
    /// Whether the user `$1` has applied the action `$2` (an `action_id` of a clear or a seen): in
    /// either dedupe slot of `applied_action_generation`, or in `applied_action` (builds before
    /// migration 30).
    static let actionApplied = PGStatement(
        "badges.action_applied",
        """
        SELECT 1 FROM applied_action_generation WHERE user_id = $1 AND action_id = $2
        UNION ALL
        SELECT 1 FROM applied_action WHERE user_id = $1 AND action_id = $2
        LIMIT 1
        """)

    /// Records that the user `$1` applied the action `$2`, in the current dedupe slot `$3`.
    static let recordAction = PGStatement(
        "badges.record_action",
        "INSERT INTO applied_action_generation (user_id, action_id, slot) VALUES ($1, $2, $3::smallint) ON CONFLICT DO NOTHING")

    /// Whether the user `$1` has writes the rollup has not covered (a mark). Not prepared: a
    /// plan made while the queue was counted empty would scan it whole (see
    /// `claimDirtyUsersInOrder`).
    static let hasPendingWrites = PGStatement(
        "badges.has_pending_writes", "SELECT EXISTS (SELECT 1 FROM dirty_mark WHERE user_id = $1)", prepared: false)

    /// How far the writes of the user `$1`'s own version `$2` reach: its `writes_through` as the
    /// current version or as logged, else that of the latest logged version before it (less:
    /// takes less), else 0 (a version older than the log: nothing is known to show in it).
    static let writesThroughVersion = PGStatement(
        "badges.writes_through_version",
        """
        SELECT coalesce(
            (SELECT coalesce(v.writes_through, v.version) FROM user_version v WHERE v.user_id = $1 AND v.version = $2),
            (SELECT coalesce(c.writes_through, c.version) FROM badge_change c
             WHERE c.user_id = $1 AND c.version <= $2 ORDER BY c.version DESC LIMIT 1),
            0)
        """)

    /// A clear at the version the client rendered (`BadgeTree.clearShown`): of one user's node
    /// `$2` (with `$3`, of its subtree), what could show in the version the client rendered goes
    /// (rows stamped with a write at or below `$4`, that version's `writes_through`) — items for
    /// good, increments, and states (one that keeps later increments carries them); with `$5`
    /// (the version is the user's current one and no change waits for the rollup), every row
    /// counts as shown in it. An expired state goes with its increments; a shown state a timed
    /// set left stays as a carrier of its time, so that what occurred before it and arrives
    /// later stays replaced. Returns the rows hit.
    static let clearShown = PGStatement(
        "badges.clear_shown",
        """
        WITH hit AS (
            SELECT s.user_id, s.path, coalesce(s.expires_at <= now(), false) AS expired, s.set_at IS NOT NULL AS timed,
                   (s.shown_in <= $4 OR $5) AS shown,
                   EXISTS (
                       SELECT 1 FROM badge_increment i
                       WHERE i.user_id = $1 AND i.path = s.path AND NOT (i.shown_in <= $4 OR $5)
                   ) AS keeps
            FROM badge_state s
            WHERE s.user_id = $1 AND (s.path = $2::ltree OR ($3 AND s.path <@ $2::ltree))
        ), wiped AS (
            DELETE FROM badge_increment i USING hit h
            WHERE i.user_id = $1 AND i.path = h.path AND (h.expired OR (i.shown_in <= $4 OR $5))
        ), carried AS (
            UPDATE badge_state s SET count = 0, icon = NULL, seen_count = 0, keeps_dot = false, updated_at = now()
            FROM hit h
            WHERE s.user_id = $1 AND s.path = h.path AND h.shown AND (h.keeps OR h.timed) AND NOT h.expired
        ), gone AS (
            DELETE FROM badge_state s USING hit h
            WHERE s.user_id = $1 AND s.path = h.path AND (h.expired OR (h.shown AND NOT h.keeps AND NOT h.timed))
        ), items AS (
            UPDATE badge_item i SET removed_at = now()
            WHERE i.user_id = $1 AND i.removed_at IS NULL AND (i.path = $2::ltree OR ($3 AND i.path <@ $2::ltree))
              AND (i.shown_in <= $4 OR $5)
            RETURNING 1
        )
        SELECT (SELECT count(*) FROM hit) + (SELECT count(*) FROM items)
        """)

    /// A seen at the version the client rendered (`BadgeTree.markShownSeen`): within one user's
    /// subtree `$2`, what could show in the version the client rendered (`$3` and `$4` as `$4`
    /// and `$5` of `clearShown`) is seen — increments and items marked, unexpired states'
    /// counts. Returns the rows marked.
    static let markShownSeen = PGStatement(
        "badges.mark_shown_seen",
        """
        WITH increments AS (
            UPDATE badge_increment i SET seen = true
            WHERE i.user_id = $1 AND i.path <@ $2::ltree AND NOT i.seen AND (i.shown_in <= $3 OR $4)
            RETURNING 1
        ), items AS (
            UPDATE badge_item i SET seen = true
            WHERE i.user_id = $1 AND i.path <@ $2::ltree AND i.removed_at IS NULL AND NOT i.seen
              AND (i.shown_in <= $3 OR $4)
            RETURNING 1
        ), states AS (
            UPDATE badge_state s SET seen_count = s.count
            WHERE s.user_id = $1 AND s.path <@ $2::ltree AND (s.shown_in <= $3 OR $4)
              AND (s.expires_at IS NULL OR s.expires_at > now()) AND s.seen_count IS DISTINCT FROM s.count
            RETURNING 1
        )
        SELECT (SELECT count(*) FROM increments) + (SELECT count(*) FROM items) + (SELECT count(*) FROM states)
        """)

    /// Users with increments stored before `$1` that their tree already shows: at most `$3`,
    /// found among the first `$2` such increments (a user's increments of one batch lie side by
    /// side, so `$2` is twice `$3`), leaving out the users `$4` (whose old increments
    /// this prune found it cannot fold yet).
    static let foldCandidates = PGStatement("badges.fold_candidates", foldCandidates(in: "badge_increment"))

    /// `foldCandidates` over `part`: `badge_increment` or one of its partitions.
    static func foldCandidates(in part: String) -> String {
        """
        SELECT DISTINCT user_id FROM (
            SELECT i.user_id FROM \(part) i
            WHERE i.arrived_at < $1
              AND i.shown_in <= \(writesThrough(of: "i.user_id"))
              AND NOT (i.user_id = ANY($4::text[]))
            LIMIT $2
        ) AS c
        LIMIT $3
        """
    }

    /// Folds, for the users `$2`, the increments and decrements stored before `$1` that their
    /// tree already shows into their states (`BadgeTree.foldIncrements`), as far as none that
    /// does not occurred before them: each state becomes its counter with them (`badge_fold`:
    /// count, seen part, dot, icon), its set's time kept; a node without a state gets one that
    /// carries them (no dot of its own). Returns the increments folded, on each row with one of
    /// the users of `$2` that folded none (one row with no user when every one folded some): an
    /// old increment stays while a younger-stored one of its node occurred before it (one that
    /// arrived late, or is not shown yet), and its user is a candidate again until then.
    static let foldIncrements = PGStatement("badges.fold_increments", foldIncrementsSQL(pin: .none))

    /// `foldIncrements` for users of one Citus shard (`$2`), every per-user table filtered to
    /// them (`Pin`).
    static let foldIncrementsOfShard = PGStatement("badges.fold_increments_of_shard", foldIncrementsSQL(pin: .users("$2::text[]")))

    private static func foldIncrementsSQL(pin: Pin) -> String {
        """
        WITH u AS MATERIALIZED (
            -- How far each user's tree shows, read once per user (per row, it was read twice
            -- for every increment).
            SELECT x.user_id, \(writesThrough(of: "x.user_id", pin: pin)) AS shown
            FROM (SELECT DISTINCT unnest($2::text[]) AS user_id) AS x
        ), young AS (
            -- One index range per user (`OFFSET 0` keeps the subquery from being flattened
            -- into a join that hashes the whole table once the users' count is known).
            SELECT u.user_id, i.path, min(i.occurred_at) AS first
            FROM u
            CROSS JOIN LATERAL (
                SELECT i.path, i.occurred_at FROM badge_increment i
                WHERE i.user_id = u.user_id AND NOT (i.arrived_at < $1 AND i.shown_in <= u.shown)\(pin.on("i"))
                OFFSET 0
            ) AS i
            GROUP BY u.user_id, i.path
        ), old AS (
            -- Joined with the users rather than filtered with `user_id = ANY($2)`, which costs
            -- the whole array per row when it is not an index condition (the arrival index
            -- matches every row): over a minute per chunk was seen at a million increments.
            -- The age test is kept out of the index conditions (`IS TRUE`): ANDed as a bitmap
            -- with the key, the arrival index read every old row's block range again for each
            -- user, over 40% of the fold (`auto_explain`, BENCHMARKS.md).
            DELETE FROM badge_increment i
            USING u
            WHERE i.user_id = u.user_id AND (i.arrived_at < $1) IS TRUE AND i.shown_in <= u.shown\(pin.on("i"))
              AND NOT EXISTS (SELECT 1 FROM young y WHERE y.user_id = i.user_id AND y.path = i.path AND y.first <= i.occurred_at)
            RETURNING i.user_id, i.path, i.occurred_at, i.amount, i.shown_in, \(isSeen("i", pin: pin)) AS seen
        ), nodes AS (
            -- Each node with its state, carried along instead of joined again: one probe of
            -- the key per node (`LIMIT 1` keeps it one: a join let the planner hash the whole
            -- of `badge_state` for every chunk, a cost that grows with every user's states, not
            -- with the chunk).
            SELECT g.user_id, g.path, g.rows, g.first, g.total, g.unseen, coalesce(s.debited, false) AS debited,
                   s.count AS base, s.seen_count AS base_seen, s.keeps_dot, s.icon
            FROM (
                SELECT o.user_id, o.path, count(*) AS rows, min(o.shown_in) AS first, sum(o.amount) AS total,
                       sum(o.amount) FILTER (WHERE NOT o.seen) AS unseen
                FROM old o
                GROUP BY o.user_id, o.path
            ) AS g
            LEFT JOIN LATERAL (
                SELECT s.debited, s.count, s.seen_count, s.keeps_dot, s.icon
                FROM badge_state s
                WHERE s.user_id = g.user_id AND s.path = g.path\(pin.on("s"))
                LIMIT 1
            ) AS s ON true
        ), folded AS (
            -- A counter without decrements folds as a sum, as `badge_fold` would; a debited one
            -- in one grouped, ordered pass with its state's row (a scan of `old` per node was
            -- quadratic: minutes for 300k increments).
            SELECT n.user_id, n.path, n.rows, n.first, n.icon,
                   ARRAY[coalesce(n.base, 0) + n.total, \(unseenOfState(count: "n.base", seen: "n.base_seen")) + coalesce(n.unseen, 0),
                         coalesce(n.keeps_dot, false)::int, 1]::bigint[] AS f
            FROM nodes n
            WHERE NOT n.debited
            UNION ALL
            SELECT x.user_id, x.path, count(*) FILTER (WHERE NOT x.base), min(x.shown_in), max(x.icon),
                   badge_fold(x.amount, x.unseen, x.keeps ORDER BY x.at)
            FROM (
                SELECT o.user_id, o.path, o.occurred_at AS at, o.amount,
                       \(foldUnseen(amount: "o.amount", seen: "o.seen")) AS unseen, false AS keeps, false AS base,
                       o.shown_in, NULL::text AS icon
                FROM old o JOIN nodes n ON n.user_id = o.user_id AND n.path = o.path AND n.debited
                UNION ALL
                SELECT n.user_id, n.path, '-infinity', n.base, \(unseenOfState(count: "n.base", seen: "n.base_seen")), n.keeps_dot,
                       true, NULL, n.icon
                FROM nodes n WHERE n.debited
            ) AS x
            GROUP BY x.user_id, x.path
        ), stored AS (
            INSERT INTO badge_state AS s (user_id, path, count, icon, expires_at, seen_count, keeps_dot, shown_in)
            SELECT user_id, path, least(f[1], \(maxCount))::bigint, CASE WHEN f[4] = 1 THEN icon END, NULL,
                   least(f[1] - f[2], \(maxCount))::bigint, f[3] = 1, first
            FROM folded
            ORDER BY 1, 2
            ON CONFLICT (user_id, path) DO UPDATE
            SET count = excluded.count, icon = excluded.icon, seen_count = excluded.seen_count, keeps_dot = excluded.keeps_dot
        )
        SELECT t.total, x.user_id
        FROM (SELECT coalesce(sum(rows), 0)::bigint AS total FROM nodes) AS t
        LEFT JOIN (SELECT u.user_id FROM u WHERE NOT EXISTS (SELECT 1 FROM nodes n WHERE n.user_id = u.user_id)) AS x ON true
        """
    }

    /// A user's own version and the broadcasts'.
    static let versions = PGStatement(
        "badges.versions",
        """
        SELECT coalesce((SELECT version FROM user_version WHERE user_id = $1), 0),
               coalesce((SELECT version FROM broadcast_version), 0)
        """)

    /// A user's visible version: their own plus the broadcasts'.
    static let visibleVersion = PGStatement(
        "badges.visible_version",
        """
        SELECT coalesce((SELECT version FROM user_version WHERE user_id = $1), 0)
             + coalesce((SELECT version FROM broadcast_version), 0)
        """)
}
