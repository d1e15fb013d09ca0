public import BadgeIngest
import BadgeStore
public import LibPQ
public import Logging
public import RdKafka

/// The ingest benchmark behind `reddot bench ingest`: a synthetic workload published to Kafka
/// while one in-process ``IngestService`` consumes it into a scratch database, timed per event
/// from `produce()` to the commit that covers it; then, on the same database, the plain batched
/// upsert of the same rows (the machine's limit) and a breakdown of ingest's own costs.
public struct IngestBenchmark: Sendable {
    /// What to measure, and where.
    public struct Settings: Sendable {
        /// How many events to publish.
        public var events: Int
        /// How many distinct users (the Kafka key) the events are spread over.
        public var users: Int
        /// How many distinct paths per user (`root.bench.p0…`).
        public var paths: Int
        /// Partitions of the topic (the mock cluster's).
        public var partitions: Int32
        /// Ingest's settings (`IngestSettings`: batch size, which is the upsert's too, batch
        /// wait, writers, rollup in ingest); the group and topics are the run's own.
        public var ingest: IngestSettings
        /// At most this many events/s published; nil: as fast as possible.
        public var rate: Double?
        /// The workload generator's seed.
        public var seed: UInt64
        /// This run's id: event ids, the consumer group and table names carry it.
        public var runID: String
        /// Kafka properties for producer and consumer (bootstrap servers included).
        public var kafka: KafkaConfiguration
        /// The topic the events go to (its dead-letter topic is `<topic>.dlq`).
        public var topic: String
        /// Whether the topic lives on the in-process mock cluster (bounded memory: throttle to it).
        public var isMockCluster: Bool
        /// The scratch database, migrated.
        public var database: PGConfiguration
        /// What the events do (`--workload`).
        public var workload: BenchWorkload.Kind = .counter

        /// Settings with every field given.
        public init(
            events: Int, users: Int, paths: Int, partitions: Int32, ingest: IngestSettings, rate: Double?,
            seed: UInt64, runID: String, kafka: KafkaConfiguration, topic: String, isMockCluster: Bool, database: PGConfiguration
        ) {
            self.events = events
            self.users = users
            self.paths = paths
            self.partitions = partitions
            self.ingest = ingest
            self.rate = rate
            self.seed = seed
            self.runID = runID
            self.kafka = kafka
            self.topic = topic
            self.isMockCluster = isMockCluster
            self.database = database
        }
    }

    let settings: Settings
    let logger: Logger

    /// How long ingest may make no progress before the benchmark gives up.
    static let stallSeconds: Double = 60

    /// A benchmark of `settings`, logging to `logger`.
    public init(settings: Settings, logger: Logger) {
        self.settings = settings
        self.logger = logger
    }

    /// The first problem with these option values, as the sentence `reddot bench ingest` prints
    /// (naming the flag); nil when they are all in range.
    public static func problem(
        events: Int, users: Int, paths: Int, partitions: Int32, ingest: IngestSettings, rate: Double?
    ) -> String? {
        guard (1...1_000_000_000).contains(events) else { return "--events takes 1…1000000000" }
        guard users >= 1, users <= Int(Int32.max) else { return "--users takes a number ≥ 1" }
        guard paths >= 1, paths <= 1_000_000 else { return "--paths takes 1…1000000" }
        guard partitions >= 1, partitions <= 10_000 else { return "--partitions takes 1…10000" }
        if let problem = ingest.problem { return problem }
        // The schedule is UInt64(index / rate * 1e9) ns: a tiny rate would trap.
        if let rate, !(rate >= 1 && rate <= 100_000_000) { return "--rate takes 1…100000000 events/s" }
        return nil
    }

    /// Runs the three phases on the scratch database and reports. `brokers`: the real brokers'
    /// list as given, nil for the in-process mock cluster; `postgresql`: the server's version;
    /// `database`: the scratch database's name; `kept`: whether it is kept afterwards.
    ///
    /// - Throws: `BenchFailure` when a phase cannot measure; `PGError`, `KafkaError`.
    public func run(brokers: String?, postgresql: String, database: String, kept: Bool) async throws -> BenchReport {
        let settings = self.settings
        benchProgress("generating \(settings.events) \(settings.workload.rawValue) events over \(settings.users) users × \(settings.paths) paths")
        let workload = try BenchWorkload(
            events: settings.events, users: settings.users, paths: settings.paths, seed: settings.seed, idPrefix: settings.runID, userPrefix: "u",
            kind: settings.workload)
        benchProgress("phase 1: ingest through \(brokers.map { "brokers \($0)" } ?? "the in-process mock cluster"), topic \(settings.topic)")
        let ingest = try await runIngest(workload)
        benchProgress("phase 2: plain batched upsert of the same rows")
        let upsert = try await runUpsert(workload)
        benchProgress("phase 3: decode alone, then ingest's transactions alone")
        let copy = try BenchWorkload(
            events: settings.events, users: settings.users, paths: settings.paths, seed: settings.seed, idPrefix: settings.runID + "-sql",
            userPrefix: "s", kind: settings.workload)
        let breakdown = try await runBreakdown(copy)
        return BenchReport(
            settings: settings, workload: workload, ingest: ingest, upsert: upsert, breakdown: breakdown,
            kafka: BenchKafka.reportName(brokers: brokers), postgresql: postgresql, database: database, kept: kept)
    }

    /// Phase 1 alone, as fast as ingest takes the events (`settings.rate` nil): the rate of
    /// ingest's own part that `bench pipeline` prints beside the pipeline's, in the same run.
    ///
    /// - Returns: events per second from the first publish to the last commit, and how many
    ///   events; nil when not every event was committed and applied (the reason in `problem`).
    public func ingestAlone() async throws -> (rate: Double, events: Int, problem: String?) {
        let settings = self.settings
        benchProgress("ingest alone: \(settings.events) \(settings.workload.rawValue) events over \(settings.users) users, as fast as it goes")
        let workload = try BenchWorkload(
            events: settings.events, users: settings.users, paths: settings.paths, seed: settings.seed, idPrefix: settings.runID,
            userPrefix: "u", kind: settings.workload)
        let measured = try await runIngest(workload)
        let complete = measured.allCommitted && measured.storedOffsetsMatch && measured.appliedEvents == workload.count
        let rate = measured.seconds > 0 ? Double(workload.count) / measured.seconds : 0
        return (rate, workload.count, complete ? nil : "ingest alone applied \(measured.appliedEvents) of \(workload.count) events")
    }

    // MARK: - phase 1: Kafka → ingest → PostgreSQL

    /// Publishes the workload while ingest consumes it; returns the timings and the checks.
    func runIngest(_ workload: BenchWorkload) async throws -> IngestMeasurement {
        let recorder = BenchRecorder(topic: settings.topic, events: workload.count)
        var configuration = IngestConfiguration(kafka: settings.kafka, database: settings.database)
        configuration.topic = settings.topic
        configuration.settings = settings.ingest
        configuration.settings.group = "reddot-bench-\(settings.runID)"
        configuration.settings.deadLetterTopic = settings.topic + ".dlq"
        configuration.settings.instanceID = "none"
        configuration.onCommit = { offsets in recorder.committed(offsets) }
        let group = configuration.group
        let service = IngestService(configuration: configuration, logger: logger)
        let measured = try await withServiceGroup([service], logger: logger, report: { recorder.ingestEnded(error: $0) }) {
            try await publishAndWait(workload, recorder: recorder)
        }
        if let error = recorder.ingestError {
            throw BenchFailure("ingest failed: \(error)")
        }
        return try await verify(measured, group: group, expectedEvents: workload.count)
    }

    private func publishAndWait(_ workload: BenchWorkload, recorder: BenchRecorder) async throws -> IngestMeasurement {
        let producer = try KafkaProducer(configuration: settings.kafka, logger: logger)
        return try await producer.closing { () async throws -> IngestMeasurement in
            let publisher = BenchPublisher(producer: producer, recorder: recorder, stallSeconds: Self.stallSeconds)

            // Warm up: one event per partition, committed, so the group has joined and the
            // database connection is open before the clock starts.
            let warmups = try await publisher.warmUp(
                topic: settings.topic, mockPartitions: settings.isMockCluster ? settings.partitions : nil, runID: settings.runID,
                user: "bench_warmup", path: "root.bench.warmup")

            let (topic, rate) = (settings.topic, settings.rate)
            let window = settings.isMockCluster ? workload.inFlightWindow(partitions: Int(settings.partitions), batchSize: settings.ingest.batchSize) : Int.max
            let baseline = recorder.committedTotal
            let publishTimes: [UInt64] = try await onThread(named: "reddot.bench.producer") {
                try publisher.publish(workload, topic: topic, rate: rate, window: window, baseline: baseline)
            }
            let deliveries = try await publisher.awaitDeliveries()

            // The log-end offset of every partition written, warm-ups included.
            let ends = recorder.logEndOffsets(warmups: warmups, events: workload.count)
            let allCommitted = try await waitForCommits(ends, recorder: recorder)

            // Each event's commit: the first commit of its partition whose next offset is past it.
            let commits = recorder.commitHistory
            var latencies: [UInt64] = []
            latencies.reserveCapacity(workload.count)
            var lastCommit: UInt64 = 0
            var uncovered = 0
            for index in 0..<workload.count {
                let offset = deliveries.offsets[index]
                guard let history = commits[deliveries.partitions[index]],
                    let committedAt = BenchRecorder.firstCommit(after: offset, in: history)
                else {
                    uncovered += 1
                    continue
                }
                lastCommit = max(lastCommit, committedAt)
                latencies.append(committedAt >= publishTimes[index] ? committedAt - publishTimes[index] : 0)
            }
            latencies.sort()
            let firstPublish = publishTimes.first ?? 0
            let elapsed = lastCommit > firstPublish ? Double(lastCommit - firstPublish) / 1e9 : 0
            return IngestMeasurement(
                seconds: elapsed, latencies: LatencySummary(sortedNanoseconds: latencies),
                partitionsWritten: ends.count, logEndOffsets: ends, warmupEvents: warmups.count,
                uncoveredEvents: uncovered, allCommitted: allCommitted, storedOffsetsMatch: false,
                appliedEvents: 0, rejectedRecords: 0)
        }
    }

    /// Waits until every partition's commits reach its log-end offset; false when ingest stalls
    /// (no commit for ``stallSeconds``) or stops first.
    private func waitForCommits(_ ends: [Int32: Int64], recorder: BenchRecorder) async throws -> Bool {
        var lastTotal = recorder.committedTotal
        var lastProgress = BenchClock.now
        while !recorder.committedAll(ends) {
            if recorder.hasIngestEnded { return false }
            let total = recorder.committedTotal
            if total != lastTotal {
                lastTotal = total
                lastProgress = BenchClock.now
            } else if Double(BenchClock.now - lastProgress) / 1e9 > Self.stallSeconds {
                logger.error("ingest made no progress for \(Int(Self.stallSeconds)) s; giving up waiting")
                return false
            }
            try await Task.sleep(for: .milliseconds(5))
        }
        return true
    }

    /// Reads back what the database holds: stored offsets against the log-end offsets, applied
    /// event ids and rejected records.
    private func verify(_ measured: IngestMeasurement, group: String, expectedEvents: Int) async throws -> IngestMeasurement {
        var measured = measured
        let topic = settings.topic
        let partitions = measured.logEndOffsets.keys.sorted().map { TopicPartition(topic: topic, partition: $0) }
        let pool = PGPool(configuration: settings.database, maximumConnections: 1, logger: logger)
        defer { pool.close() }
        let (stored, applied, rejected) = try await pool.withConnection { connection in
            let stored = try IngestStore.storedOffsets(group: group, partitions: partitions, on: connection)
            return (stored, try connection.countAppliedEvents(), try connection.countRejectedRecords())
        }
        measured.storedOffsetsMatch = partitions.allSatisfy { stored[$0] == measured.logEndOffsets[$0.partition] }
        measured.storedOffsets = Dictionary(uniqueKeysWithValues: stored.map { ($0.key.partition, $0.value) })
        measured.appliedEvents = applied - measured.warmupEvents
        measured.rejectedRecords = rejected
        return measured
    }
}

/// What phase 1 measured and read back.
struct IngestMeasurement: Sendable {
    var seconds: Double
    var latencies: LatencySummary
    var partitionsWritten: Int
    var logEndOffsets: [Int32: Int64]
    var warmupEvents: Int
    var uncoveredEvents: Int
    var allCommitted: Bool
    var storedOffsetsMatch: Bool
    var storedOffsets: [Int32: Int64] = [:]
    var appliedEvents: Int
    var rejectedRecords: Int
}
