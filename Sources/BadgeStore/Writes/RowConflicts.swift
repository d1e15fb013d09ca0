public import LibPQ

/// What a write of new rows does when a row with the same key is stored: the increments of
/// `BadgeStore.apply` (one per node and time), its item additions, and ingest's event ids.
///
/// Nearly every batch writes only new keys. `.fail` writes them with plain inserts, which cost
/// PostgreSQL less than `INSERT … ON CONFLICT` (no speculative insertion; in BENCHMARKS.md about
/// 40% less for event ids, whose merging statement also returns rows, and a sixth for
/// increments); a stored key then fails the statement, and the caller rolls back to a savepoint
/// and writes the batch again with `.merge` (see `IngestTransaction.applyEvents`).
public enum RowConflicts: Sendable, Hashable {
    /// Merge into the stored row (`ON CONFLICT … DO …`): right whatever is stored.
    case merge
    /// Fail the statement with `unique_violation` (SQLSTATE 23505); nothing else changes.
    case fail

    /// Whether `error` is a `.fail` write meeting a stored key: the only failure that writing
    /// again with `.merge` mends.
    public static func isStoredKey(_ error: PGError) -> Bool {
        guard error.code == .server, let statement = error.statement, failingStatements.contains(statement) else { return false }
        // Citus writes the rows of an `INSERT … SELECT` over arrays with COPY to the workers and
        // reports a worker's error, a unique violation too, as SQLSTATE XX000 (a statement's
        // form for one shard, docs/SHARDING.md, rule 10). Any such error is taken for one: the
        // merging write then fails the same way if it was something else.
        return error.sqlState == "23505" || (statement.hasSuffix("_of_shard") && error.sqlState == "XX000")
    }

    /// The names of the statements `.fail` writes with.
    static let failingStatements: Set<String> = Set(
        [IngestSQL.recordNewEvents.name, IngestSQL.recordNewUserEventsOfShard.name]
            + BadgeSQL.addIncrements(.fail).names + BadgeSQL.addItems(.fail).names)
}
