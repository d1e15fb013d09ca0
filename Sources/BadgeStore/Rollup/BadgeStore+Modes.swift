public import BadgeCore
import LibPQ

extension BadgeStore {
    /// Stores `modes` as the aggregation modes every recount follows (`aggregation_mode`),
    /// replacing the ones stored before, in one transaction.
    ///
    /// Aggregates already stored keep the modes they were counted with until their user is
    /// recounted: after a change, `reddot verify --repair` recounts every user whose aggregates
    /// differ (DESIGN §2, Aggregation modes).
    ///
    /// - Returns: whether the stored modes changed.
    @discardableResult
    public func storeAggregationModes(_ modes: AggregationModes) async throws -> Bool {
        try await pool.withTransaction { connection throws(PGError) in
            // Ingest processes starting together store one after the other (not a key conflict).
            try connection.query(BadgeSQL.lockModes)
            let stored = try Self.aggregationModes(on: connection)
            guard stored != modes else { return false }
            try connection.query(BadgeSQL.clearModes)
            for (index, entry) in modes.entries.enumerated() {
                try connection.query(BadgeSQL.insertMode, [index + 1, entry.pattern, entry.lquery, entry.lquery + ".*", entry.mode.rawValue])
            }
            return true
        }
    }

    /// The stored aggregation modes, in file order.
    public func aggregationModes() async throws -> AggregationModes {
        try await pool.withConnection { connection throws(PGError) in try Self.aggregationModes(on: connection) }
    }

    /// The stored aggregation modes (a row that no longer parses is left out).
    static func aggregationModes(on connection: PGConnection) throws(PGError) -> AggregationModes {
        var entries: [AggregationModes.Entry] = []
        for row in try connection.query(BadgeSQL.selectModes).rows {
            guard let entry = storedMode(pattern: try row.decode(0, as: String.self), mode: try row.decode(1, as: String.self)) else {
                continue
            }
            entries.append(entry)
        }
        return AggregationModes(entries: entries)
    }

    /// One stored mode; nil for a row that no longer parses.
    static func storedMode(pattern: String, mode: String) -> AggregationModes.Entry? {
        guard let mode = AggregationMode(rawValue: mode) else { return nil }
        return try? AggregationModes.entry(pattern: pattern, mode: mode)
    }

    /// Whether any mode other than sum is stored.
    static func modesDeclared(on connection: PGConnection) throws(PGError) -> Bool {
        try connection.query(BadgeSQL.modesDeclared).rows.first?.decode(0, as: Bool.self) ?? false
    }
}

extension BadgeSQL {
    /// The lock of `storeAggregationModes` (the class of the broadcast lock, key 1).
    static let lockModes = PGStatement("modes.lock", "SELECT pg_advisory_xact_lock(1919247461, 1)")
    static let selectModes = PGStatement("modes.select", "SELECT pattern, mode FROM aggregation_mode ORDER BY position")
    static let clearModes = PGStatement("modes.clear", "DELETE FROM aggregation_mode")
    static let insertMode = PGStatement(
        "modes.insert",
        "INSERT INTO aggregation_mode (position, pattern, query, below, mode) VALUES ($1, $2, $3::lquery, $4::lquery, $5)")
    static let modesDeclared = PGStatement(
        "modes.declared", "SELECT EXISTS (SELECT 1 FROM aggregation_mode WHERE mode <> 'sum')")
}
