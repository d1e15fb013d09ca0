import LibPQ
import Logging

/// The server's write-ahead log and checkpoints at one moment (`pg_stat_wal`, PostgreSQL 14 and
/// later, and `pg_stat_bgwriter`). Server-wide: a phase's difference counts every database on
/// the server, which during a bench is the scratch database being measured.
struct WALSample: Sendable {
    var bytes = 0.0
    var records = 0.0
    var fullPageImages = 0.0
    var checkpointsRequested = 0.0
    var checkpointsTimed = 0.0

    /// The counters now; nil where the server has no `pg_stat_wal` (before PostgreSQL 14) or
    /// the role may not read it.
    static func now(on connection: PGConnection) -> WALSample? {
        guard let row = try? connection.query(statement).rows.first else { return nil }
        var sample = WALSample()
        guard let bytes = try? row.decode(0, as: Double.self), let records = try? row.decode(1, as: Double.self),
            let images = try? row.decode(2, as: Double.self), let requested = try? row.decode(3, as: Double.self),
            let timed = try? row.decode(4, as: Double.self)
        else { return nil }
        (sample.bytes, sample.records, sample.fullPageImages) = (bytes, records, images)
        (sample.checkpointsRequested, sample.checkpointsTimed) = (requested, timed)
        return sample
    }

    /// The counters now, read over a connection of its own to `database`.
    static func now(_ database: PGConfiguration, logger: Logger) async -> WALSample? {
        await readOnce(database, logger: logger) { now(on: $0) }
    }

    /// Read as float8: `wal_bytes` is numeric, the others bigint.
    private static let statement = PGStatement(
        "bench.wal_sample",
        """
        SELECT w.wal_bytes::float8, w.wal_records::float8, w.wal_fpi::float8, b.checkpoints_req::float8, b.checkpoints_timed::float8
        FROM pg_stat_wal w, pg_stat_bgwriter b
        """, prepared: false)
}

/// `read` over a connection of its own to `database`, closed afterwards; nil when it cannot
/// connect or `read` finds nothing.
func readOnce<T: Sendable>(_ database: PGConfiguration, logger: Logger, _ read: @escaping @Sendable (PGConnection) -> T?) async -> T? {
    let pool = PGPool(configuration: database, maximumConnections: 1, logger: logger)
    defer { pool.close() }
    return (try? await pool.withConnection { read($0) }) ?? nil
}

/// What a phase wrote to the server's write-ahead log, and the checkpoints meanwhile: what it
/// costs the disk under `pg_wal` and each streaming replica's network, whatever the machine's
/// speed. A checkpoint that `max_wal_size` forced (`checkpointsRequested`) makes the next
/// change of every page write the whole page again (`fullPageImages`).
public struct PhaseWAL: Sendable, Codable {
    public var bytes: Double
    public var records: Double
    public var fullPageImages: Double
    public var checkpointsRequested: Double
    public var checkpointsTimed: Double

    /// From `before` to `after`; nil when either is missing.
    init?(before: WALSample?, after: WALSample?) {
        guard let before, let after else { return nil }
        bytes = after.bytes - before.bytes
        records = after.records - before.records
        fullPageImages = after.fullPageImages - before.fullPageImages
        checkpointsRequested = after.checkpointsRequested - before.checkpointsRequested
        checkpointsTimed = after.checkpointsTimed - before.checkpointsTimed
    }

    /// "B bytes and R records per `unit`, F full-page images per 1,000; checkpoints: Q forced, T
    /// timed", over `count` of them.
    func text(per count: Int, unit: String) -> String {
        let per = Double(max(count, 1))
        return "\(BenchReport.number(bytes / per)) bytes and \(String(format: "%.1f", records / per)) records per \(unit), "
            + "\(BenchReport.number(fullPageImages / per * 1_000)) full-page images per 1,000; "
            + "checkpoints: \(BenchReport.number(checkpointsRequested)) forced, \(BenchReport.number(checkpointsTimed)) timed"
    }

    /// The settings that size the server's memory and WAL, as `BenchScratch.durabilitySettings`
    /// read them, for a report's line.
    static func sizing(_ settings: [String: String]) -> String {
        ["shared_buffers", "max_wal_size", "checkpoint_timeout", "wal_compression"]
            .map { "\($0) \(settings[$0] ?? "?")" }.joined(separator: ", ")
    }

    /// The advice a report adds when `max_wal_size` forced checkpoints.
    static func forcedAdvice(_ forced: Double) -> String {
        "\(BenchReport.number(forced)) checkpoints forced by max_wal_size: after each, the first change of every page "
            + "logs the whole page; raise max_wal_size (deploy/README.md, \"PostgreSQL settings\")"
    }
}
