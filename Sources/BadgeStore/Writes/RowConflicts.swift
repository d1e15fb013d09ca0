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
        guard error.code == .server, error.sqlState == "23505", let statement = error.statement else { return false }
        return failingStatements.contains(statement)
    }

    /// The names of the statements `.fail` writes with.
    static let failingStatements: Set<String> = [
        IngestSQL.recordNewEvents.name, BadgeSQL.addIncrements(.fail).name, BadgeSQL.addItems(.fail).name,
    ]
}
