import LibPQ

/// The ingest statements: offsets, dedupe, broadcasts and rejected records. Every one binds its
/// values, arrays for set-based writes, never one statement per row.
enum IngestSQL {
    /// Compare-and-set of a group's stored offsets: `$2…$5` are the partitions' topics,
    /// partition numbers, expected offsets (NULL: no row may exist yet) and new offsets, `$6`
    /// the records waiting in each after the batch (NULL: not known). Returns the partitions
    /// that moved; any other lost the compare.
    static let advanceOffsets = PGStatement(
        "ingest.advance_offsets",
        """
        WITH wanted AS (
            SELECT * FROM unnest($2::text[], $3::int[], $4::bigint[], $5::bigint[], $6::bigint[])
                AS w(topic, partition, expected, next_offset, waiting)
        ), updated AS (
            UPDATE consumer_offset o
            SET next_offset = w.next_offset, waiting = w.waiting, updated_at = now()
            FROM wanted w
            WHERE o.consumer_group = $1 AND o.topic = w.topic AND o.partition = w.partition
              AND w.expected IS NOT NULL AND o.next_offset = w.expected
            RETURNING o.topic, o.partition
        ), inserted AS (
            INSERT INTO consumer_offset (consumer_group, topic, partition, next_offset, waiting)
            SELECT $1, w.topic, w.partition, w.next_offset, w.waiting FROM wanted w WHERE w.expected IS NULL
            ON CONFLICT (consumer_group, topic, partition) DO NOTHING
            RETURNING topic, partition
        )
        SELECT topic, partition FROM updated
        UNION ALL
        SELECT topic, partition FROM inserted
        """)

    /// The stored offsets of a group for the listed partitions.
    static let storedOffsets = PGStatement(
        "ingest.stored_offsets",
        """
        SELECT o.topic, o.partition, o.next_offset
        FROM consumer_offset o
        JOIN unnest($2::text[], $3::int[]) AS p(topic, partition) ON o.topic = p.topic AND o.partition = p.partition
        WHERE o.consumer_group = $1
        """)

    /// The CTE `bridge`: whether `applied_event` still holds ids that a build before migration
    /// 20 recorded (audience NULL; one probe of the partial index `applied_event_legacy`). While
    /// it does, users' event ids are also recorded and looked up there (migration 20 says why).
    private static let bridge = "bridge AS (SELECT EXISTS (SELECT 1 FROM applied_event WHERE audience IS NULL) AS open)"

    /// The current dedupe generation's slot (`generation % 2`), its row locked `FOR SHARE` and
    /// its table `ROW SHARE` until the transaction ends. A rotation (`rotateGeneration`) first
    /// locks the table `EXCLUSIVE`: it waits for the writers that read the slot, and writers that
    /// come while it waits queue behind it (PostgreSQL queues table locks fairly), then read the
    /// new slot with a snapshot taken after their lock. Read it in a statement of its own, before
    /// the ones that write or look for keys, so that theirs see every key committed before a
    /// rotation.
    static let dedupeSlot = PGStatement(
        "ingest.dedupe_slot", "SELECT (generation % 2)::int FROM dedupe_generation FOR SHARE")

    /// The CTE condition, for a pair `p` of a user's key, that the key was applied before: in the
    /// other slot of `applied_user_event_generation` than `$3` (the current one, which the write
    /// itself checks), or in `applied_user_event`, where builds before migration 30 recorded it.
    private static let appliedEarlier = """
        EXISTS (SELECT 1 FROM applied_user_event_generation a
                WHERE a.user_id = p.u AND a.event_id = p.e AND a.slot = 1 - $3::smallint)
        OR EXISTS (SELECT 1 FROM applied_user_event a WHERE a.user_id = p.u AND a.event_id = p.e)
        """

    /// Records applied events by key: `$1` the users (`''` for a broadcast), `$2` the event ids,
    /// pairwise, `$3` the current dedupe slot (`dedupeSlot`). A user's key goes to the current
    /// slot of `applied_user_event_generation` unless it is in either slot or in
    /// `applied_user_event`; a broadcast's to `applied_event` (and, during the bridge, every
    /// event's id there too). When every key given is new and given once (the usual batch),
    /// returns one row of NULLs; otherwise the keys not applied before, each once (none when
    /// every one was), so that no id crosses the wire in the usual case.
    static let recordEvents = PGStatement(
        "ingest.record_events",
        """
        WITH pairs AS (
            SELECT DISTINCT u, e FROM unnest($1::text[], $2::text[]) AS p(u, e)
        ), \(bridge), wanted AS (
            SELECT DISTINCT ON (e) e, CASE WHEN u = '' THEN 'all' ELSE 'users' END AS audience
            FROM pairs, bridge WHERE u = '' OR bridge.open
            ORDER BY e, u = '' DESC
        ), legacy AS (
            INSERT INTO applied_event (event_id, audience)
            SELECT e, audience FROM wanted ORDER BY 1
            ON CONFLICT (event_id) DO NOTHING
            RETURNING event_id
        ), known AS (
            SELECT e FROM wanted EXCEPT SELECT event_id FROM legacy
        ), fresh AS (
            INSERT INTO applied_user_event_generation (user_id, event_id, slot)
            SELECT p.u, p.e, $3::smallint FROM pairs p
            WHERE p.u <> '' AND p.e NOT IN (SELECT e FROM known) AND NOT (\(appliedEarlier))
            ORDER BY 1, 2
            ON CONFLICT (user_id, event_id, slot) DO NOTHING
            RETURNING user_id, event_id
        ), applied AS (
            SELECT user_id AS u, event_id AS e FROM fresh
            UNION ALL
            SELECT p.u, p.e FROM pairs p JOIN legacy l ON l.event_id = p.e WHERE p.u = ''
        )
        SELECT NULL::text, NULL::text WHERE (SELECT count(*) FROM applied) = cardinality($1::text[])
        UNION ALL
        SELECT u, e FROM applied WHERE (SELECT count(*) FROM applied) < cardinality($1::text[])
        """)

    /// Records applied events by key (as `recordEvents`, `$3` the current slot) with plain
    /// inserts, sorted (one lock order for every writer): for a batch whose keys are expected to
    /// be new and distinct. A key given twice, or applied before in the current slot or to a
    /// broadcast, fails it with `unique_violation`; returns how many of the users' keys were
    /// applied before elsewhere (the other slot, `applied_user_event`), which the caller treats
    /// as the same failure (``RowConflicts/fail``).
    static let recordNewEvents = PGStatement(
        "ingest.record_new_events",
        """
        WITH pairs AS (
            SELECT * FROM unnest($1::text[], $2::text[]) AS p(u, e)
        ), \(bridge), legacy AS (
            INSERT INTO applied_event (event_id, audience)
            SELECT DISTINCT e, CASE WHEN u = '' THEN 'all' ELSE 'users' END FROM pairs, bridge WHERE u = '' OR bridge.open
            ORDER BY 1
        ), fresh AS (
            INSERT INTO applied_user_event_generation (user_id, event_id, slot)
            SELECT u, e, $3::smallint FROM pairs WHERE u <> '' ORDER BY 1, 2
        )
        SELECT count(*) FROM pairs p WHERE p.u <> '' AND (\(appliedEarlier))
        """)

    /// `appliedEarlier` for users of one Citus shard (`$1`).
    private static let appliedEarlierOfShard = """
        EXISTS (SELECT 1 FROM applied_user_event_generation a
                WHERE a.user_id = p.u AND a.event_id = p.e AND a.slot = 1 - $3::smallint AND a.user_id = ANY($1::text[]))
        OR EXISTS (SELECT 1 FROM applied_user_event a WHERE a.user_id = p.u AND a.event_id = p.e AND a.user_id = ANY($1::text[]))
        """

    /// `recordEvents` for users' keys only, of users of one Citus shard (`$1`; docs/SHARDING.md,
    /// rule 10): each key's own table filtered to them, and no step for broadcasts' ids or the
    /// bridge of migration 20 (a reference table, which a statement Citus sends to one shard
    /// may not write; a Citus install starts after migration 30, with the bridge closed).
    static let recordUserEventsOfShard = PGStatement(
        "ingest.record_user_events_of_shard",
        """
        WITH pairs AS (
            SELECT DISTINCT u, e FROM unnest($1::text[], $2::text[]) AS p(u, e)
        ), fresh AS (
            INSERT INTO applied_user_event_generation (user_id, event_id, slot)
            SELECT p.u, p.e, $3::smallint FROM pairs p
            WHERE NOT (\(appliedEarlierOfShard))
            ORDER BY 1, 2
            ON CONFLICT (user_id, event_id, slot) DO NOTHING
            RETURNING user_id, event_id
        )
        SELECT NULL::text, NULL::text WHERE (SELECT count(*) FROM fresh) = cardinality($1::text[])
        UNION ALL
        SELECT user_id, event_id FROM fresh WHERE (SELECT count(*) FROM fresh) < cardinality($1::text[])
        """)

    /// `recordNewEvents` for users' keys only, of users of one Citus shard (as
    /// `recordUserEventsOfShard`).
    static let recordNewUserEventsOfShard = PGStatement(
        "ingest.record_new_user_events_of_shard",
        """
        WITH pairs AS (
            SELECT * FROM unnest($1::text[], $2::text[]) AS p(u, e)
        ), fresh AS (
            INSERT INTO applied_user_event_generation (user_id, event_id, slot)
            SELECT u, e, $3::smallint FROM pairs ORDER BY 1, 2
        )
        SELECT count(*) FROM pairs p WHERE \(appliedEarlierOfShard)
        """)

    /// Broadcasts' ids (`$1`) in `applied_event` where Citus distributes the users' tables (a
    /// reference table, written in a statement of its own): the new ones, once each.
    static let recordBroadcastEvents = PGStatement(
        "ingest.record_broadcast_events",
        """
        INSERT INTO applied_event (event_id, audience)
        SELECT DISTINCT e, 'all' FROM unnest($1::text[]) AS e ORDER BY 1
        ON CONFLICT (event_id) DO NOTHING
        RETURNING event_id
        """)

    /// Whether the current dedupe generation started before `$1` (read without a lock, to skip
    /// the rotation's transaction when it is not due).
    static let generationDue = PGStatement(
        "ingest.generation_due", "SELECT started_at < $1 FROM dedupe_generation")

    /// How long ago the current dedupe generation started, in seconds.
    static let generationAge = PGStatement(
        "ingest.generation_age", "SELECT extract(epoch FROM now() - started_at)::float8 FROM dedupe_generation")

    /// The rotation's fence: waits for the writers holding `dedupeSlot`, and holds new ones until
    /// the rotation commits.
    static let fenceWriters = "LOCK TABLE dedupe_generation IN EXCLUSIVE MODE"

    /// Starts the next dedupe generation when the current one started before `$1` (the
    /// retention's cutoff): returns the slot it takes, which the caller empties in the same
    /// transaction (`emptySlot`); no row when the current one is younger.
    static let rotateGeneration = PGStatement(
        "ingest.rotate_generation",
        """
        UPDATE dedupe_generation SET generation = generation + 1, started_at = now()
        WHERE started_at < $1
        RETURNING (generation % 2)::int
        """)

    /// Empties one slot of `applied_user_event_generation` and of `applied_action_generation`
    /// (`TRUNCATE`: their files are replaced at commit, no row is deleted one by one).
    static func emptySlot(_ slot: Int32) -> String {
        let slot = slot == 0 ? 0 : 1
        return "TRUNCATE applied_user_event_generation_slot\(slot), applied_action_generation_slot\(slot)"
    }

    /// The entries of the server's shared lock table, about: `max_locks_per_transaction` ×
    /// `max_connections` (PostgreSQL adds a few for its own processes).
    static let lockTableEntries = PGStatement(
        "ingest.lock_table_entries",
        "SELECT current_setting('max_locks_per_transaction')::bigint * current_setting('max_connections')::bigint")

    /// Withdraws the active broadcasts at each path (with force, within its subtree).
    static let withdrawBroadcasts = PGStatement(
        "ingest.withdraw_broadcasts",
        """
        UPDATE broadcast b
        SET withdrawn_at = now(), withdrawn_in = (SELECT version FROM broadcast_version) + 1
        FROM unnest($1::ltree[], $2::bool[]) AS c(path, force)
        WHERE b.withdrawn_at IS NULL AND (b.path = c.path OR (c.force AND b.path <@ c.path))
        """)

    /// New broadcasts, some withdrawn at once (by a clear later in the same batch).
    static let insertBroadcasts = PGStatement(
        "ingest.insert_broadcasts",
        """
        INSERT INTO broadcast (event_id, path, count, icon, expires_at, withdrawn_at, shown_in, withdrawn_in)
        SELECT e, p, c, i, x, CASE WHEN w THEN now() END, v.version + 1, CASE WHEN w THEN v.version + 1 END
        FROM unnest($1::text[], $2::ltree[], $3::bigint[], $4::text[], $5::timestamptz[], $6::bool[])
            AS b(e, p, c, i, x, w)
        CROSS JOIN broadcast_version v
        ON CONFLICT (event_id) DO NOTHING
        """)

    /// Rejected records; a re-delivered record (same topic, partition and offset) is kept once.
    static let insertRejected = PGStatement(
        "ingest.insert_rejected",
        """
        INSERT INTO rejected_record (topic, partition, record_offset, record_key, payload, reason, message, event_id)
        SELECT * FROM unnest(
            $1::text[], $2::int[], $3::bigint[], $4::bytea[], $5::bytea[], $6::text[], $7::text[], $8::text[])
        ON CONFLICT (topic, partition, record_offset) DO NOTHING
        """)

    /// The oldest rejected records not yet published to the dead-letter topic, locked until the
    /// transaction ends so that concurrent publishers never send one twice.
    static let unpublishedRejections = PGStatement(
        "ingest.unpublished_rejections",
        """
        SELECT id, topic, partition, record_offset, record_key, payload, reason, message, event_id, rejected_at
        FROM rejected_record
        WHERE published_at IS NULL
        ORDER BY id
        LIMIT $1
        FOR UPDATE SKIP LOCKED
        """)

    static let markPublished = PGStatement(
        "ingest.mark_published",
        "UPDATE rejected_record SET published_at = now() WHERE id = ANY($1::bigint[]) AND published_at IS NULL")

    /// One chunk of expired broadcast (and older builds') event ids; rows another transaction
    /// holds are left for next time.
    static let pruneAppliedEvents = PGStatement(
        "ingest.prune_applied_events",
        """
        DELETE FROM applied_event
        WHERE event_id IN (
            SELECT event_id FROM applied_event WHERE applied_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)
        """)

    /// One chunk of expired users' event ids that builds before migration 30 recorded (this
    /// build records them in `applied_user_event_generation`, emptied a slot at a time).
    static let pruneAppliedUserEvents = PerUserPrune(
        "ingest.prune_applied_user_events", table: "applied_user_event", key: "user_id, event_id", before: "applied_at")

    /// One chunk of the clients' action ids older than the dedupe retention that builds before
    /// migration 30 recorded (a replay of such an action later would apply again, at its
    /// `seen_version`); this build's go a generation at a time.
    static let pruneAppliedActions = PerUserPrune(
        "ingest.prune_applied_actions", table: "applied_action", key: "user_id, action_id", before: "applied_at")

    /// One chunk of item tombstones older than the dedupe retention (an add of such an item
    /// arriving later would count again, as would a duplicate of its event).
    static let pruneGoneItems = PerUserPrune(
        "ingest.prune_gone_items", table: "badge_item", key: "user_id, path, item", before: "removed_at")

    /// One chunk of clear marks older than the dedupe retention.
    static let pruneClearMarks = PerUserPrune(
        "ingest.prune_clear_marks", table: "badge_clear_mark", key: "user_id, path, subtree", before: "marked_at")

    /// Which of the keys (`$1` users, `''` for a broadcast, `$2` event ids) were applied: a
    /// user's in `applied_user_event_generation` (either slot) or, by a build before migration
    /// 30, `applied_user_event`, or (by a build before migration 20, or during the bridge) in
    /// `applied_event`; a broadcast's in `applied_event`.
    static let appliedAmong = PGStatement(
        "ingest.applied_among",
        """
        SELECT p.u, p.e FROM unnest($1::text[], $2::text[]) AS p(u, e)
        WHERE CASE WHEN p.u = '' THEN EXISTS (SELECT 1 FROM applied_event a WHERE a.event_id = p.e)
                   ELSE EXISTS (SELECT 1 FROM applied_user_event_generation a WHERE a.user_id = p.u AND a.event_id = p.e)
                     OR EXISTS (SELECT 1 FROM applied_user_event a WHERE a.user_id = p.u AND a.event_id = p.e)
                     OR EXISTS (SELECT 1 FROM applied_event a WHERE a.event_id = p.e AND a.audience IS DISTINCT FROM 'all')
              END
        """)

    /// `appliedAmong` where Citus is installed (docs/SHARDING.md, rule 10), for the keys of one
    /// shard's users (`$3`): in `applied_user_event_generation` (a Citus install starts after
    /// migration 30, so the tables of the builds before it hold none).
    static let appliedAmongOfShard = PGStatement(
        "ingest.applied_among_of_shard",
        """
        SELECT p.u, p.e FROM unnest($1::text[], $2::text[]) AS p(u, e)
        WHERE EXISTS (SELECT 1 FROM applied_user_event_generation a WHERE a.user_id = p.u AND a.event_id = p.e AND a.user_id = ANY($3::text[]))
        """)

    /// `appliedAmong` where Citus is installed, for broadcasts' ids (`$1`): in `applied_event`.
    static let appliedBroadcastsAmong = PGStatement(
        "ingest.applied_broadcasts_among",
        "SELECT '', p.e FROM unnest($1::text[]) AS p(e) WHERE EXISTS (SELECT 1 FROM applied_event a WHERE a.event_id = p.e)")
}
