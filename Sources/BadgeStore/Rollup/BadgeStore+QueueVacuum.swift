public import LibPQ

extension BadgeStore {
    /// Whether this connection's role may vacuum the rollup's queue (`dirty_mark`): a superuser,
    /// or a role with the privileges of the table's owner or of the database's owner. For any
    /// other role PostgreSQL skips the table with a warning.
    public static func mayVacuumQueue(on connection: PGConnection) throws(PGError) -> Bool {
        try connection.query(QueueVacuumSQL.mayVacuum).singleRow().decode(0, as: Bool.self)
    }

    /// Vacuums the rollup's queue (`dirty_mark`; every partition where it is partitioned), outside
    /// any transaction: its index then stops holding the marks that rounds deleted, which every
    /// claim otherwise steps over until autovacuum comes (after a backlog of a million marks
    /// drained, the workers' looks for dirty users kept most of a core of PostgreSQL busy for up
    /// to its minute's nap; BENCHMARKS.md, "The queue after a backlog"). Writers go on meanwhile
    /// (a vacuum locks out only other vacuums and schema changes); one that another vacuum holds
    /// off (autovacuum's) is skipped, not waited for. It keeps the table's empty pages (`TRUNCATE
    /// false`): cutting them off takes the table's exclusive lock, which writers of marks would
    /// wait for, and the next backlog needs them again.
    public static func vacuumQueue(on connection: PGConnection) throws(PGError) {
        try connection.execute(script: "VACUUM (SKIP_LOCKED, TRUNCATE false) dirty_mark", name: "badges.vacuum_queue")
    }
}

enum QueueVacuumSQL {
    static let mayVacuum = PGStatement(
        "badges.may_vacuum_queue",
        """
        SELECT coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = current_user), false)
            OR pg_has_role((SELECT relowner FROM pg_class WHERE oid = 'dirty_mark'::regclass), 'USAGE')
            OR pg_has_role((SELECT datdba FROM pg_database WHERE datname = current_database()), 'USAGE')
        """)
}
