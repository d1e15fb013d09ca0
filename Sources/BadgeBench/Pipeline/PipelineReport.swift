public import BadgeIngest
import Foundation
import RdKafka

/// What `reddot bench pipeline` prints: ``text``, or the report itself as JSON.
public struct PipelineReport: Encodable, Sendable {
    var build: String
    var date: String
    var processors: Int
    var librdkafka: String
    var postgresql: String
    var postgresqlFsync: String
    var postgresqlSynchronousCommit: String
    var postgresqlFullPageWrites: String
    var postgresqlDurable: Bool
    var kafka: String
    var partitions: Int
    /// The bench producer's `linger.ms` when the bench or `-X` set it; nil for librdkafka's default.
    var producerLingerMilliseconds: String?
    var database: String
    var databaseKept: Bool
    var users: Int
    var paths: Int
    var streams: Int
    var hotUsers: Int
    var hotShare: Double
    var ingestBatchSize: Int
    /// How ingest's batches form (`IngestSettings.batchWaitText`).
    var ingestBatchWait: String
    var ingestWriters: Int
    /// Whether ingest brings a batch's users current itself when it has caught up (`--rollup-in-ingest`).
    var ingestRollsUp: Bool
    /// How many records may wait after a batch of spread users that rolls them up itself (`--rollup-in-ingest-within`).
    var ingestRollUpWithin: Int64
    /// The same run's ingest alone (`IngestBenchmark.ingestAlone`): its rate, over how many
    /// events, and what went wrong if it did not apply them all; nil when not measured.
    public var ingestAloneRate: Double?
    public var ingestAloneEvents = 0
    public var ingestAloneProblem: String?
    var rollupWorkers: Int
    var rollupBatchSize: Int
    var rollupIdleMs: Int
    var servePoolSize: Int
    var offeredRate: Double
    var warmupSeconds: Int
    var measuredSeconds: Int
    var eventsPublished: Int
    var eventsInWindow: Int
    var achievedPublishRate: Double
    var maxBehindScheduleMs: Double
    var eventsVisible: Int
    /// Events of the window whose user has a stream, and how many of them became visible.
    var trackedInWindow: Int
    var visibleInWindow: Int
    var publishToVisibleP50Ms: Double
    var publishToVisibleP99Ms: Double
    var publishToVisibleMaxMs: Double
    var publishToCommitP50Ms: Double
    var publishToCommitP99Ms: Double
    /// The p99 of publish → ingest commit of each second's events, in publish order (ms).
    var publishToCommitP99MsBySecond: [Double]
    var commitToVisibleP50Ms: Double
    var commitToVisibleP99Ms: Double
    var commitToVisibleMaxMs: Double
    var rollupLagSamples: Int
    /// Users of the window's batches brought current by ingest's own transaction, and left to the rollup.
    var usersRolledUpByIngest: Int
    var usersLeftToRollup: Int
    /// Ingest's batches in the window by what sent them: `idle`, `waited`, `full`.
    var ingestBatches: [String: Int]
    var rollupLagP50Ms: Double
    var rollupLagP99Ms: Double
    var rollupLagMaxMs: Double
    var rollupLagUnder100MsPercent: Double
    var feedLagSamples: Int
    var feedLagP50Ms: Double
    var feedLagP99Ms: Double
    var feedLagMaxMs: Double
    var streamSnapshots: Int
    var streamChanges: Int
    var streamBytes: Int
    var streamErrors: Int
    var firstStreamError: String?
    var drainSeconds: Double
    var machineBusyPercent: Double
    var pipelineProcessPercent: Double
    /// librdkafka's mock cluster (the default stand-in for Kafka), part of this process.
    var mockBrokerPercent: Double
    var loadGeneratorPercent: Double
    var producerPercent: Double
    var streamClientPercent: Double
    var postgresqlPercent: Double
    var otherPercent: Double
    /// What the server wrote to its write-ahead log in the window, and the settings that size it.
    var wal: PhaseWAL?
    var postgresqlSizing: String
    /// The rows written to the database in the window, per table (about: see `rows`' line).
    var rows: PhaseRows?
    var appliedEvents: Int
    var rejectedRecords: Int
    var leafCountSum: Int64
    /// Whether every event became visible, was applied once, and nothing failed.
    public var verified: Bool
    /// What the check found, as a sentence.
    public var verification: String

    /// The report of `measurement`, a run of `settings` with ingest's `ingest` settings, the
    /// rollup's `rollupWorkers`, `rollupBatchSize` and `rollupIdleMilliseconds`, the query
    /// service's `poolSize`; `kafka` says which Kafka, `postgresql` the server's version, `kept`
    /// whether the scratch database is kept.
    public init(
        settings: PipelineBenchmark.Settings, measurement: PipelineBenchmark.Measurement, ingest: IngestConfiguration,
        rollupWorkers: Int, rollupBatchSize: Int, rollupIdleMilliseconds: Int, poolSize: Int, kafka: String, postgresql: String,
        kept: Bool
    ) {
        (build, date, processors) = (BenchMachine.build, BenchMachine.date, BenchMachine.processors)
        librdkafka = RdKafkaVersion.text
        self.postgresql = postgresql
        let pg = measurement.postgresqlSettings
        postgresqlFsync = pg["fsync"] ?? "?"
        postgresqlSynchronousCommit = pg["synchronous_commit"] ?? "?"
        postgresqlFullPageWrites = pg["full_page_writes"] ?? "?"
        postgresqlDurable = postgresqlFsync == "on" && postgresqlSynchronousCommit == "on"
        self.kafka = kafka
        partitions = Int(settings.partitions)
        producerLingerMilliseconds = settings.producerLinger(settings.producerConfiguration)
        database = settings.databaseName
        databaseKept = kept
        users = settings.users
        paths = settings.paths
        streams = settings.streams
        hotUsers = settings.hotUsers
        hotShare = settings.hotShare
        ingestBatchSize = ingest.settings.batchSize
        ingestBatchWait = ingest.settings.batchWaitText
        ingestWriters = ingest.settings.writers
        ingestRollsUp = ingest.settings.rollUp
        ingestRollUpWithin = ingest.settings.rollUpWithinRecords
        self.rollupWorkers = rollupWorkers
        self.rollupBatchSize = rollupBatchSize
        rollupIdleMs = rollupIdleMilliseconds
        servePoolSize = poolSize
        offeredRate = settings.rate
        warmupSeconds = settings.warmup
        measuredSeconds = settings.seconds
        eventsPublished = measurement.totalEvents
        eventsInWindow = measurement.publishedInWindow
        achievedPublishRate = measurement.windowPublishSeconds > 0 ? Double(max(0, measurement.publishedInWindow - 1)) / measurement.windowPublishSeconds : 0
        maxBehindScheduleMs = measurement.maxBehindScheduleMilliseconds
        eventsVisible = measurement.visibleEvents
        visibleInWindow = measurement.visibleInWindow
        trackedInWindow = measurement.trackedInWindow
        publishToVisibleP50Ms = measurement.toVisible.p50Milliseconds
        publishToVisibleP99Ms = measurement.toVisible.p99Milliseconds
        publishToVisibleMaxMs = measurement.toVisible.maxMilliseconds
        publishToCommitP50Ms = measurement.toCommit.p50Milliseconds
        publishToCommitP99Ms = measurement.toCommit.p99Milliseconds
        publishToCommitP99MsBySecond = measurement.toCommitP99BySecond
        commitToVisibleP50Ms = measurement.commitToVisible.p50Milliseconds
        commitToVisibleP99Ms = measurement.commitToVisible.p99Milliseconds
        commitToVisibleMaxMs = measurement.commitToVisible.maxMilliseconds
        rollupLagSamples = measurement.rollupLagSamples
        usersRolledUpByIngest = measurement.usersRolledUpByIngest
        usersLeftToRollup = measurement.usersLeftToRollup
        ingestBatches = measurement.ingestBatches
        rollupLagP50Ms = measurement.rollupLag.p50Milliseconds
        rollupLagP99Ms = measurement.rollupLag.p99Milliseconds
        rollupLagMaxMs = measurement.rollupLag.maxMilliseconds
        rollupLagUnder100MsPercent = measurement.rollupLagUnder100Percent
        feedLagSamples = measurement.feedLagSamples
        feedLagP50Ms = measurement.feedLag.p50Milliseconds
        feedLagP99Ms = measurement.feedLag.p99Milliseconds
        feedLagMaxMs = measurement.feedLag.maxMilliseconds
        streamSnapshots = measurement.streams.snapshots
        streamChanges = measurement.streams.changes
        streamBytes = measurement.streams.bytes
        streamErrors = measurement.streams.errors
        firstStreamError = measurement.streams.firstError
        drainSeconds = measurement.drainSeconds
        let cpu = measurement.cpu
        let total = cpu.machineTotalSeconds > 0 ? cpu.machineTotalSeconds : 1
        machineBusyPercent = 100 * cpu.machineBusySeconds / total
        pipelineProcessPercent = 100 * cpu.serviceSeconds / total
        mockBrokerPercent = 100 * cpu.mockBrokerSeconds / total
        loadGeneratorPercent = 100 * cpu.clientSeconds / total
        producerPercent = 100 * measurement.producerCPUSeconds / total
        streamClientPercent = 100 * measurement.streamClientCPUSeconds / total
        postgresqlPercent = 100 * cpu.databaseSeconds / total
        otherPercent = 100 * cpu.otherSeconds / total
        wal = measurement.wal
        rows = measurement.rows
        postgresqlSizing = PhaseWAL.sizing(pg)
        appliedEvents = measurement.appliedEvents
        rejectedRecords = measurement.rejectedRecords
        leafCountSum = measurement.leafCountSum

        let problems = Self.problems(measurement, drainSeconds: settings.drainSeconds)
        verified = problems.isEmpty
        verification =
            problems.isEmpty
            ? "every event visible over SSE; \(measurement.appliedEvents) event ids applied, 0 rejected; leaf counts sum to \(measurement.leafCountSum); 0 stream errors; "
                + "reddot verify: \(measurement.verifiedUsers) users, 0 mismatches (\(measurement.leftDirty) users were still dirty when the services stopped)"
            : problems.joined(separator: "; ")
    }

    /// What went wrong in `measurement`, one sentence each: events never visible (within
    /// `drainSeconds`), never committed, not applied once, rejected; wrong leaf counts; stream
    /// errors.
    static func problems(_ measurement: PipelineBenchmark.Measurement, drainSeconds: Int) -> [String] {
        var problems: [String] = []
        if measurement.visibleEvents < measurement.trackedEvents {
            problems.append(
                "\(measurement.trackedEvents - measurement.visibleEvents) of \(measurement.trackedEvents) events of streamed users never became visible "
                    + "within \(drainSeconds) s of the last publish")
        }
        if measurement.uncommittedEvents > 0 { problems.append("\(measurement.uncommittedEvents) events of the window never covered by an ingest commit") }
        if measurement.appliedEvents != measurement.totalEvents {
            problems.append("\(measurement.appliedEvents) of \(measurement.totalEvents) event ids applied")
        }
        if measurement.rejectedRecords > 0 { problems.append("\(measurement.rejectedRecords) records rejected") }
        if measurement.verifyMismatches > 0 {
            problems.append("reddot verify found \(measurement.verifyMismatches) mismatched aggregates over \(measurement.verifiedUsers) users")
        }
        if measurement.leafCountSum != Int64(measurement.totalEvents) {
            problems.append("the leaves' counts sum to \(measurement.leafCountSum), not \(measurement.totalEvents)")
        }
        if measurement.streams.errors > 0 {
            problems.append("\(measurement.streams.errors) stream errors (first: \(measurement.streams.firstError ?? "?"))")
        }
        return problems
    }

    /// The report as the lines the command prints.
    public var text: String {
        let number = BenchReport.number
        func ms(_ value: Double) -> String { String(format: "%.1f ms", value) }
        func percent(_ value: Double) -> String { String(format: "%.0f%%", value) }
        let batches = ["idle", "waited", "full"].map { "\(number(Double(ingestBatches[$0] ?? 0))) \($0)" }.joined(separator: ", ")
        let batchesText = "ingest's batches \(batches) (reddot_ingest_batches_total)"
        let durability =
            postgresqlDurable
            ? "durable: fsync on, synchronous_commit on"
            : "RELAXED: fsync \(postgresqlFsync), synchronous_commit \(postgresqlSynchronousCommit)"
        let sustained = achievedPublishRate >= 0.99 * offeredRate ? "" : ": the offered rate was NOT sustained"
        let behind = " (at most \(ms(maxBehindScheduleMs)) behind schedule\(sustained))"
        return """
            reddot bench pipeline: \(build) build, \(date), \(processors) CPUs, PostgreSQL \(postgresql) (\(durability)), librdkafka \(librdkafka)
            workload:   incr by 1 over \(users) users × \(paths) paths (root.bench.p0…), keyed by user\(hotUsers > 0 ? String(format: ", %.0f%% of them to the first %d users", hotShare * 100, hotUsers) : ""); \(streams == users ? "\(streams) SSE streams, one per user" : "SSE streams for \(streams) of the users, one each")
            kafka:      \(kafka), \(partitions) partitions\(producerLingerMilliseconds.map { "; the bench's producer lingers \($0) ms" } ?? "")
            services:   in this process, as reddot run: ingest (batch \(ingestBatchSize), \(ingestBatchWait), \(ingestWriters) writers, \(ingestRollsUp ? "rolls up its users when caught up, or within \(ingestRollUpWithin) records if spread" : "--no-rollup-in-ingest")), rollup (\(rollupWorkers) workers, batch \(rollupBatchSize), idle \(rollupIdleMs) ms), serve (127.0.0.1, pool \(servePoolSize))
            load:       open loop, \(number(offeredRate)) events/s offered; \(warmupSeconds) s warm-up + \(measuredSeconds) s measured; \(number(Double(eventsInWindow))) events in the window published at \(number(achievedPublishRate)) events/s\(behind)
            alone:      ingest alone \(ingestAloneRate.map { "\(number($0)) events/s: \(number(Double(ingestAloneEvents))) incr events over the same users and paths, as fast as ingest takes them, without the rollup (--no-rollup-in-ingest), in a scratch database of their own, this run\(ingestAloneProblem.map { " (NOT complete: \($0))" } ?? "")" } ?? "not measured (--no-ingest-alone)")
            visible:    publish → visible over SSE p50 \(ms(publishToVisibleP50Ms)), p99 \(ms(publishToVisibleP99Ms)), max \(ms(publishToVisibleMaxMs)) (\(number(Double(visibleInWindow))) of \(number(Double(trackedInWindow))) events\(trackedInWindow == eventsInWindow ? "" : " of streamed users"))
            parts:      publish → ingest commit p50 \(ms(publishToCommitP50Ms)), p99 \(ms(publishToCommitP99Ms)); ingest commit → visible p50 \(ms(commitToVisibleP50Ms)), p99 \(ms(commitToVisibleP99Ms)), max \(ms(commitToVisibleMaxMs)); \(batchesText)
            by second:  publish → ingest commit p99 of each second's events, in publish order: \(publishToCommitP99MsBySecond.map { String(format: "%.0f", $0) }.joined(separator: ", ")) ms
            rollup:     \(number(Double(usersRolledUpByIngest))) users brought current by their batch's own transaction, \(number(Double(usersLeftToRollup))) left to the rollup (reddot_ingest_users_total, the window's batches)
            rollup lag: dirty mark → aggregates committed (reddot_rollup_lag_seconds, \(number(Double(rollupLagSamples))) samples in the window)\(rollupLagSamples == 0 ? ": none, no user of the window waited for the rollup" : " p50 \(ms(rollupLagP50Ms)), p99 \(ms(rollupLagP99Ms)), max \(ms(rollupLagMaxMs)); \(String(format: "%.1f", rollupLagUnder100MsPercent))% under 100 ms")
            feed:       \(feedLagSamples == 0 ? "no records published in the window (change feed off?)" : "visible → reddot.changes: the version's transaction → Kafka acknowledged (reddot_feed_lag_seconds, \(number(Double(feedLagSamples))) records in the window) p50 \(ms(feedLagP50Ms)), p99 \(ms(feedLagP99Ms)), max \(ms(feedLagMaxMs))")
            streams:    \(number(Double(streamChanges))) change and \(number(Double(streamSnapshots))) snapshot events, \(number(Double(streamBytes))) bytes; \(streamErrors) errors\(firstStreamError.map { " (first: \($0))" } ?? ""); drain after the last publish \(BenchReport.seconds(drainSeconds))
            CPU:        machine \(percent(machineBusyPercent)) busy in the window: RedDot's services \(percent(pipelineProcessPercent)) and their PostgreSQL backends \(percent(postgresqlPercent)); \(mockBrokerPercent > 0 ? "the stand-in Kafka broker (librdkafka's mock cluster, in this process) \(percent(mockBrokerPercent)); " : "")the bench's producer \(percent(producerPercent)) and SSE client \(percent(streamClientPercent)); other \(percent(otherPercent)) (percent of all cores)
            WAL:        \(wal.map { $0.text(per: eventsInWindow, unit: "event in the window") + " (the whole server's; \(postgresqlSizing))" + ($0.checkpointsRequested > 0 ? "\n            " + PhaseWAL.forcedAdvice($0.checkpointsRequested) : "") } ?? "not read (the server has no pg_stat_wal before PostgreSQL 14, or this role may not read it)")
            rows:       \(rows.map { "about " + $0.text(per: eventsInWindow, unit: "event in the window") } ?? "not read (pg_stat_user_tables)")
            target:     rollup lag p99 < 100 ms: \(rollupLagSamples == 0 ? (usersRolledUpByIngest > 0 ? "yes (no user waited for the rollup)" : "not measured") : rollupLagP99Ms < 100 ? "yes" : "NO")
            verified:   \(verified ? "yes, " : "NO: ")\(verification)
            database:   \(database) (\(databaseKept ? "kept" : "dropped"))
            """
    }
}
