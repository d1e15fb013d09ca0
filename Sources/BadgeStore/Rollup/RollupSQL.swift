import LibPQ

/// The rollup's statements: per-user locks, dirty-queue claims, expiry and the recompute.
extension BadgeSQL {
    /// Per-user transaction locks, always taken in ascending key order.
    static let lockUsers = PGStatement(
        "badges.lock_users",
        """
        SELECT pg_advisory_xact_lock(1919247460, k)
        FROM (SELECT DISTINCT hashtext(u) AS k FROM unnest($1::text[]) AS u ORDER BY 1) AS keys
        """)

    /// The users of `$1` whose rollup locks (`lockUsers`'s) this transaction could take without
    /// waiting, held until it ends.
    static let tryLockUsers = PGStatement(
        "badges.try_lock_users",
        "SELECT u FROM unnest($1::text[]) AS u WHERE pg_try_advisory_xact_lock(1919247460, hashtext(u))")

    /// Per user of `$1` with dirty marks, and each user of `$2` (written additively by this
    /// transaction, which left no mark: `markDirty`'s `$4`): whether a mark asks for a new
    /// version (`bump`) and whether one asks for a recount. Read under the users' rollup locks (`lockUsers`), which
    /// keep other rounds out; writers only add marks. Planned for each round (not prepared).
    ///
    /// The queue and the deltas are reached one user at a time (`LATERAL`, scalar subqueries,
    /// which PostgreSQL never turns into a hash of the whole table). As `user_id = ANY($1)`, a
    /// round's plan rested on the queue's statistics: analyzed by autovacuum while ingest filled
    /// the queue, they said 500 users have 200,000 marks, and every round scanned the whole queue
    /// and hashed every delta with two parallel workers (35–45 ms a round, a fifth of the
    /// rollup's database time in `bench backlog`; 1.5 ms on fresh statistics).
    ///
    /// With aggregation modes declared (`aggregation_mode` has rows; the fourth column says so), a
    /// user with a delta under a node that has a mode other than sum is recounted too: adding an
    /// increment to every ancestor is the sum rule. Without modes, that check is not made. So is
    /// a user with a delta under a node they muted (`deltaUnderMute`): its ancestors get nothing.
    /// The fifth column says whether the queue's tables are partitioned (the round's deletes
    /// then filter by user, `consumeMarks`), or may be distributed: with the Citus extension
    /// installed, a tuple id names a row only within its shard, and a delete "by these tuple
    /// ids" sent to every shard would take other users' rows (docs/SHARDING.md, rule 5). There
    /// the round takes the forms that name their users, as on partitions. (Citus refuses the
    /// claim itself still: docs/SHARDING.md, "What Citus refuses".) `$3` and `$4` are the users and paths of the
    /// deltas the writer holds for this round (`HeldDeltas`), checked by the same two rules.
    ///
    /// `ofShard` is the form for the users of one Citus shard (`Pin`; docs/SHARDING.md, rule 10).
    static let claimDirtyUsers = ShardForms("badges.claim_dirty_users", prepared: false) { pin in
        """
        WITH modes AS MATERIALIZED (
            SELECT array_agg(below) AS below, count(*) > 0 AS declared FROM aggregation_mode WHERE mode <> 'sum'
        ), held_recount AS MATERIALIZED (
            SELECT DISTINCT h.user_id FROM unnest($3::text[], $4::ltree[]) AS h(user_id, path)
            WHERE ((SELECT declared FROM modes) AND h.path ? (SELECT below FROM modes))
               OR EXISTS (SELECT 1 FROM badge_mute mu WHERE mu.user_id = h.user_id AND h.path <@ mu.path AND \(isMutedNow("mu"))\(pin.on("mu")))
        )
        SELECT u.user_id, coalesce(m.bump, false),
               coalesce(m.recount, false) OR CASE WHEN (SELECT declared FROM modes) THEN coalesce((
                   SELECT true FROM badge_delta d WHERE d.user_id = u.user_id AND d.path ? (SELECT below FROM modes)\(pin.on("d")) LIMIT 1), false)
                   OR coalesce((
                   SELECT true FROM dirty_mark x WHERE x.user_id = u.user_id AND x.delta_paths ? (SELECT below FROM modes)\(pin.on("x")) LIMIT 1), false)
                   ELSE false END
               OR coalesce((SELECT true FROM (\(deltaUnderMute(user: "u.user_id", after: nil, pin: pin))) AS x LIMIT 1), false)
               OR u.user_id IN (SELECT user_id FROM held_recount),
               (SELECT declared FROM modes),
               coalesce((SELECT bool_or(c.relkind = 'p') FROM pg_class c WHERE c.oid IN (to_regclass('dirty_mark'), to_regclass('badge_delta'))), true)
                   OR EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')
        FROM (SELECT DISTINCT unnest($1::text[]) AS user_id) AS u
        CROSS JOIN LATERAL (
            -- Only the marks that ask for something (`dirty_mark_recount`, migration 33): the
            -- others have neither flag, and nearly every mark only adds.
            SELECT bool_or(x.bump) AS bump, bool_or(x.recount AND NOT x.additive) AS recount FROM dirty_mark x
            WHERE x.user_id = u.user_id AND ((x.recount AND NOT x.additive) OR x.bump)\(pin.on("x"))
        ) AS m
        -- A scalar subquery, not `EXISTS`: under `OR`, PostgreSQL may hash all of the queue for that.
        WHERE coalesce((SELECT true FROM dirty_mark x WHERE x.user_id = u.user_id\(pin.on("x")) LIMIT 1), false) OR u.user_id = ANY($2::text[])
        """
    }

    /// Up to `$1` users with dirty marks, in user order after `$2` (and at most `$3`, when it is
    /// not NULL), with each one's oldest mark's time: each one whose oldest mark is at least `$4`
    /// seconds old (0: any) and whose rollup lock (`lockUsers`'s) this transaction could take
    /// without waiting, held until it ends (a younger user's lock is not tried). A user another round
    /// holds is passed by, not waited for, so rounds of several workers never queue behind each
    /// other.
    ///
    /// The users are found one index step each (the primary key's first mark of the next user
    /// after the last: its user and its time), however many marks each has: a round of 500
    /// users costs the same whether they wrote once or fifty times since their last round.
    /// (Taking the users of the oldest marks instead gave a round of 40 users when each had 50
    /// marks waiting.)
    ///
    /// Planned at each run, not prepared: the queue empties and fills again, and a vacuum that
    /// counted it nearly empty leaves statistics by which each step is a scan of the whole queue,
    /// which costs nothing on an empty table. A prepared statement kept that plan (PostgreSQL's
    /// generic plan) while the next backlog filled the queue: a claim took 137 ms instead of 3,
    /// and the pipeline of `bench backlog` three times as long. Each plan now weighs the queue's
    /// pages as they are (about 0.2 ms of planning a claim).
    static let claimDirtyUsersInOrder = PGStatement(
        "badges.claim_dirty_users_in_order", claimDirtyUsersInOrder(from: "dirty_mark"), prepared: false)

    /// What the claim's transaction sets before it, for the transaction (`set_config(…, true)`,
    /// as `SET LOCAL`): no sort and no JIT; it returns the values before, which
    /// `restorePlanSettings` puts back for the rest of the round. Each step of the sweep has one
    /// good plan, the primary key's ordered scan stopped at its first row, and a sort means a
    /// worse one. The statistics of a queue that a vacuum found empty but could not shorten (its
    /// own, with `TRUNCATE false`, or autovacuum's, when a writer held the table) say 0 rows on
    /// all of its pages; planned by them, each step read every mark after its user into a bitmap
    /// and sorted them for the first: 90 ms a step, 42 s a claim of 500 users at 300,000 marks,
    /// until the next analyze (up to autovacuum's minute). Without a sort, the ordered scan is
    /// the only plan left. Its estimated cost by those statistics is then over `jit_above_cost`,
    /// and compiling the statement took 10–40 ms of a 5 ms claim: JIT is off for it, as for every
    /// connection of the rollup (`recommendedSessionSettings`), which is why the old values are
    /// put back rather than the defaults: `SET LOCAL jit TO DEFAULT` turned the rounds' JIT back
    /// on, and the rollup of a backlog took three times as long (BENCHMARKS.md, "A claim planned
    /// by the statistics of an emptied queue"). The old values are read in a subquery, before
    /// the settings change.
    static let claimPlanSettings = PGStatement(
        "badges.claim_plan_settings",
        """
        SELECT s.sort, s.jit, set_config('enable_sort', 'off', true), set_config('jit', 'off', true)
        FROM (SELECT current_setting('enable_sort') AS sort, current_setting('jit') AS jit OFFSET 0) AS s
        """)

    /// Puts back the values `claimPlanSettings` returned (`$1`: `enable_sort`, `$2`: `jit`) for
    /// the rest of the transaction.
    static let restorePlanSettings = PGStatement(
        "badges.restore_plan_settings", "SELECT set_config('enable_sort', $1, true), set_config('jit', $2, true)")

    /// `claimDirtyUsersInOrder` where Citus distributes the queue, in two statements: Citus
    /// refuses the sweep's recursive CTE over many shards, and would take its locks on the
    /// workers. First the candidates, up to `$1` users after `$2` (and at most `$3`) in user
    /// order with their oldest mark's time, a grouped query Citus sends to every shard; then
    /// `tryLockCandidates`.
    static let dirtyCandidates = PGStatement(
        "badges.dirty_candidates",
        """
        SELECT user_id, min(dirtied_at) FROM dirty_mark
        WHERE user_id > $2 AND ($3::text IS NULL OR user_id <= $3)
        GROUP BY user_id ORDER BY user_id LIMIT $1
        """, prepared: false)

    /// Of the candidates (`$1` users in user order, `$2` their oldest marks' times), up to `$4`
    /// whose oldest mark is at least `$3` seconds old and whose rollup lock (`lockUsers`'s) this
    /// transaction takes without waiting, in order: on the coordinator (the statement names no
    /// table), where every session takes them. `unnest` gives the rows in order, and `LIMIT`
    /// stops the locks at the last one taken.
    static let tryLockCandidates = PGStatement(
        "badges.try_lock_candidates",
        """
        SELECT x.user_id, x.dirtied_at FROM unnest($1::text[], $2::timestamptz[]) AS x(user_id, dirtied_at)
        WHERE CASE WHEN x.dirtied_at > now() - make_interval(secs => $3) THEN false
                   ELSE pg_try_advisory_xact_lock(1919247460, hashtext(x.user_id)) END
        LIMIT $4
        """)

    /// The SQL of `claimDirtyUsersInOrder` over one part of the queue (`TableParts`):
    /// `dirty_mark` itself, or one of its partitions (catalog text, never input).
    static func claimDirtyUsersInOrder(from part: String) -> String {
        """
        WITH RECURSIVE sweep(user_id, dirtied_at) AS (
            (SELECT m.user_id, m.dirtied_at FROM \(part) m WHERE m.user_id > $2 AND ($3::text IS NULL OR m.user_id <= $3)
             ORDER BY m.user_id, m.seq LIMIT 1)
            UNION ALL
            SELECT n.user_id, n.dirtied_at
            FROM sweep s CROSS JOIN LATERAL (
                SELECT m.user_id, m.dirtied_at FROM \(part) m WHERE m.user_id > s.user_id AND ($3::text IS NULL OR m.user_id <= $3)
                ORDER BY m.user_id, m.seq LIMIT 1
            ) AS n
        )
        SELECT user_id, dirtied_at FROM sweep
        WHERE CASE WHEN dirtied_at > now() - make_interval(secs => $4) THEN false
                   ELSE pg_try_advisory_xact_lock(1919247460, hashtext(user_id)) END
        LIMIT $1
        """
    }

    /// The records that waited in Kafka after ingest's last batches (`consumer_offset.waiting`),
    /// summed over the partitions whose offsets moved in the last `$1` seconds; no row when none
    /// says (`least` would turn the sum of no rows into its cap).
    static let ingestWaiting = PGStatement(
        "badges.ingest_waiting",
        """
        SELECT least(sum(waiting), 9223372036854775807)::bigint FROM consumer_offset
        WHERE waiting IS NOT NULL AND updated_at > now() - make_interval(secs => $1)
        HAVING count(*) > 0
        """)

    /// The number of users waiting for a rollup. As a count of the distinct users of a
    /// subquery, which the planner hashes (or reads in the primary key's order where the queue's
    /// pages are all visible), not `count(DISTINCT user_id)`, which sorts every mark: 263 against
    /// 377 ms at a million marks of 100,000 users (BENCHMARKS.md). Planned at each run: the
    /// queue's size and visibility change between counts.
    static let queueDepth = PGStatement(
        "badges.queue_depth", "SELECT count(*) FROM (SELECT DISTINCT user_id FROM dirty_mark) AS u", prepared: false)

    /// The first dirty mark's user (no row: the queue is empty): an idle rollup worker's look,
    /// one statement instead of a round's transaction (a round claims only users with marks,
    /// so with none it has nothing to do). In the primary key's order, so it reads the index
    /// whatever the statistics say: as `EXISTS (SELECT 1 FROM dirty_mark)`, the planner scanned
    /// the table, 55 ms a look over the dead rows a drained backlog of a million marks left,
    /// against 10 ms by the index (0.05 ms once vacuumed, BENCHMARKS.md).
    static let queueHasMarks = PGStatement("badges.queue_has_marks", "SELECT user_id FROM dirty_mark ORDER BY user_id LIMIT 1")

    /// The users of up to `$1` expired own-state rows, to be marked dirty (taking their marks)
    /// before `expireBadges` deletes the rows: the same lock order as ingest's.
    static let expiredUsers = PGStatement("badges.expired_users", expiredUsers(in: "badge_state"))

    /// `expiredUsers` over `part`: `badge_state` or one of its partitions.
    static func expiredUsers(in part: String) -> String {
        """
        SELECT DISTINCT user_id FROM (
            SELECT user_id FROM \(part) WHERE expires_at <= now() ORDER BY expires_at LIMIT $1
        ) AS e
        """
    }

    /// Deletes up to `$1` expired own-state rows of the users `$2` with their increments (rows
    /// another transaction holds are left for next time) and returns their users.
    /// `ofShard` is the form for users of one Citus shard (`$2`; docs/SHARDING.md, rule 10).
    static let expireBadges = ShardForms("badges.expire_badges", users: "$2::text[]") { pin in
        """
        WITH expired AS (
            DELETE FROM badge_state s
            USING (
                SELECT user_id, path FROM badge_state
                WHERE expires_at <= now() AND user_id = ANY($2::text[])
                ORDER BY expires_at
                LIMIT $1
                FOR UPDATE SKIP LOCKED
            ) AS e
            WHERE s.user_id = e.user_id AND s.path = e.path\(pin.on("s"))
            RETURNING s.user_id, s.path
        ), wiped AS (
            DELETE FROM badge_increment i USING expired x WHERE i.user_id = x.user_id AND i.path = x.path\(pin.on("i"))
        )
        SELECT DISTINCT user_id FROM expired
        """
    }

    /// The users of up to `$1` snoozes whose end has passed and that have not woken (the index
    /// `badge_mute_wake`), to be marked dirty before `wakeSnoozes` records them woken.
    static let endedSnoozeUsers = PGStatement("badges.ended_snooze_users", endedSnoozeUsers(in: "badge_mute"))

    /// `endedSnoozeUsers` over `part`: `badge_mute` or one of its partitions.
    static func endedSnoozeUsers(in part: String) -> String {
        """
        SELECT DISTINCT user_id FROM (
            SELECT user_id FROM \(part) WHERE muted AND NOT woken AND until IS NOT NULL AND until <= now() ORDER BY until LIMIT $1
        ) AS e
        """
    }

    /// Records up to `$1` ended snoozes of the users `$2` as woken, stamped with the write number
    /// `markDirty` took, so the version that covers it logs the muted nodes (rows another
    /// transaction holds are left for next time).
    /// `ofShard` is the form for users of one Citus shard (`$2`; docs/SHARDING.md, rule 10).
    static let wakeSnoozes = ShardForms("badges.wake_snoozes", users: "$2::text[]") { pin in
        """
        UPDATE badge_mute m SET woken = true, written_in = \(writeNumber(of: "m.user_id", pin: pin))
        FROM (
            SELECT user_id, path FROM badge_mute
            WHERE muted AND NOT woken AND until IS NOT NULL AND until <= now() AND user_id = ANY($2::text[])
            ORDER BY until LIMIT $1
            FOR UPDATE SKIP LOCKED
        ) AS e
        WHERE m.user_id = e.user_id AND m.path = e.path\(pin.on("m"))
        """
    }

    /// Whether an active broadcast's expiry has passed (an index scan of `broadcast_expiry`).
    static let anyBroadcastExpired = PGStatement(
        "badges.any_broadcast_expired",
        "SELECT EXISTS (SELECT 1 FROM broadcast WHERE withdrawn_at IS NULL AND expires_at <= now())")

    /// Withdraws the broadcasts whose expiry has passed, as of their expiry.
    static let expireBroadcasts = PGStatement(
        "badges.expire_broadcasts",
        """
        UPDATE broadcast SET withdrawn_at = expires_at, withdrawn_in = (SELECT version FROM broadcast_version) + 1
        WHERE withdrawn_at IS NULL AND expires_at <= now()
        """)

    /// The own count, icon and unseen part of each node of the users in the CTE `users`: the
    /// unexpired counter state with its increments (shown when it keeps a dot or adds up to more
    /// than 0; a debited one's is the fold of its rows in time order, `badge_fold`, which gives
    /// the plain sum where no decrement is), or the increments of a node without a state, plus
    /// the live items (a node with only increments or items has no icon); an increment, a
    /// decrement or an item is unseen while no seen at a version marked it and no seen mark of
    /// its node or of an ancestor reaches its time.
    static let ownRows = ownRows(pin: .none)

    /// `ownRows` with `pin` on each per-user table (`Pin`).
    static func ownRows(pin: Pin) -> String {
        """
        SELECT user_id, path, least(sum(count), \(maxCount))::bigint AS count, max(icon) AS icon,
                       least(sum(unseen), \(maxCount))::bigint AS unseen
                FROM (
                    SELECT s.user_id, s.path,
                           CASE WHEN s.debited THEN d.f[1] ELSE s.count + coalesce(c.total, 0) END AS count,
                           CASE WHEN NOT s.debited OR d.f[4] = 1 THEN s.icon END AS icon,
                           CASE WHEN s.debited THEN d.f[2]
                               ELSE \(unseenOfState(count: "s.count", seen: "s.seen_count")) + coalesce(c.unseen, 0) END AS unseen
                    FROM badge_state s JOIN users u ON s.user_id = u.user_id
                    LEFT JOIN LATERAL (
                        SELECT sum(i.amount) AS total,
                               sum(i.amount) FILTER (WHERE NOT \(isSeen("i", pin: pin))) AS unseen
                        FROM badge_increment i WHERE i.user_id = s.user_id AND i.path = s.path\(pin.on("i"))
                    ) c ON true
                    LEFT JOIN LATERAL (
                        \(foldedCounter("s", pin: pin))
                    ) d ON true
                    WHERE (s.expires_at IS NULL OR s.expires_at > now())\(pin.on("s"))
                      AND CASE WHEN s.debited THEN d.f[3] = 1 OR d.f[1] > 0 ELSE s.keeps_dot OR s.count > 0 OR c.total > 0 END
                    UNION ALL
                    SELECT i.user_id, i.path, sum(i.amount), NULL,
                           coalesce(sum(i.amount) FILTER (WHERE NOT \(isSeen("i", pin: pin))), 0)
                    FROM badge_increment i JOIN users u ON i.user_id = u.user_id
                    WHERE NOT EXISTS (SELECT 1 FROM badge_state s WHERE s.user_id = i.user_id AND s.path = i.path\(pin.on("s")))\(pin.on("i"))
                    GROUP BY i.user_id, i.path
                    UNION ALL
                    SELECT i.user_id, i.path, count(*), NULL,
                           count(*) FILTER (WHERE NOT \(isSeen("i", pin: pin)))
                    FROM badge_item i JOIN users u ON i.user_id = u.user_id
                    WHERE i.removed_at IS NULL\(pin.on("i"))
                    GROUP BY i.user_id, i.path
                ) AS own_parts
                GROUP BY user_id, path
        """
    }

    /// The fold of the debited state `state` (an alias) with its increments and decrements in
    /// time order, as `f` ({count, unseen, dot, icon}, see migration 0013 and
    /// `BadgeState.folded`); no row for a state that is not debited.
    static func foldedCounter(_ state: String, pin: Pin = .none) -> String {
        """
        SELECT badge_fold(x.amount, x.unseen, x.keeps ORDER BY x.at) AS f
                        FROM (
                            SELECT '-infinity'::timestamptz AS at, \(state).count AS amount,
                                   \(unseenOfState(count: "\(state).count", seen: "\(state).seen_count")) AS unseen,
                                   \(state).keeps_dot AS keeps
                            UNION ALL
                            SELECT i.occurred_at, i.amount,
                                   \(foldUnseen(amount: "i.amount", seen: isSeen("i", pin: pin))), false
                            FROM badge_increment i WHERE i.user_id = \(state).user_id AND i.path = \(state).path\(pin.on("i"))
                        ) AS x
                        WHERE \(state).debited
                        HAVING \(state).debited
        """
    }

    /// Recomputes every aggregate of the listed users from unexpired own state (and consumes their
    /// deltas, which the recount includes), writes only the rows that changed, and versions and
    /// logs the change (`versionAndLog`; users in `$3`, or with a mark that asks for it, get a
    /// version even without a change). The recount sees every write the user's sequence has
    /// numbered so far (`reach.top`; a writer holds its number until it commits, so all of
    /// them are visible to this statement), and the new version covers them. Planned for each
    /// round, as `addDeltas` is (not prepared): a generic plan takes a round for 10 users and
    /// joins its hundreds of rows with nested loops.
    /// With `moded`, the aggregation modes of `aggregation_mode` (`modedFresh`); see
    /// `RoundForm` for `partitioned` and `broadcasts`.
    ///
    /// With `shard` (the users of `$1` share a Citus shard), every per-user table is filtered to
    /// them (`Pin`; docs/SHARDING.md, rule 10), and the statement returns the new versions
    /// without notifying: Citus sends the whole statement to the shard's worker, where a
    /// `NOTIFY` reaches no server (`notifyVersions` notifies on the coordinator).
    private static func recompute(moded: Bool, partitioned: Bool, broadcasts: Bool, shard: Bool = false) -> PGStatement {
        let pin: Pin = shard ? .users("$1::text[]") : .none
        return PGStatement(
        (moded ? "badges.recompute_moded" : "badges.recompute") + (partitioned ? "_partitioned" : "") + (broadcasts ? "" : "_no_broadcasts")
            + (shard ? "_of_shard" : ""),
        """
        WITH users AS (
            SELECT DISTINCT unnest($1::text[]) AS user_id
        ), reach AS (
            SELECT u.user_id, \(writtenThrough("u.user_id", pin: pin)) AS top, \(writesThrough(of: "u.user_id", pin: pin)) AS covered,
                   u.user_id = ANY($3::text[]) OR EXISTS (SELECT 1 FROM dirty_mark m WHERE m.user_id = u.user_id AND m.bump\(pin.on("m"))) AS bump
            FROM users u
        )\(consumeMarks(partitioned: partitioned, pin: pin)), consumed AS (\(pin.isNone ? """

            DELETE FROM badge_delta d
            WHERE d.ctid = ANY(ARRAY(
                SELECT x.ctid FROM users u CROSS JOIN LATERAL (SELECT ctid FROM badge_delta x WHERE x.user_id = u.user_id OFFSET 0) AS x))\(
                partitioned ? "\n              AND d.user_id = ANY($1::text[])" : "")
            """ : "\n    DELETE FROM badge_delta d WHERE true\(pin.on("d"))")
        ), own AS (
            \(ownRows(pin: pin))
        )\(moded ? modedFresh(pin: pin) : plainFresh(pin: pin)), diff AS (
            SELECT coalesce(f.user_id, a.user_id) AS user_id, coalesce(f.path, a.path) AS path,
                   a.count AS old_count, a.icon AS old_icon, a.unseen AS old_unseen,
                   f.count, f.icon, f.unseen, f.user_id IS NOT NULL AS kept, a.at
            FROM fresh f
            -- The users' stored aggregates, reached one user at a time: joined as a set, the
            -- planner merged the round's users with the whole primary key (170 ms a round at
            -- 470k aggregates).
            FULL JOIN (
                SELECT a.* FROM users u
                CROSS JOIN LATERAL (SELECT x.*, x.ctid AS at FROM badge_aggregate x WHERE x.user_id = u.user_id\(pin.on("x")) OFFSET 0) AS a
            ) a
                ON a.user_id = f.user_id AND a.path = f.path
            WHERE (a.count, a.icon, a.unseen) IS DISTINCT FROM (f.count, f.icon, f.unseen)
        ), roots AS MATERIALIZED (
            \(rootTotals(from: "fresh"))
        )\(versionAndLog(partitioned: partitioned, broadcasts: broadcasts, pin: pin))
        """, prepared: false)
    }

    /// The CTE `muted` after `users`: per user with a node muted now (DESIGN §2, Mute and snooze),
    /// those nodes, deepest first, so that `paths ?@> path` is the deepest muted node at or above
    /// `path`. An own row reaches no node above it (`reachedLevels`).
    static func mutedNodes(pin: Pin) -> String {
        """
        , muted AS (
            SELECT u.user_id, array_agg(m.path ORDER BY nlevel(m.path) DESC) AS paths
            FROM users u JOIN badge_mute m ON m.user_id = u.user_id
            WHERE \(isMutedNow("m"))\(pin.on("m"))
            GROUP BY u.user_id
        )
        """
    }

    /// The rows of `source` (an alias, with `user_id` and `path`) each with the levels it reaches
    /// (`level`, from the deepest node muted at or above it, else 1 for `root`, down to its
    /// own), for a `FROM`: the model is `AggregationModes.aggregate(own:muted:)`, where a muted
    /// node is no child of its parent. A hash join with `muted`, not a lookup per row.
    static func reachedLevels(_ table: String, _ source: String, level: String) -> String {
        """
        \(table) \(source) LEFT JOIN muted mu ON mu.user_id = \(source).user_id
                CROSS JOIN LATERAL generate_series(coalesce(nlevel(mu.paths ?@> \(source).path), 1), nlevel(\(source).path)) AS \(level)
        """
    }

    /// The CTE `fresh` after `own` (each node's own count, icon and unseen): every node at or
    /// above an own row, up to the deepest muted node on its way (`mutedNodes`), with the sum of
    /// the own rows within it, and its own icon.
    static func plainFresh(pin: Pin) -> String {
        """
        \(mutedNodes(pin: pin)), fresh AS (
            SELECT e.user_id, e.path, least(sum(e.count), \(maxCount))::bigint AS count, max(o.icon) AS icon,
                   least(sum(e.unseen), \(maxCount))::bigint AS unseen
            FROM (
                SELECT o.user_id, subpath(o.path, 0, level) AS path, o.count, o.unseen
                FROM \(reachedLevels("own", "o", level: "level"))
            ) e
            LEFT JOIN own o ON o.user_id = e.user_id AND o.path = e.path
            GROUP BY e.user_id, e.path
        )
        """
    }

    /// `plainFresh` under the aggregation modes of `aggregation_mode` (DESIGN §2; the model is
    /// `AggregationModes.aggregate(own:)`). Each own row reaches its node and every ancestor, as
    /// in `plainFresh`, but as 0 (count and unseen; the node still shows) at and above the deepest
    /// node on its path that takes its number: a `dot` or `children` node, or the parent of an
    /// `exclude` node (`zero_through`, a level). A `children` node gets one more row of its own:
    /// the number of its shown children that are not `exclude`, and of those with something
    /// unseen (an own row below with unseen, not hidden on the way: no `dot` at or below the
    /// child, no `exclude` below it, not the own count of a `children` node), which reaches its
    /// ancestors by the same rule. Rows reach up to the deepest muted node on their way only, as
    /// in `plainFresh`.
    static func modedFresh(pin: Pin) -> String {
        """
        \(mutedNodes(pin: pin)), levels AS (
            SELECT o.user_id, o.path AS source, o.count, o.unseen, k AS level, subpath(o.path, 0, k) AS node
            FROM \(reachedLevels("own", "o", level: "k"))
        ), node_modes AS (
            SELECT n.user_id, n.node, m.mode
            FROM (SELECT DISTINCT user_id, node FROM levels) AS n
            CROSS JOIN LATERAL (
                SELECT a.mode FROM aggregation_mode a WHERE n.node ~ a.query ORDER BY a.position LIMIT 1
            ) AS m
            WHERE m.mode <> 'sum'
        ), marked AS (
            -- zero_above: how far up the modes of the node's ancestors take a number from it.
            SELECT l.*, m.mode,
                   max(CASE m.mode WHEN 'exclude' THEN l.level - 1 WHEN 'dot' THEN l.level WHEN 'children' THEN l.level END)
                       OVER (PARTITION BY l.user_id, l.source ORDER BY l.level ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
                       AS zero_above
            FROM levels l LEFT JOIN node_modes m ON m.user_id = l.user_id AND m.node = l.node
        ), row_modes AS (
            SELECT user_id, source,
                   coalesce(max(CASE mode WHEN 'exclude' THEN level - 1 WHEN 'dot' THEN level WHEN 'children' THEN level END), 0)
                       AS zero_through,
                   coalesce(max(CASE WHEN mode = 'exclude' THEN level - 1 WHEN mode = 'dot' THEN level
                                     WHEN mode = 'children' AND level = nlevel(source) THEN level END), 0) AS unseen_hidden_through
            FROM marked GROUP BY user_id, source
        ), children_of AS (
            SELECT x.user_id, x.node AS path, c.node AS child, max(x.zero_above) AS zero_above,
                   bool_or(c.unseen > 0 AND r.unseen_hidden_through < c.level) AS has_unseen
            FROM marked x
            JOIN marked c ON c.user_id = x.user_id AND c.source = x.source AND c.level = x.level + 1
            JOIN row_modes r ON r.user_id = c.user_id AND r.source = c.source
            WHERE x.mode = 'children' AND c.mode IS DISTINCT FROM 'exclude'
            GROUP BY 1, 2, 3
        ), synthetic AS (
            SELECT s.user_id, s.path, count(*) AS count, count(*) FILTER (WHERE s.has_unseen) AS unseen,
                   coalesce(max(s.zero_above), 0) AS zero_through
            FROM children_of s GROUP BY s.user_id, s.path
        ), contributions AS (
            SELECT l.user_id, l.node AS path,
                   CASE WHEN l.level <= r.zero_through THEN 0 ELSE l.count END AS count,
                   CASE WHEN l.level <= r.zero_through THEN 0 ELSE l.unseen END AS unseen
            FROM levels l JOIN row_modes r ON r.user_id = l.user_id AND r.source = l.source
            UNION ALL
            SELECT s.user_id, subpath(s.path, 0, k),
                   CASE WHEN k <= s.zero_through THEN 0 ELSE s.count END,
                   CASE WHEN k <= s.zero_through THEN 0 ELSE s.unseen END
            FROM \(reachedLevels("synthetic", "s", level: "k"))
        ), fresh AS (
            SELECT c.user_id, c.path, least(sum(c.count), \(maxCount))::bigint AS count, max(o.icon) AS icon,
                   least(sum(c.unseen), \(maxCount))::bigint AS unseen
            FROM contributions c
            LEFT JOIN own o ON o.user_id = c.user_id AND o.path = c.path
            GROUP BY c.user_id, c.path
        )
        """
    }

    /// The deltas (`seq`) of `user` after write `after` (nil: any) under a node the user has
    /// muted now: such a delta gives the ancestors nothing, so the user is recounted. Starts
    /// from the user's mutes, so a user without one costs one index probe.
    static func deltaUnderMute(user: String, after: String?, pin: Pin = .none) -> String {
        """
        SELECT d.seq FROM badge_mute mu JOIN badge_delta d ON d.user_id = mu.user_id AND d.path <@ mu.path
        WHERE mu.user_id = \(user) AND \(isMutedNow("mu"))\(after.map { " AND d.seq > \($0)" } ?? "")\(pin.on("mu"))\(pin.on("d"))
        UNION ALL
        SELECT x.seq FROM badge_mute mu JOIN dirty_mark x ON x.user_id = mu.user_id AND x.delta_paths <@ mu.path
        WHERE mu.user_id = \(user) AND \(isMutedNow("mu"))\(after.map { " AND x.seq > \($0)" } ?? "")\(pin.on("mu"))\(pin.on("x"))
        """
    }

    /// `expression`, or `otherwise` where no user has a row in `badge_mute` (one look a
    /// statement, as an InitPlan, on its snapshot: a user without a mute row has no muted node).
    /// Two probes of `badge_mute` per user were 1–5% of an additive round where nobody mutes
    /// (BENCHMARKS.md). On tables partitioned by user (`partitioned`), a look that names no
    /// user reaches every partition (docs/SHARDING.md, rule 2), so there it is `expression`.
    private static func unlessNobodyMutes(partitioned: Bool, _ expression: String, else otherwise: String) -> String {
        partitioned ? expression : "CASE WHEN (SELECT EXISTS (SELECT 1 FROM badge_mute)) THEN \(expression) ELSE \(otherwise) END"
    }

    /// The last write before the user's first delta under a node with a mode other than sum
    /// (`addDeltas`' added bound on `top` with `moded`).
    private static func modedDeltaStop(pin: Pin) -> String {
        """
        , coalesce((
            SELECT min(d.seq) - 1 FROM badge_delta d
            WHERE d.user_id = k.user_id AND d.seq > k.covered\(pin.on("d"))
              AND d.path ? (SELECT array_agg(a.below) FROM aggregation_mode a WHERE a.mode <> 'sum')), k.written)
        , coalesce((
            SELECT min(x.seq) - 1 FROM dirty_mark x
            WHERE x.user_id = k.user_id AND x.seq > k.covered\(pin.on("x"))
              AND x.delta_paths ? (SELECT array_agg(a.below) FROM aggregation_mode a WHERE a.mode <> 'sum')), k.written)
        """
    }

    /// Adds the listed users' deltas (what ingest recorded of their new increments) to the
    /// stored aggregates of each delta's node and its ancestors, consuming them (a delta of a
    /// write the user's version already covers is dropped: it was counted by a recount that did
    /// not see the delta); a node without
    /// an aggregate gets one (it has no own dot or icon that showed: a node that shows has an
    /// aggregate). Then versions and logs the change as `recompute` does, which it equals for
    /// users whose only changes since their last round were increments (none of their dirty
    /// marks asks for a recount). The new version covers the user's writes up to the first one
    /// whose mark asks for a recount or a bump (`reach.top`); that mark and the ones after it stay
    /// for the next round; so does a delta under a node the user muted (`deltaUnderMute`), which
    /// a writer may commit after the claim. `$3` is empty. `$4`–`$8` are the deltas the
    /// round's writer holds for it instead of `badge_delta` (`HeldDeltas`: user, path, amount,
    /// unseen, write number), added with the stored ones. Planned for each round (see
    /// `recompute`).
    ///
    /// With `moded`, it also stops before the first delta under a node with a mode other than
    /// sum (`aggregation_mode`'s `below`): a writer may commit one after the round's claim, and
    /// such a delta needs a recount (its mark stays, and the next round's claim sees it). See
    /// `RoundForm` for `partitioned` and `broadcasts`.
    ///
    /// With `shard`, its form for the users of one Citus shard (`$1`): every per-user table it
    /// names filtered to them (docs/SHARDING.md, rule 10), deltas and marks deleted by user and
    /// sequence, stored aggregates reached without a `LIMIT` in a lateral subquery (Citus plans
    /// none over a CTE); use it with `partitioned` and without `broadcasts` (see `recompute`).
    private static func addDeltas(moded: Bool, partitioned: Bool, broadcasts: Bool, shard: Bool = false) -> PGStatement {
        let pin: Pin = shard ? .users("$1::text[]") : .none
        return PGStatement(
        (moded ? "badges.add_deltas_moded" : "badges.add_deltas") + (partitioned ? "_partitioned" : "") + (broadcasts ? "" : "_no_broadcasts")
            + (shard ? "_of_shard" : ""),
        """
        WITH known AS MATERIALIZED (
            -- Materialized: inlined into `reach`, each of its lookups ran twice.
            SELECT u.user_id, \(writtenThrough("u.user_id", pin: pin)) AS written, \(writesThrough(of: "u.user_id", pin: pin)) AS covered
            FROM (SELECT DISTINCT unnest($1::text[]) AS user_id) AS u
        ), reach AS (
            -- Up to the first write since the user's version that is not only increments (it
            -- stays marked, for a recount next round).
            SELECT k.user_id, k.covered, k.user_id = ANY($3::text[]) AS bump,
                   least(k.written, coalesce((
                       SELECT min(m.seq) - 1 FROM dirty_mark m
                       WHERE m.user_id = k.user_id AND m.seq > k.covered AND ((m.recount AND NOT m.additive) OR m.bump)\(pin.on("m"))), k.written)\(moded ? modedDeltaStop(pin: pin) : ""),
                   \(unlessNobodyMutes(partitioned: partitioned, """
                       coalesce((SELECT min(d.seq) - 1 FROM (\(deltaUnderMute(user: "k.user_id", after: "k.covered", pin: pin))) AS d), k.written)
                       """, else: "k.written"))) AS top
            FROM known k
        )\(consumeMarks(partitioned: partitioned, pin: pin)), stored AS (\(pin.isNone ? """

            DELETE FROM badge_delta d
            WHERE d.ctid = ANY(ARRAY(
                SELECT x.ctid FROM reach r
                CROSS JOIN LATERAL (SELECT ctid FROM badge_delta x WHERE x.user_id = r.user_id AND x.seq <= r.top OFFSET 0) AS x))\(
                partitioned ? "\n              AND d.user_id = ANY($1::text[]) AND d.seq <= ((SELECT top FROM tops) ->> d.user_id)::bigint" : "")
            """ : """

            DELETE FROM badge_delta d WHERE d.seq <= ((SELECT top FROM tops) ->> d.user_id)::bigint\(pin.on("d"))
            """)
            RETURNING d.user_id, d.path, d.amount, d.unseen, d.seq
        ), held AS (
            SELECT h.*, r.user_id IS NOT NULL AND h.seq <= r.top AS covered
            FROM unnest($4::text[], $5::ltree[], $6::bigint[], $7::bigint[], $8::bigint[]) AS h(user_id, path, amount, unseen, seq)
            LEFT JOIN reach r ON r.user_id = h.user_id
        ), spilled AS (
            -- A held delta this version does not cover (none should be: see `HeldDeltas`) is
            -- stored with a mark that asks for a recount: slow, never lost.
            INSERT INTO badge_delta (user_id, path, amount, unseen, seq)
            SELECT user_id, path, amount, unseen, seq FROM held WHERE NOT covered
        ), spill_marked AS (
            INSERT INTO dirty_mark (user_id, seq, bump, recount)
            SELECT DISTINCT user_id, seq, false, true FROM held WHERE NOT covered
            ON CONFLICT (user_id, seq) DO UPDATE SET recount = true, additive = false
        ), consumed AS (
            SELECT * FROM stored
            UNION ALL
            -- The deltas the consumed marks carry (migration 31). The arrays are unnested in the
            -- select list, in step (they have one length), which PostgreSQL does row by row; as
            -- `LATERAL unnest(…)`, it filled a tuple store per mark: 2.1 against 0.8 µs a mark,
            -- 6 ms of a round of 500 users with 10 marks each (BENCHMARKS.md, "Marks that ask
            -- for a recount").
            SELECT u.user_id, unnest(u.delta_paths), unnest(u.delta_amounts), unnest(u.delta_unseen), u.seq
            FROM unmarked u
            UNION ALL
            SELECT user_id, path, amount, unseen, seq FROM held WHERE covered
        ), spread AS (
            -- Each delta at its node and every ancestor (the levels generated in the select
            -- list, as the arrays above, for the same reason). Grouped by the path's text,
            -- which PostgreSQL can hash: `ltree` (before PostgreSQL 16) only sorts, label by
            -- label, and that sort was a tenth of a round (BENCHMARKS.md).
            SELECT l.user_id, l.path::ltree AS path, sum(l.amount) AS amount, sum(l.unseen) AS unseen
            FROM (
                SELECT c.user_id, subpath(c.path, 0, generate_series(1, nlevel(c.path)))::text COLLATE "C" AS path, c.amount, c.unseen
                FROM consumed c
                JOIN reach r ON r.user_id = c.user_id
                WHERE c.seq > r.covered
            ) AS l
            GROUP BY l.user_id, l.path
        ), updated AS (
            SELECT s.user_id, s.path, a.count AS old_count, a.icon AS old_icon, a.unseen AS old_unseen,
                   least(coalesce(a.count, 0) + s.amount, \(maxCount))::bigint AS count, a.icon,
                   least(coalesce(a.unseen, 0) + s.unseen, \(maxCount))::bigint AS unseen, a.at
            FROM spread s
            -- One index probe per node (LIMIT 1 keeps the planner from hashing the whole table).
            LEFT JOIN LATERAL (
                SELECT x.count, x.icon, x.unseen, x.ctid AS at FROM badge_aggregate x
                WHERE x.user_id = s.user_id AND x.path = s.path\(pin.on("x")) \(pin.isNone ? "LIMIT 1" : "OFFSET 0")
            ) a ON true
        ), diff AS (
            SELECT user_id, path, old_count, old_icon, old_unseen, count, icon, unseen, true AS kept, at FROM updated
            WHERE (old_count, old_unseen) IS DISTINCT FROM (count, unseen)
        ), roots AS MATERIALIZED (
            \(rootTotals(from: "updated"))
        )\(versionAndLog(partitioned: partitioned, broadcasts: broadcasts, pin: pin))
        """, prepared: false)
    }

    /// The part of `recompute` and `addDeltas` after the CTE `reach` (per user: `top`, the last
    /// write the new version covers, and `covered`, the one the current version covers):
    /// deletes the users' dirty marks up to `top` (no other transaction holds them: writers only
    /// insert marks, and the users' rollup locks keep other rounds out).
    ///
    /// Here and in the deletes of deltas, every table is reached one user at a time (`LATERAL`,
    /// scalar subqueries) and rows are deleted by tuple id: joined with the round's users as
    /// a set, PostgreSQL guessed their count and scanned the whole queue and the whole delta
    /// table per round while ingest grew them (about 450 ms a round at 300k marks). No other
    /// transaction moves these rows meanwhile: writers only insert marks and deltas, and only a
    /// round of the same user, which waits for this one's rollup locks, deletes them.
    ///
    /// A tuple id names a row only within one heap: on a table partitioned by user, the same
    /// id also names rows of other users in other partitions. So there (`partitioned`), the
    /// delete keeps only the rows the per-user probes chose, by their own user and sequence
    /// (`tops`: each user's `top`, one JSON object evaluated once), and the tuple ids stay the
    /// access path; the users as an array (`$1`, the round's) let PostgreSQL prune the delete
    /// to their partitions when it plans it. On one heap the filter drops nothing and cost the
    /// in-batch delta round about 4 ms of 31 (BENCHMARKS.md), so the shipped schema goes
    /// without it (matching `tableoid` instead cost a fifth of the rollup).
    ///
    /// With a `pin` (a statement for the users of one Citus shard), the marks are deleted by
    /// their users and sequences alone: Citus refuses a tuple id in the condition of a delete
    /// it cannot send whole to one shard, and on one shard the users' filter is the access path.
    private static func consumeMarks(partitioned: Bool, pin: Pin = .none) -> String {
        if !pin.isNone {
            return """
                , tops AS (
                    SELECT jsonb_object_agg(user_id, top) AS top FROM reach
                ), unmarked AS (
                    DELETE FROM dirty_mark m
                    WHERE m.seq <= ((SELECT top FROM tops) ->> m.user_id)::bigint\(pin.on("m"))
                    RETURNING m.user_id, m.seq, m.delta_paths, m.delta_amounts, m.delta_unseen
                )
                """
        }
        return """
        \(partitioned ? ", tops AS (\n    SELECT jsonb_object_agg(user_id, top) AS top FROM reach\n)" : ""), unmarked AS (
            DELETE FROM dirty_mark m
            WHERE m.ctid = ANY(ARRAY(
                SELECT x.ctid FROM reach r
                CROSS JOIN LATERAL (SELECT ctid FROM dirty_mark x WHERE x.user_id = r.user_id AND x.seq <= r.top\(pin.on("x")) OFFSET 0) AS x))\(
                partitioned ? "\n      AND m.user_id = ANY($1::text[]) AND m.seq <= ((SELECT top FROM tops) ->> m.user_id)::bigint" : "")
            RETURNING m.user_id, m.seq, m.delta_paths, m.delta_amounts, m.delta_unseen
        )
        """
    }

    /// The CTE `roots` of `recompute` and `addDeltas`: one row, one JSON object from each user of
    /// `source` (the new aggregates) to their root's `[count, unseen]`. The log's insert looks
    /// each user up in it. Materialized: the log's insert names it twice (count and unseen), and
    /// inlined it was built twice a round. (As rows joined by user, the planner, which guesses 10 users a round,
    /// scanned every user's root for each version it logged: 62 of the 74 ms of logging a round
    /// of 379 users, `EXPLAIN (ANALYZE)`.)
    static func rootTotals(from source: String) -> String {
        "SELECT jsonb_object_agg(user_id, jsonb_build_array(count, unseen)) AS totals FROM \(source) WHERE path = 'root'"
    }

    /// The end of `recompute` and `addDeltas`, after the CTEs `reach` (see `consumeMarks`) and `diff` (the aggregates that change:
    /// user, path, the old count, icon and unseen, the new ones, whether the node still
    /// shows, and `at`, the tuple id of its stored row, NULL when it has none) and `roots`
    /// (`rootTotals`: each changed user's own root totals after the change): writes the
    /// changed rows (`aggregateWrites`), bumps the version of users with any change (or a `bump` in `reach`),
    /// recording how far its writes reach, logs each new version with the aggregates it changed
    /// (before and after), how far its writes and the previous version's reach, the broadcast version it was
    /// made under and the visible root totals (broadcasts the user has not dismissed merged in
    /// under the modes and mutes, `badge_visible_root`; hold `lockBroadcastsShared`, so that set
    /// is the one of that version) and the user's muted
    /// nodes when they changed, and notifies `$2`. The muted nodes are recounted for a user with
    /// a mute written since the version (`badge_mute.written_in` after `covered`, up to `top`);
    /// when they differ from the version's (`user_version.mutes`), that is a change: a new
    /// version keeps and logs them.
    /// Without `broadcasts` (no broadcast is active: `activeBroadcasts` said so under
    /// `lockBroadcastsShared`, so none can become active before the round commits), the logged
    /// root is the user's own, and the statement has no step that merges broadcasts to plan:
    /// that step was about a third of the in-batch round's planning (1.6–2.2 against
    /// 1.15–1.2 ms for 80 users, `EXPLAIN (SUMMARY)`), and the round is planned each time.
    /// Returns each new version's user and version.
    private static func versionAndLog(partitioned: Bool, broadcasts: Bool, pin: Pin = .none) -> String {
        """
        , mute_lists AS (
            -- The muted nodes of each user with a mute written since the version, when they
            -- differ from the version's.
            SELECT r.user_id, l.list
            FROM reach r
            CROSS JOIN LATERAL (
                SELECT coalesce(jsonb_agg(jsonb_build_array(m.path::text, \(microseconds("m.until"))) ORDER BY m.path)
                                FILTER (WHERE \(isMutedNow("m"))), '[]') AS list
                FROM badge_mute m WHERE m.user_id = r.user_id\(pin.on("m"))
            ) l
            WHERE EXISTS (SELECT 1 FROM badge_mute m WHERE m.user_id = r.user_id AND m.written_in > r.covered AND m.written_in <= r.top\(pin.on("m")))
              AND l.list IS DISTINCT FROM coalesce((SELECT v.mutes FROM user_version v WHERE v.user_id = r.user_id\(pin.on("v"))), '[]')
        )\(aggregateWrites(partitioned: partitioned, pin: pin)), bumped AS (
            INSERT INTO user_version AS v (user_id, version, broadcast_version, writes_through, mutes, changed_at)
            SELECT r.user_id, 1, (SELECT version FROM broadcast_version), r.top, ml.list, now()
            FROM reach r
            -- A join, not `IN` under `OR`: that runs a subplan per user over every changed row.
            LEFT JOIN (SELECT user_id FROM removed UNION SELECT user_id FROM written) AS c ON c.user_id = r.user_id
            LEFT JOIN mute_lists ml ON ml.user_id = r.user_id
            WHERE r.bump OR c.user_id IS NOT NULL OR ml.user_id IS NOT NULL
            ORDER BY r.user_id
            ON CONFLICT (user_id) DO UPDATE
            SET version = v.version + 1, changed_at = excluded.changed_at, broadcast_version = excluded.broadcast_version,
                writes_through = excluded.writes_through, mutes = coalesce(excluded.mutes, v.mutes)
            RETURNING v.user_id, v.version, v.broadcast_version, v.writes_through, v.mutes
        ), changes AS (
            -- Written as JSON text and stored as jsonb: the same value as jsonb's own builders
            -- give, for about a sixth less of the database's time; and the text concatenated
            -- rather than built by `json_build_array` and `json_build_object`, which look up
            -- each argument's type on every call: 1.3 µs less a node (BENCHMARKS.md).
            SELECT d.user_id, ('[' || string_agg(
                       '[' || \(pathJSON("d.path")) || ','
                       || CASE WHEN d.old_count IS NOT NULL THEN \(aggregateJSON("d.old_count", "d.old_icon", "d.old_unseen")) ELSE 'null' END
                       || ',' || CASE WHEN d.kept THEN \(aggregateJSON("d.count", "d.icon", "d.unseen")) ELSE 'null' END
                       || ']', ',' ORDER BY d.path) || ']')::jsonb AS nodes
            FROM diff d GROUP BY d.user_id
        )\(broadcasts ? diffNodes : ""), logged AS (
            INSERT INTO badge_change (
                user_id, version, broadcast_version, nodes, root_count, root_unseen, changed_at, writes_through, prior_writes_through,
                mutes)
            SELECT b.user_id, b.version, b.broadcast_version, coalesce(n.nodes, '[]'),
                   \(broadcasts ? "coalesce(shared.root[1], r.count, 0), coalesce(shared.root[2], r.unseen, 0)" : "coalesce(r.count, 0), coalesce(r.unseen, 0)"),
                   clock_timestamp(), b.writes_through, r0.covered, ml.list
            FROM bumped b
            JOIN reach r0 ON r0.user_id = b.user_id
            LEFT JOIN changes n ON n.user_id = b.user_id
            CROSS JOIN LATERAL (
                SELECT (x.totals ->> 0)::bigint AS count, (x.totals ->> 1)::bigint AS unseen
                FROM (SELECT (SELECT totals FROM roots) -> b.user_id AS totals) AS x
            ) r
            LEFT JOIN mute_lists ml ON ml.user_id = b.user_id\(broadcasts ? sharedRoot(pin: pin) : "")
        )
        \(pin.isNone ? "SELECT user_id, version, pg_notify($2, \(ChangeNotification.userPayloadSQL(user: "user_id", version: "version")))" : "SELECT user_id, version, $2::text")
        FROM bumped
        """
    }

    /// The CTE `diff_nodes` of `versionAndLog` with broadcasts: per user, the version's changed
    /// aggregates as `badge_visible_root` takes them, in one object looked up by user (a
    /// subquery per user scanned the whole diff each time).
    private static let diffNodes = """
        , diff_nodes AS (
            SELECT jsonb_object_agg(x.user_id, x.nodes) AS by_user
            FROM (
                SELECT d.user_id, jsonb_object_agg(d.path::text, CASE WHEN d.kept THEN jsonb_build_array(d.count, d.unseen) END) AS nodes
                FROM diff d GROUP BY d.user_id
            ) AS x
        )
        """

    /// The join of `versionAndLog`'s log insert with broadcasts (`shared`): with active
    /// broadcasts, the root with them merged under the modes and mutes (migration 0014): a
    /// plain sum for a user without mutes when no mode is declared, else the steps, where the
    /// version's changed aggregates are newer than the table's. The plain sum is
    /// `badge_plain_root`, which PostgreSQL inlines; in the form for one Citus shard it is
    /// written out (`plainRoot`), since Citus plans no call with parameters of a SQL function
    /// that reads distributed tables (docs/SHARDING.md, "What Citus refuses").
    private static func sharedRoot(pin: Pin) -> String {
        let plain = pin.isNone
            ? "badge_plain_root(b.user_id, r.count, r.unseen, b.writes_through) AS p"
            : "LATERAL (\(plainRoot(user: "b.user_id", count: "r.count", unseen: "r.unseen", through: "b.writes_through", pin: pin))) AS p"
        return """

            LEFT JOIN LATERAL (
                SELECT CASE WHEN jsonb_array_length(coalesce(ml.list, b.mutes, '[]')) = 0
                                 AND NOT EXISTS (SELECT 1 FROM aggregation_mode m WHERE m.mode <> 'sum')
                            THEN ARRAY[p.count, p.unseen]
                            ELSE badge_visible_root(
                                     b.user_id, r.count, r.unseen, b.writes_through,
                                     (SELECT by_user FROM diff_nodes) -> b.user_id,
                                     coalesce(ml.list, b.mutes))
                       END AS root
                FROM \(plain)
                WHERE EXISTS (SELECT 1 FROM broadcast x WHERE x.withdrawn_at IS NULL)
            ) shared ON true
        """
    }

    /// `badge_plain_root(user, count, unseen, through)` (migration 0014) written out, each of
    /// the user's dismissal tables filtered by `pin`: the own root (`count`, `unseen`; NULL when
    /// it does not show) plus every active broadcast the user has not cleared, and its unseen
    /// unless the user saw it, by the writes up to `through`; sums stop at the largest bigint.
    static func plainRoot(user: String, count: String, unseen: String, through: String, pin: Pin) -> String {
        """
        SELECT least(coalesce(\(count), 0)::numeric + coalesce(sum(x.count), 0), 9223372036854775807)::bigint AS count,
                       least(coalesce(\(unseen), 0)::numeric + coalesce(sum(x.count) FILTER (WHERE NOT EXISTS (
                           SELECT 1 FROM broadcast_seen s
                           WHERE s.user_id = \(user) AND s.broadcast_id = x.id AND s.shown_in <= \(through)\(pin.on("s")))), 0),
                             9223372036854775807)::bigint AS unseen
                    FROM broadcast x
                    WHERE x.withdrawn_at IS NULL AND NOT EXISTS (
                        SELECT 1 FROM broadcast_clear c
                        WHERE c.user_id = \(user) AND c.broadcast_id = x.id AND c.shown_in <= \(through)\(pin.on("c")))
        """
    }

    /// The forms of a rollup round's statement: `additive` (`addDeltas`, else `recompute`),
    /// `moded` (aggregation modes declared), `partitioned` (tables partitioned by user; see
    /// `consumeMarks`) and `broadcasts` (some broadcast is active: each logged root merges them;
    /// see `versionAndLog`).
    struct RoundForm: Hashable, Sendable {
        var additive: Bool
        var moded: Bool
        var partitioned: Bool
        var broadcasts: Bool
        /// The form for the users of one Citus shard (`recompute`'s and `addDeltas`' `shard`).
        var shard = false
    }

    /// Every form of the round's statement, made once.
    private static let roundStatements: [RoundForm: PGStatement] = {
        var statements: [RoundForm: PGStatement] = [:]
        for additive in [false, true] {
            for moded in [false, true] {
                for partitioned in [false, true] {
                    for broadcasts in [false, true] {
                        let form = RoundForm(additive: additive, moded: moded, partitioned: partitioned, broadcasts: broadcasts)
                        statements[form] = makeRoundStatement(form)
                    }
                }
            }
        }
        return statements
    }()

    /// The round's statement of `form` (`recompute` or `addDeltas`).
    static func roundStatement(_ form: RoundForm) -> PGStatement {
        roundStatements[form] ?? makeRoundStatement(form)
    }

    private static func makeRoundStatement(_ form: RoundForm) -> PGStatement {
        form.additive
            ? addDeltas(moded: form.moded, partitioned: form.partitioned, broadcasts: form.broadcasts, shard: form.shard)
            : recompute(moded: form.moded, partitioned: form.partitioned, broadcasts: form.broadcasts, shard: form.shard)
    }

    /// Notifies `$1` of each user's new version (`$2` users, `$3` versions), as a round's
    /// statement does itself where it runs on the coordinator: on Citus a round's statement runs
    /// on a worker (`recompute`'s `shard`), so this one, which names no table, notifies instead.
    static let notifyUserVersions = PGStatement(
        "badges.notify_user_versions",
        """
        SELECT pg_notify($1, \(ChangeNotification.userPayloadSQL(user: "x.user_id", version: "x.version")))
        FROM unnest($2::text[], $3::bigint[]) AS x(user_id, version)
        """)

    /// Whether any broadcast is active (not withdrawn): read under `lockBroadcastsShared`, so
    /// none becomes active or is withdrawn before the transaction ends.
    static let activeBroadcasts = PGStatement(
        "badges.active_broadcasts", "SELECT EXISTS (SELECT 1 FROM broadcast WHERE withdrawn_at IS NULL)")

    /// The CTEs of `versionAndLog` that write `diff` to `badge_aggregate`: `removed` (the nodes
    /// that no longer show) and `written` (the others), each returning the users it wrote.
    ///
    /// The stored rows are known already (`diff.at`, read by the same statement), and no other
    /// transaction writes a user's aggregates meanwhile: every writer of `badge_aggregate` (a
    /// round, ingest's round, an erasure) holds the user's rollup lock, taken before this
    /// statement's snapshot. So a new node is a plain insert, and a stored one is updated by
    /// its tuple id, with no second probe of the primary key. `INSERT … ON CONFLICT DO UPDATE`
    /// probed every node again and inserted speculatively: for 2,590 nodes of 500 users, 15.6 ms
    /// for new nodes and 17.4 ms for stored ones, against 6.4 ms for the plain insert and
    /// 12.3 ms for the update by tuple id (BENCHMARKS.md). Should a node be inserted meanwhile
    /// after all, the statement fails with `unique_violation` and its transaction writes
    /// nothing (a rollup round is tried again); it never counts twice.
    ///
    /// On a table partitioned by user (`partitioned`), a tuple id names a row only within its
    /// partition, so there the write stays the upsert by key.
    static func aggregateWrites(partitioned: Bool, pin: Pin = .none) -> String {
        let removed = """
            , removed AS (
                DELETE FROM badge_aggregate a
                USING diff d
                WHERE NOT d.kept AND a.user_id = d.user_id AND a.path = d.path\(pin.on("a"))
                RETURNING a.user_id
            )
            """
        if partitioned {
            return removed + """
                , written AS (
                    INSERT INTO badge_aggregate AS a (user_id, path, count, icon, unseen)
                    SELECT user_id, path, count, icon, unseen FROM diff WHERE kept
                    ON CONFLICT (user_id, path) DO UPDATE
                    SET count = excluded.count, icon = excluded.icon, unseen = excluded.unseen
                    RETURNING a.user_id
                )
                """
        }
        return removed + """
            , added AS (
                -- In user order: `diff` comes out of a hash, and each node's primary-key entry
                -- then went to a page of its own; a user's nodes in a row share one. 6–9% less
                -- of a round that makes a backlog's users' first nodes (BENCHMARKS.md).
                INSERT INTO badge_aggregate (user_id, path, count, icon, unseen)
                SELECT user_id, path, count, icon, unseen FROM diff WHERE kept AND at IS NULL ORDER BY user_id
                RETURNING user_id
            ), rewritten AS (
                -- The tuple ids as an array, so that the plan reaches the rows by them (joined
                -- with `diff` alone, the planner hashed a scan of the whole table).
                UPDATE badge_aggregate a SET count = d.count, icon = d.icon, unseen = d.unseen
                FROM diff d
                WHERE a.ctid = ANY(ARRAY(SELECT at FROM diff WHERE kept AND at IS NOT NULL))
                  AND d.at = a.ctid AND d.kept
                RETURNING a.user_id
            ), written AS (
                SELECT user_id FROM added UNION ALL SELECT user_id FROM rewritten
            )
            """
    }
}

extension BadgeSQL {
    /// Whether the `badge_mute` row `row` (an alias) mutes its node now: a mute, or a snooze that
    /// has not ended (`BadgeMute.isActive(at:)`).
    static func isMutedNow(_ row: String) -> String {
        "\(row).muted AND (\(row).until IS NULL OR \(row).until > now())"
    }

    /// The timestamp `column` as microseconds since 1970 (NULL stays NULL).
    static func microseconds(_ column: String) -> String {
        "(extract(epoch FROM \(column)) * 1000000)::bigint"
    }

    /// The last write number of the user in `column` (0: none yet), read without a lock.
    static func writtenThrough(_ column: String, pin: Pin = .none) -> String {
        "coalesce((SELECT w.seq FROM user_write w WHERE w.user_id = \(column)\(pin.on("w"))), 0)"
    }

    /// An aggregate as the change log keeps it, as JSON text (`changes` casts the whole list):
    /// `{"count":…,"icon":…,"unseen":…}`, the icon escaped by `to_json`, a NULL as `null`
    /// (concatenated, a NULL would make the whole node NULL, which `string_agg` drops).
    static func aggregateJSON(_ count: String, _ icon: String, _ unseen: String) -> String {
        """
        '{"count":' || coalesce(\(count)::text, 'null') || ',"icon":' || coalesce(to_json(\(icon))::text, 'null') \
        || ',"unseen":' || coalesce(\(unseen)::text, 'null') || '}'
        """
    }

    /// The `ltree` in `path` as a JSON string. Labels hold letters, digits, `_` and (from
    /// PostgreSQL 16) `-`: nothing JSON escapes, so the text goes between quotes as it is.
    static func pathJSON(_ path: String) -> String {
        "'\"' || \(path)::text || '\"'"
    }
}
