public import LibPQ

/// What the benches (`reddot bench …`, the BadgeBench module) ask of RedDot's tables, as
/// functions, so that every statement on those tables lives in BadgeStore. Each runs on the
/// caller's connection (unprepared, but for the upsert a bench repeats), and throws the
/// `PGError` of a failed statement.
extension PGConnection {
    /// The name of the database this connection is on (its backends' process titles carry it).
    public func currentDatabase() throws(PGError) -> String {
        try query(PGStatement("bench.current_database", "SELECT current_database()", prepared: false)).singleRow().decode(0, as: String.self)
    }

    /// The number of event keys ingest has applied: each user's event, each broadcast.
    public func countAppliedEvents() throws(PGError) -> Int {
        try query(
            PGStatement(
                "bench.count_applied",
                """
                SELECT (SELECT count(*) FROM applied_user_event_generation) + (SELECT count(*) FROM applied_user_event)
                     + (SELECT count(*) FROM applied_event WHERE audience = 'all')
                """,
                prepared: false))
            .singleRow().decode(0, as: Int.self)
    }

    /// The number of rows of `rejected_record`: the dead letters ingest has written.
    public func countRejectedRecords() throws(PGError) -> Int {
        try query(PGStatement("bench.count_rejected", "SELECT count(*) FROM rejected_record", prepared: false))
            .singleRow().decode(0, as: Int.self)
    }

    /// The sum of the next offsets `group` has stored, over every topic and partition: how many
    /// records of a topic that started empty it has consumed.
    public func sumOfStoredOffsets(group: String) throws(PGError) -> Int64 {
        try query(
            PGStatement(
                "bench.sum_offsets", "SELECT coalesce(sum(next_offset), 0)::bigint FROM consumer_offset WHERE consumer_group = $1",
                prepared: false),
            [group]
        ).singleRow().decode(0, as: Int64.self)
    }

    /// Whether a user waits for a rollup. Through the queue's primary key, whose entries of deleted
    /// marks are skipped once seen: a scan of the table reads every deleted mark until a vacuum
    /// (4 ms a poll, polled every few milliseconds, in a 300k-event backlog).
    public func anyDirtyUser() throws(PGError) -> Bool {
        try query(PGStatement("bench.any_dirty", "SELECT EXISTS (SELECT 1 FROM dirty_mark ORDER BY user_id LIMIT 1)", prepared: false))
            .singleRow().decode(0, as: Bool.self)
    }

    /// The number of user versions the change log holds (one record per version the rollup or
    /// ingest made, until the log's retention prunes it).
    public func countLoggedVersions() throws(PGError) -> Int {
        try query(PGStatement("bench.count_versions", "SELECT count(*) FROM badge_change", prepared: false)).singleRow().decode(0, as: Int.self)
    }

    /// The client sessions connected to this database besides this one.
    public func countOtherSessions() throws(PGError) -> Int {
        try query(
            PGStatement(
                "bench.other_sessions",
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'",
                prepared: false)
        ).singleRow().decode(0, as: Int.self)
    }

    /// The number of users with a dirty mark.
    public func countDirtyUsers() throws(PGError) -> Int {
        try query(PGStatement("bench.count_dirty", "SELECT count(DISTINCT user_id) FROM dirty_mark", prepared: false)).singleRow().decode(0, as: Int.self)
    }

    /// The plain consumer's root total (`deploy/bench/plain_consumer.py`'s `peer_badge`): what
    /// its increments add up to.
    public func sumOfPeerRootCounts() throws(PGError) -> Int64 {
        try query(
            PGStatement(
                "bench.sum_peer_roots",
                "SELECT coalesce(sum(count), 0)::bigint FROM peer_badge WHERE path = 'root'", prepared: false)
        ).singleRow().decode(0, as: Int64.self)
    }

    /// The bytes on disk of each named table, with its indexes and TOAST (`pg_total_relation_size`;
    /// a partitioned table's, its partitions' sum); a table that does not exist is left out.
    public func tableSizes(_ names: [String]) throws(PGError) -> [String: Int64] {
        var sizes: [String: Int64] = [:]
        let result = try query(
            PGStatement(
                "bench.table_sizes",
                """
                SELECT c.relname::text,
                       CASE WHEN c.relkind = 'p' THEN (SELECT coalesce(sum(pg_total_relation_size(t.relid)), 0)::bigint FROM pg_partition_tree(c.oid) t)
                            ELSE pg_total_relation_size(c.oid) END
                FROM pg_class c WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition AND c.relname = ANY($1::text[])
                """,
                prepared: false),
            [names])
        for row in result.rows { sizes[try row.decode(0, as: String.self)] = try row.decode(1, as: Int64.self) }
        return sizes
    }

    /// The rows of `badge_state` and of `badge_aggregate`, and the users of `user_version` with a
    /// version of 1 or more: what a bulk load and its rollup wrote.
    public func countBadgeRows() throws(PGError) -> (stateRows: Int, aggregateRows: Int, versionedUsers: Int) {
        let row = try query(
            PGStatement(
                "bench.count_rows",
                """
                SELECT (SELECT count(*) FROM badge_state), (SELECT count(*) FROM badge_aggregate),
                       (SELECT count(*) FROM user_version WHERE version >= 1)
                """, prepared: false)
        ).singleRow()
        return (try row.decode(0, as: Int.self), try row.decode(1, as: Int.self), try row.decode(2, as: Int.self))
    }

    /// The sum of the aggregate counts of every user but `excludedUser` at the leaves
    /// `root.bench.<label>` (depth 3): what the pipeline bench's increments add up to.
    public func sumOfBenchLeafCounts(excluding excludedUser: String) throws(PGError) -> Int64 {
        try query(
            PGStatement(
                "bench.sum_leaves",
                "SELECT coalesce(sum(count), 0)::bigint FROM badge_aggregate WHERE user_id <> $1 AND path <@ 'root.bench' AND nlevel(path) = 3",
                prepared: false),
            [excludedUser]
        ).singleRow().decode(0, as: Int64.self)
    }

    /// `VACUUM (ANALYZE)` of every badge table (own state, aggregates, versions, dirty marks,
    /// broadcasts), one at a time: fresh statistics and visibility maps after a bulk load.
    public func vacuumAnalyzeBadgeTables() throws(PGError) {
        for table in ["badge_state", "badge_aggregate", "user_version", "user_write", "dirty_mark", "broadcast", "broadcast_clear", "broadcast_version"] {
            try execute(script: "VACUUM (ANALYZE) \(table)", name: "bench.vacuum")
        }
    }

    /// A `CHECKPOINT` (it needs superuser or `pg_checkpoint`), so no checkpoint of a bulk load
    /// runs during a measurement.
    public func checkpoint() throws(PGError) {
        try execute(script: "CHECKPOINT", name: "bench.checkpoint")
    }

    /// Creates `bench_upsert` afresh, shaped like `badge_state` (`LIKE … INCLUDING ALL`): the
    /// table of the plain batched upsert the ingest bench compares itself with.
    public func createUpsertBaselineTable() throws(PGError) {
        try execute(
            script: """
                DROP TABLE IF EXISTS bench_upsert;
                CREATE TABLE bench_upsert (LIKE badge_state INCLUDING ALL);
                """,
            name: "bench.create_upsert_table")
    }

    /// Upserts one batch of (user, path, count) rows into `bench_upsert` with
    /// `INSERT … SELECT FROM unnest(…) ON CONFLICT DO UPDATE`: one statement, one transaction.
    /// The rows must be distinct by (user, path); `paths` are ltree texts.
    public func upsertBaseline(users: [String], paths: [String], counts: [Int64]) throws(PGError) {
        _ = try query(Self.upsertBaselineStatement, [users, paths, counts])
    }

    private static let upsertBaselineStatement = PGStatement(
        "bench.upsert",
        """
        INSERT INTO bench_upsert AS s (user_id, path, count)
        SELECT * FROM unnest($1::text[], $2::ltree[], $3::bigint[])
        ON CONFLICT (user_id, path) DO UPDATE SET count = excluded.count, updated_at = now()
        """)
}
