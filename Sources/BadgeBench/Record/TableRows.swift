import Foundation
import LibPQ
import Logging

/// The rows written so far to each table of one database (`pg_stat_user_tables`; a partition
/// counts toward its partitioned table), with each table's number of indexes. PostgreSQL counts
/// a backend's writes in shared memory when it is idle or ends, at most once a second: read it
/// once the phase's backends have ended (`BacklogBenchmark.settledRows`).
struct TableRowsSample: Sendable {
    struct Counts: Sendable {
        var inserted = 0.0
        var updated = 0.0
        var hotUpdated = 0.0
        var deleted = 0.0
        var indexes = 0.0
    }

    var tables: [String: Counts] = [:]

    /// The counters now; nil where the statistics cannot be read.
    static func now(on connection: PGConnection) -> TableRowsSample? {
        guard let rows = try? connection.query(statement).rows else { return nil }
        var sample = TableRowsSample()
        for row in rows {
            guard let name = try? row.decode(0, as: String.self), let inserted = try? row.decode(1, as: Double.self),
                let updated = try? row.decode(2, as: Double.self), let hot = try? row.decode(3, as: Double.self),
                let deleted = try? row.decode(4, as: Double.self), let indexes = try? row.decode(5, as: Double.self)
            else { return nil }
            sample.tables[name] = Counts(inserted: inserted, updated: updated, hotUpdated: hot, deleted: deleted, indexes: indexes)
        }
        return sample
    }

    /// The counters now, read over a connection of its own to `database`.
    static func now(_ database: PGConfiguration, logger: Logger) async -> TableRowsSample? {
        await readOnce(database, logger: logger) { now(on: $0) }
    }

    /// Per table (a partition under its root), the rows inserted, updated, updated in place
    /// (HOT: no new index entry) and deleted, and its indexes that take an entry per row (a
    /// partition's own, the most of any partition; not BRIN, which summarizes block ranges).
    private static let statement = PGStatement(
        "bench.table_rows",
        """
        SELECT coalesce(pg_partition_root(s.relid), s.relid)::regclass::text,
               sum(s.n_tup_ins)::float8, sum(s.n_tup_upd)::float8, sum(s.n_tup_hot_upd)::float8, sum(s.n_tup_del)::float8,
               max((SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
                    WHERE i.indrelid = s.relid AND a.amname <> 'brin'))::float8
        FROM pg_stat_user_tables s
        GROUP BY 1
        """, prepared: false)
}

/// The rows a phase wrote, per table: where the database's work per event goes, whatever the
/// machine's speed. Index entries are counted as PostgreSQL makes them: one per index for each
/// row inserted and each update that is not HOT (a partial index that leaves the row out makes
/// fewer; a BRIN index, none per row, is not counted).
public struct PhaseRows: Sendable, Codable {
    public struct Table: Sendable, Codable {
        public var inserted: Double
        public var updated: Double
        public var hotUpdated: Double
        public var deleted: Double
        public var indexEntries: Double

        var written: Double { inserted + updated + deleted }
    }

    public var tables: [String: Table]

    /// From `before` to `after`, the tables that changed; nil when either is missing.
    init?(before: TableRowsSample?, after: TableRowsSample?) {
        guard let before, let after else { return nil }
        var tables: [String: Table] = [:]
        for (name, now) in after.tables {
            let then = before.tables[name] ?? .init()
            let table = Table(
                inserted: now.inserted - then.inserted, updated: now.updated - then.updated, hotUpdated: now.hotUpdated - then.hotUpdated,
                deleted: now.deleted - then.deleted,
                indexEntries: ((now.inserted - then.inserted) + (now.updated - then.updated) - (now.hotUpdated - then.hotUpdated)) * now.indexes)
            if table.written > 0 { tables[name] = table }
        }
        self.tables = tables
    }

    /// "W rows written per `unit` (I inserted, U updated (H% in place), D deleted), E index
    /// entries; most: table i/u/d, …", over `count`, naming the `most` tables that wrote most.
    func text(per count: Int, unit: String, most: Int = 6) -> String {
        let per = Double(max(count, 1))
        let all = tables.values
        func sum(_ value: (Table) -> Double) -> Double { all.reduce(0) { $0 + value($1) } }
        let updated = sum(\.updated)
        let hot = updated > 0 ? String(format: " (%.0f%% in place)", sum(\.hotUpdated) / updated * 100) : ""
        let f = { (value: Double) in String(format: "%.2f", value / per) }
        // Tables under 0.01 rows per unit (the offsets, the feed's lease) are left out.
        let top = tables.filter { $0.value.written / per >= 0.01 }.sorted { ($0.value.written, $1.key) > ($1.value.written, $0.key) }.prefix(most)
            .map { "\($0.key) \(f($0.value.inserted))/\(f($0.value.updated))/\(f($0.value.deleted))" }
        return "\(f(sum(\.written))) rows written per \(unit) (\(f(sum(\.inserted))) inserted, \(f(updated)) updated\(hot), "
            + "\(f(sum(\.deleted))) deleted), \(f(sum(\.indexEntries))) index entries; most (inserted/updated/deleted): "
            + top.joined(separator: ", ")
    }
}
