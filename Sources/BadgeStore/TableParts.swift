public import LibPQ
import Foundation
import Synchronization

/// The parts of a per-user table that a queue is claimed from, one part per claim: its leaf
/// partitions where it is partitioned (by user), or the table itself on the shipped schema.
/// Read from the catalog (`pg_partition_tree`), again after `lifetime` and after `forget()`.
/// A claim that reads one part at a time keeps each of its statements in one partition, and
/// steps through one partition's index instead of merging all of them (BENCHMARKS.md, "The
/// rollup claims one partition a round"). `next` says which part the next claim tries first;
/// its owner moves it after each claim, so that claims take the parts in turn.
public struct TableParts: Sendable {
    /// The table (unqualified, as the statements name it).
    public let table: String
    /// The parts, as SQL names (`regclass` text: quoted and qualified as the search path needs).
    public private(set) var names: [String] = []
    private var readAt: ContinuousClock.Instant?
    private var forgottenAt: ContinuousClock.Instant?
    /// The index (modulo the parts) of the part the next claim tries first.
    public var next = 0

    /// How long a reading is kept: a table partitioned (or its partitions changed) while a
    /// process runs is claimed by its new parts within this.
    public static let lifetime: Duration = .seconds(10)

    /// The parts of `table` (a name from this code, never input), not read yet.
    public init(of table: String) {
        self.table = table
    }

    /// Reads the parts when the last reading is older than `lifetime`, or was forgotten.
    public mutating func refresh(on connection: PGConnection) throws(PGError) {
        let now = ContinuousClock.now
        if let readAt, !names.isEmpty, now - readAt <= Self.lifetime { return }
        let rows = try connection.query(Self.partsStatement, [table]).rows
        let read = try rows.map { row throws(PGError) in try row.decode(0, as: String.self) }
        (names, readAt) = (read.isEmpty ? [table] : read, now)
    }

    /// Makes the next claim read the parts again (after a failed claim: a part may be gone).
    public mutating func forget() {
        (readAt, forgottenAt) = (nil, .now)
    }

    /// The parts in the order a claim tries them: from `next`, around.
    public var inTurn: [String] {
        guard !names.isEmpty else { return [table] }
        let start = (next % names.count + names.count) % names.count
        return Array(names[start...] + names[..<start])
    }

    /// Takes `other`'s reading (a copy of this one, refreshed by a claim) if it is newer.
    /// `next` stays: the owner moves it.
    public mutating func merge(_ other: TableParts) {
        guard let read = other.readAt, (readAt ?? forgottenAt).map({ $0 < read }) ?? true else { return }
        (names, readAt) = (other.names, read)
    }

    /// Reads the parts if due (`refresh`), then runs `claim` over each part in turn from `next`
    /// until one returns rows, and returns them (none: no part had any to give).
    public mutating func claimInTurn<Row>(on connection: PGConnection, _ claim: (String) throws(PGError) -> [Row]) throws(PGError) -> [Row] {
        try refresh(on: connection)
        for part in inTurn {
            let rows = try claim(part)
            if !rows.isEmpty { return rows }
        }
        return []
    }

    /// `claimInTurn` with one statement: `shipped` on the table itself, or its SQL made by `make`
    /// over a partition, run with `parameters`; each row read by `decode`. Where Citus is
    /// installed, `citus` instead: Citus takes row locks only in a statement for one shard
    /// (docs/SHARDING.md, rule 10), so its `candidates` (the users of the first due rows, read
    /// without locks; `$1` the limit, `parameters`' first) are claimed a shard of users at a
    /// time by `ofShard` (`parameters`, then the shard's users), until one claims rows.
    public mutating func claimInTurn<Row>(
        _ shipped: PGStatement, make: (String) -> String, citus: (candidates: PGStatement, ofShard: PGStatement)? = nil,
        _ parameters: [any PGBindable], on connection: PGConnection, decode: (PGRow) throws(PGError) -> Row
    ) throws(PGError) -> [Row] {
        if let citus, let limit = parameters.first, try BadgeStore.citusInstalled(on: connection) {
            let users = try Set(connection.query(citus.candidates, [limit]).rows.map { row throws(PGError) in try row.decode(0, as: String.self) })
            for group in try BadgeStore.usersByShard(users.sorted(), on: connection) {
                let rows = try connection.query(citus.ofShard, parameters + [group]).rows.map(decode)
                if !rows.isEmpty { return rows }
            }
            return []
        }
        let table = self.table
        return try claimInTurn(on: connection) { part throws(PGError) in
            try connection.query(Self.statement(shipped, over: part, table: table, make: make), parameters).rows.map(decode)
        }
    }

    /// The statements of `claimInTurn`'s `citus` for `table`, named `prefix.claim_candidates` and
    /// `prefix.claim_of_shard`: the users of the first `$1` rows that are `due`, oldest
    /// `next_attempt_at` first, read without locks; then `claim` (the claim's SQL over a part,
    /// with a `pin` on each of its reads) over one shard's users (`$3`).
    static func citusClaim(
        _ prefix: String, table: String, due: String, claim: (String, BadgeSQL.Pin) -> String
    ) -> (candidates: PGStatement, ofShard: PGStatement) {
        (candidates: PGStatement(
            "\(prefix).claim_candidates", "SELECT user_id FROM \(table) WHERE \(due) ORDER BY next_attempt_at LIMIT $1"),
         ofShard: PGStatement("\(prefix).claim_of_shard", claim(table, .users("$3::text[]"))))
    }

    /// The statement `make` over `part`: `shipped` itself for the table, else the same SQL
    /// over the part under a name of its own (a connection prepares each name once).
    public static func statement(_ shipped: PGStatement, over part: String, table: String, make: (String) -> String) -> PGStatement {
        part == table ? shipped : PGStatement("\(shipped.name)@\(part)", make(part), prepared: shipped.prepared)
    }

    static let partsStatement = PGStatement(
        "badges.table_parts", "SELECT relid::regclass::text FROM pg_partition_tree($1::regclass) WHERE isleaf ORDER BY 1")
}

/// The `TableParts` a process's claims share: each claim starts one part further than the one
/// before, takes the parts read by a claim that read them, and reads them again after a failure.
public final class PartsInTurn: Sendable {
    private let parts: Mutex<TableParts>

    /// Parts of `table`, not read yet.
    public init(of table: String) {
        parts = Mutex(TableParts(of: table))
    }

    /// Runs `claim` with a copy of the parts (`next` moved for the claim after it), and keeps
    /// the parts it read.
    public func claim<Row: Sendable>(_ claim: (TableParts) async throws -> (claimed: [Row], parts: TableParts)) async throws -> [Row] {
        let taken = parts.withLock { shared in
            defer { shared.next &+= 1 }
            return shared
        }
        do {
            let (rows, read) = try await claim(taken)
            parts.withLock { $0.merge(read) }
            return rows
        } catch {
            parts.withLock { $0.forget() }
            throw error
        }
    }
}

/// A prune of a per-user table, one chunk at a time: at most `$2` rows whose `before` column
/// is earlier than `$1`, keyed by `key`, skipping rows another transaction holds. Run over
/// each part of the table in turn (`run`), so that on a table partitioned by user each of its
/// statements reads and deletes in one partition; on the shipped schema, the one statement
/// over the table.
struct PerUserPrune: Sendable {
    let shipped: PGStatement
    let table: String
    let key: String
    let before: String

    /// The prune `name` of `table` (names from this code, never input).
    init(_ name: String, table: String, key: String, before: String) {
        (self.table, self.key, self.before) = (table, key, before)
        shipped = PGStatement(name, Self.sql(over: table, key: key, before: before))
    }

    private static func sql(over part: String, key: String, before: String) -> String {
        """
        DELETE FROM \(part)
        WHERE (\(key)) IN (
            SELECT \(key) FROM \(part) WHERE \(before) < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)
        """
    }

    /// The prune's form for a table Citus distributes (docs/SHARDING.md, "What Citus refuses"):
    /// Citus refuses `FOR UPDATE` in a statement over many shards, and runs a subquery with
    /// `LIMIT` first, on its own, then the delete on every shard joined with its rows by key
    /// (as `(key) IN (…)`, Citus's workers were sent an `ltree` comparison they could not
    /// resolve). Without the lock, a row another transaction holds makes the delete wait
    /// instead of passing it by; two prunes at once each delete what the other has not.
    private static func distributedSQL(over table: String, key: String, before: String) -> String {
        let match = key.split(separator: ",").map { column in
            let column = column.trimmingCharacters(in: .whitespaces)
            return "t.\(column) = old.\(column)"
        }
        return """
            DELETE FROM \(table) t
            USING (SELECT \(key) FROM \(table) WHERE \(before) < $1 LIMIT $2) AS old
            WHERE \(match.joined(separator: " AND "))
            """
    }

    /// Deletes every row before `cutoff`, `limit` a statement (each its own transaction unless
    /// the caller opened one), part by part; where Citus is installed, with the statement Citus
    /// runs over all of the table's shards (`distributedSQL`).
    ///
    /// - Returns: how many rows it deleted.
    func run(before cutoff: Date, limit: Int, on connection: PGConnection) throws(PGError) -> Int {
        if try BadgeStore.citusInstalled(on: connection) {
            return try deleteInChunks(
                PGStatement("\(shipped.name)_distributed", Self.distributedSQL(over: table, key: key, before: before)),
                before: cutoff, limit: limit, on: connection)
        }
        var parts = TableParts(of: table)
        try parts.refresh(on: connection)
        var total = 0
        for part in parts.inTurn {
            let statement = TableParts.statement(shipped, over: part, table: table) { [key, before] in
                Self.sql(over: $0, key: key, before: before)
            }
            total += try deleteInChunks(statement, before: cutoff, limit: limit, on: connection)
        }
        return total
    }

    /// Runs `statement` until it deletes fewer than `limit` rows; returns how many it deleted.
    private func deleteInChunks(_ statement: PGStatement, before cutoff: Date, limit: Int, on connection: PGConnection) throws(PGError) -> Int {
        var total = 0
        while true {
            let deleted = try connection.query(statement, [cutoff, limit]).affectedRows
            total += deleted
            if deleted < limit { return total }
        }
    }
}
