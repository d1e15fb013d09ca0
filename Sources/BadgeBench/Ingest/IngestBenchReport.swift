import Foundation
import RdKafka

/// What `reddot bench ingest` prints: ``text``, or the report itself as JSON.
public struct BenchReport: Encodable, Sendable {
    var build: String
    var date: String
    var processors: Int
    var librdkafka: String
    var postgresql: String
    var kafka: String
    var database: String
    var databaseKept: Bool
    var events: Int
    var users: Int
    var paths: Int
    var partitions: Int
    var workload: String
    var incrementEvents: Int
    var setEvents: Int
    var batchSize: Int
    /// How ingest's batches form (`IngestSettings.batchWaitText`).
    var batchWait: String
    var writers: Int
    var rateLimit: Double?
    var ingestSeconds: Double
    var ingestEventsPerSecond: Double
    var latencyP50Ms: Double
    var latencyP99Ms: Double
    var latencyMaxMs: Double
    var upsertRows: Int
    var upsertDistinctRows: Int
    var upsertSeconds: Double
    var upsertRowsPerSecond: Double
    var ingestPercentOfUpsert: Double
    var decodeEventsPerSecond: Double
    var ingestTransactionEventsPerSecond: Double
    /// Whether every event was committed and applied.
    public var verified: Bool
    /// What the check found, as a sentence.
    public var verification: String

    init(
        settings: IngestBenchmark.Settings, workload: BenchWorkload, ingest: IngestMeasurement, upsert: UpsertMeasurement,
        breakdown: BreakdownMeasurement, kafka: String, postgresql: String, database: String, kept: Bool
    ) {
        (build, date, processors) = (BenchMachine.build, BenchMachine.date, BenchMachine.processors)
        librdkafka = RdKafkaVersion.text
        self.postgresql = postgresql
        self.kafka = kafka
        self.database = database
        databaseKept = kept
        events = settings.events
        users = settings.users
        paths = settings.paths
        partitions = ingest.partitionsWritten
        self.workload = workload.kind.rawValue
        incrementEvents = workload.incrementCount
        setEvents = workload.count - workload.incrementCount
        batchSize = settings.ingest.batchSize
        batchWait = settings.ingest.batchWaitText
        writers = settings.ingest.writers
        rateLimit = settings.rate
        ingestSeconds = ingest.seconds
        ingestEventsPerSecond = Self.perSecond(settings.events, ingest.seconds)
        latencyP50Ms = ingest.latencies.p50Milliseconds
        latencyP99Ms = ingest.latencies.p99Milliseconds
        latencyMaxMs = ingest.latencies.maxMilliseconds
        upsertRows = upsert.rows
        upsertDistinctRows = upsert.distinctRows
        upsertSeconds = upsert.seconds
        upsertRowsPerSecond = Self.perSecond(upsert.rows, upsert.seconds)
        ingestPercentOfUpsert = upsertRowsPerSecond > 0 ? 100 * ingestEventsPerSecond / upsertRowsPerSecond : 0
        decodeEventsPerSecond = Self.perSecond(breakdown.events, breakdown.decodeSeconds)
        ingestTransactionEventsPerSecond = Self.perSecond(breakdown.events, breakdown.transactionSeconds)

        var problems: [String] = []
        if !ingest.allCommitted { problems.append("ingest stalled or stopped before committing every partition's log end") }
        if !ingest.storedOffsetsMatch {
            let lines = ingest.logEndOffsets.keys.sorted().compactMap { partition -> String? in
                let end = ingest.logEndOffsets[partition] ?? 0
                let stored = ingest.storedOffsets[partition]
                guard stored != end else { return nil }
                return "partition \(partition): stored \(stored.map(String.init) ?? "none"), log end \(end)"
            }
            problems.append("stored offsets differ from the log-end offsets (\(lines.joined(separator: "; ")))")
        }
        if ingest.appliedEvents != settings.events {
            problems.append("\(ingest.appliedEvents) of \(settings.events) event ids applied (\(settings.events - ingest.appliedEvents) lost)")
        }
        if ingest.rejectedRecords > 0 { problems.append("\(ingest.rejectedRecords) records rejected") }
        if ingest.uncoveredEvents > 0 { problems.append("\(ingest.uncoveredEvents) events never covered by a commit") }
        verified = problems.isEmpty
        verification =
            problems.isEmpty
            ? "every event committed: the stored offsets equal the log-end offsets of all \(ingest.partitionsWritten) partitions, "
                + "\(ingest.appliedEvents) event ids applied, 0 rejected"
            : problems.joined(separator: "; ")
    }

    static func perSecond(_ count: Int, _ seconds: Double) -> Double {
        seconds > 0 ? Double(count) / seconds : 0
    }

    /// The report as the lines the command prints.
    public var text: String {
        let rateText = rateLimit.map { "\(Self.number($0)) events/s" } ?? "unthrottled"
        let percent = String(format: "%.1f", ingestPercentOfUpsert)
        let distinct = upsertDistinctRows == upsertRows ? "" : " (\(upsertDistinctRows) distinct within their batches)"
        return """
            reddot bench ingest: \(build) build, \(date), \(processors) CPUs, PostgreSQL \(postgresql), librdkafka \(librdkafka)
            workload:   \(events) events, \(workload) (\(incrementEvents) \(workload == "items" ? "add" : "incr"), \(setEvents) \(workload == "items" ? "remove" : "set")) over \(users) users × \(paths) paths, keyed by user
            kafka:      \(kafka), \(partitions) partitions; batch size \(batchSize), batch \(batchWait), \(writers) writers; rate \(rateText)
            ingest:     \(Self.number(ingestEventsPerSecond)) events/s end to end (\(Self.seconds(ingestSeconds)), first publish → last commit)
            latency:    publish → commit p50 \(Self.milliseconds(latencyP50Ms)), p99 \(Self.milliseconds(latencyP99Ms)), max \(Self.milliseconds(latencyMaxMs))
            upsert:     \(Self.number(upsertRowsPerSecond)) rows/s (\(upsertRows) rows\(distinct) in \(Self.seconds(upsertSeconds)); one writer, batches of \(batchSize))
            ratio:      ingest = \(percent)% of the batched upsert
            breakdown:  decode alone \(Self.number(decodeEventsPerSecond)) events/s (one thread); ingest transactions alone \(Self.number(ingestTransactionEventsPerSecond)) events/s (one writer, no Kafka)
            verified:   \(verified ? "yes, " : "NO: ")\(verification)
            database:   \(database) (\(databaseKept ? "kept" : "dropped"))
            """
    }

    static func number(_ value: Double) -> String {
        let rounded = Int(value.rounded())
        var digits = String(rounded)
        var index = digits.count - 3
        while index > 0 {
            digits.insert(",", at: digits.index(digits.startIndex, offsetBy: index))
            index -= 3
        }
        return digits
    }

    static func seconds(_ value: Double) -> String { String(format: "%.2f s", value) }
    static func milliseconds(_ value: Double) -> String { String(format: "%.1f ms", value) }
}
