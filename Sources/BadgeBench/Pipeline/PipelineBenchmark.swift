import BadgeAPI
public import BadgeIngest
import BadgeRollup
import BadgeStore
import Foundation
public import LibPQ
public import Logging
public import RdKafka
public import ServiceLifecycle

/// The pipeline benchmark behind `reddot bench pipeline`: an open-loop producer, ingest, rollup
/// and the query service in this process, and one SSE stream per user; each event is timed from
/// its `produce()` call to the stream event that shows it.
public struct PipelineBenchmark: Sendable {
    /// What to measure, and where.
    public struct Settings: Sendable {
        /// Events published per second, on schedule (open loop).
        public var rate: Double
        /// Seconds of load measured, after the warm-up.
        public var seconds: Int
        /// Seconds of the same load before the measured window.
        public var warmup: Int
        /// Users the events are spread over.
        public var users: Int
        /// Users u0 … u(streams - 1) have a stream open.
        public var streams: Int
        /// Users u0 … u(hotUsers - 1) get `hotShare` of the events (0: every user alike).
        public var hotUsers: Int = 0
        /// The share of the events that goes to the hot users (the rest spreads over all users).
        public var hotShare: Double = 0
        /// Paths per user (`root.bench.p0…`).
        public var paths: Int
        /// Partitions of the topic (the mock cluster's).
        public var partitions: Int32
        /// How long to wait, after the last publish, for every event to become visible.
        public var drainSeconds: Int
        /// The seed of the events' users and paths.
        public var seed: UInt64
        /// This run's id: event ids carry it.
        public var runID: String
        /// Kafka properties for the producer (bootstrap servers included).
        public var kafka: KafkaConfiguration
        /// The topic the events go to.
        public var topic: String
        /// Whether the topic lives on the in-process mock cluster (bounded memory: throttle to it).
        public var isMockCluster: Bool
        /// The scratch database, migrated.
        public var database: PGConfiguration
        /// The scratch database's name (its backends' process titles show it).
        public var databaseName: String

        /// How long the bench's producer lets a batch fill on the mock cluster unless `-X` or
        /// `--kafka-config` gives `linger.ms`. The mock finds each fetch's offset by walking its
        /// partition's log from the start, one message set at a time (librdkafka's
        /// `rd_kafka_mock_msgset_find`), so its CPU grows with how many sets the log holds: at
        /// 10,000 events/s over 8 partitions, librdkafka's default of 5 ms made sets of about six
        /// events and the mock took a fifth of this 2-core machine, 20 ms a twentieth
        /// (BENCHMARKS.md). Real brokers index their logs; with `--brokers` the producer keeps
        /// librdkafka's default. The wait counts in publish → visible, which starts at `produce()`.
        public static let mockLingerMilliseconds = "20"

        /// The properties of the bench's producer: ``kafka``, with `linger.ms` at
        /// ``mockLingerMilliseconds`` on the mock cluster unless it or its alias
        /// `queue.buffering.max.ms` is given.
        public var producerConfiguration: KafkaConfiguration {
            var configuration = kafka
            if isMockCluster, producerLinger(configuration) == nil { configuration.set("linger.ms", Self.mockLingerMilliseconds) }
            return configuration
        }

        /// The producer's linger in milliseconds as set in `configuration` (either name), nil
        /// when librdkafka's default applies.
        func producerLinger(_ configuration: KafkaConfiguration) -> String? {
            configuration.properties.last { $0.key == "linger.ms" || $0.key == "queue.buffering.max.ms" }?.value
        }

        /// Events scheduled in all, warm-up included.
        var totalEvents: Int { Int((rate * Double(warmup + seconds)).rounded(.up)) }
        /// Events scheduled before the measured window.
        var warmupEvents: Int { Int((rate * Double(warmup)).rounded(.up)) }

        /// Settings with every field given.
        public init(
            rate: Double, seconds: Int, warmup: Int, users: Int, streams: Int, paths: Int, partitions: Int32, drainSeconds: Int,
            seed: UInt64, runID: String, kafka: KafkaConfiguration, topic: String, isMockCluster: Bool, database: PGConfiguration,
            databaseName: String
        ) {
            self.rate = rate
            self.seconds = seconds
            self.warmup = warmup
            self.users = users
            self.streams = streams
            self.paths = paths
            self.partitions = partitions
            self.drainSeconds = drainSeconds
            self.seed = seed
            self.runID = runID
            self.kafka = kafka
            self.topic = topic
            self.isMockCluster = isMockCluster
            self.database = database
            self.databaseName = databaseName
        }
    }

    let settings: Settings
    let logger: Logger

    /// How long the producer may wait on the mock broker's window with no commit before giving up.
    static let stallSeconds: Double = 60
    static let warmupUser = "warmup"

    static func userName(_ user: Int) -> String { "u\(user)" }

    /// The most users `--users` takes: users come into being with their first event.
    static let maximumUsers = 10_000_000

    /// A benchmark of `settings`, logging to `logger`.
    public init(settings: Settings, logger: Logger) {
        self.settings = settings
        self.logger = logger
    }

    /// The first problem with these option values, as the sentence `reddot bench pipeline`
    /// prints (naming the flag); nil when they are all in range.
    public static func problem(
        rate: Double, seconds: Int, warmup: Int, users: Int, streams: Int?, paths: Int, partitions: Int32, poolSize: Int, drainSeconds: Int,
        hotUsers: Int = 0, hotShare: Double? = nil
    ) -> String? {
        guard rate > 0, rate <= 1_000_000 else { return "--rate takes a number of events/s in (0, 1000000]" }
        guard (1...3_600).contains(seconds) else { return "--seconds takes 1…3600" }
        guard (0...600).contains(warmup) else { return "--warmup takes 0…600" }
        guard (1...maximumUsers).contains(users) else { return "--users takes 1…10000000" }
        if let streams, !(1...min(users, 100_000)).contains(streams) { return "--streams takes 1…--users (at most 100000)" }
        if streams == nil, users > 100_000 { return "--users above 100000 needs --streams (at most 100000 streams)" }
        guard (0...users).contains(hotUsers) else { return "--hot-users takes 0…--users" }
        if let hotShare {
            guard hotShare >= 0, hotShare <= 1 else { return "--hot-share takes a fraction in [0, 1]" }
            guard hotUsers > 0 else { return "--hot-share needs --hot-users" }
        }
        guard (1...1_000).contains(paths) else { return "--paths takes 1…1000" }
        guard partitions >= 1, partitions <= 10_000 else { return "--partitions takes 1…10000" }
        guard (1...256).contains(poolSize) else { return "--pool-size takes 1…256" }
        guard (1...3_600).contains(drainSeconds) else { return "--drain-seconds takes 1…3600" }
        guard rate * Double(seconds) >= 1 else { return "--rate × --seconds must come to at least one event" }
        guard rate * Double(seconds + warmup) <= 50_000_000 else { return "--rate × (--warmup + --seconds) must stay under 50,000,000 events" }
        return nil
    }

    /// What one run measured and read back (``PipelineReport`` shows it).
    public struct Measurement: Sendable {
        var postgresqlSettings: [String: String]
        var publishedInWindow = 0
        var trackedInWindow = 0
        var windowPublishSeconds = 0.0
        var maxBehindScheduleMilliseconds = 0.0
        var visibleInWindow = 0
        var toVisible = LatencySummary(sortedNanoseconds: [])
        var toCommit = LatencySummary(sortedNanoseconds: [])
        var commitToVisible = LatencySummary(sortedNanoseconds: [])
        var rollupLag = LatencySummary(sortedNanoseconds: [])
        var rollupLagSamples = 0
        /// Users of ingest's batches in the window brought current by the batch's own
        /// transaction, and left to the rollup (`reddot_ingest_users_total`).
        var usersRolledUpByIngest = 0
        var usersLeftToRollup = 0
        /// Ingest's batches in the window by what sent them (`reddot_ingest_batches_total`).
        var ingestBatches: [String: Int] = [:]
        var rollupLagUnder100Percent = 0.0
        /// The change feed's lag (the change's transaction → Kafka acknowledged), when it ran.
        var feedLag = LatencySummary(sortedNanoseconds: [])
        var feedLagSamples = 0
        var totalEvents = 0
        /// Events of users with a stream, and how many of them became visible.
        var trackedEvents = 0
        var visibleEvents = 0
        var uncommittedEvents = 0
        var streams: PipelineStreamClient.Totals
        var cpu: CPUUsage
        /// CPU of the load generator's two threads in the window (part of `cpu.clientSeconds`).
        var producerCPUSeconds: Double
        var streamClientCPUSeconds: Double
        /// The p99 of publish → ingest commit of the events published in each second of the
        /// window, in milliseconds (0 for a second with none committed).
        var toCommitP99BySecond: [Double] = []
        /// What the server wrote to its write-ahead log in the window (nil where it does not say).
        var wal: PhaseWAL? = nil
        /// The rows the services wrote to the database in the window, per table (about: a busy
        /// backend publishes its counts about once a second).
        var rows: PhaseRows? = nil
        var appliedEvents = 0
        var rejectedRecords = 0
        var leafCountSum: Int64 = 0
        var drainSeconds = 0.0
        /// Users still dirty when the services stopped (rolled up before `reddot verify`'s check).
        var leftDirty = 0
        /// `reddot verify` over the scratch database at the end: users checked, mismatches.
        var verifiedUsers = 0
        var verifyMismatches = 0
    }

    /// Starts the services (`ingest`'s, the rollup's from `rollup`, the query service's from
    /// `serve`, which gets the callback for its port), opens the streams with tokens signed by
    /// `secret`, runs the load and measures; the rollup lag comes from `lagCapture`.
    ///
    /// - Throws: `BenchFailure` when the run cannot measure; `PGError`, `KafkaError`.
    public func run(
        ingest: IngestConfiguration, rollup: () throws -> [any Service],
        serve: (@escaping @Sendable (Int) -> Void) async throws -> (application: any Service, services: [any Service]),
        secret: String, lagCapture: RollupLagCapture
    ) async throws -> Measurement {
        let postgresqlSettings = try await BenchScratch.durabilitySettings(settings.database, logger: logger)
        let recorder = BenchRecorder(topic: settings.topic, events: settings.totalEvents)
        var ingestConfiguration = ingest
        ingestConfiguration.onCommit = { offsets in recorder.committed(offsets) }
        let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
        let (application, apiServices) = try await serve { port in portContinuation.yield(port) }
        // reddot run's order: ingest, rollup, the application, then the change hub.
        let services: [any Service] = [IngestService(configuration: ingestConfiguration, logger: logger)] + (try rollup()) + [application] + apiServices
        var measurement = try await withServiceGroup(
            services, logger: logger, report: { recorder.ingestEnded(error: $0) }, onExit: { portContinuation.finish() }
        ) {
            var iterator = ports.makeAsyncIterator()
            guard let port = await iterator.next() else {
                throw BenchFailure("the query service stopped before it listened: \(recorder.ingestError ?? "")")
            }
            var measurement = try await load(port: port, secret: secret, recorder: recorder, lagCapture: lagCapture)
            measurement.postgresqlSettings = postgresqlSettings
            return measurement
        }
        if let error = recorder.ingestError { throw BenchFailure("the services failed: \(error)") }
        try await verify(&measurement, group: ingestConfiguration.group)
        return measurement
    }

    private func load(port: Int, secret: String, recorder: BenchRecorder, lagCapture: RollupLagCapture) async throws -> Measurement {
        let settings = self.settings
        let tracker = PipelineTracker(events: settings.totalEvents, users: settings.streams, paths: settings.paths)

        benchProgress("opening \(settings.streams) SSE streams on 127.0.0.1:\(port)")
        var requests: [[UInt8]] = []
        for user in 0..<settings.streams {
            let token = try await Authenticator.makeHS256Token(secret: secret, subject: Self.userName(user), expiresIn: 24 * 3600)
            requests.append(
                HTTPLoadGenerator.request(
                    path: "/v1/users/\(Self.userName(user))/badges/stream", port: port, token: token, accept: "text/event-stream"))
        }
        let client = PipelineStreamClient(port: port, requests: requests, paths: settings.paths, tracker: tracker)
        async let streamsEnded: Void = onThread(named: "reddot.bench.sse") { client.run() }
        let outcome: Result<Measurement, any Error>
        do {
            outcome = .success(try await publishAndWatch(client: client, recorder: recorder, tracker: tracker, lagCapture: lagCapture))
        } catch {
            outcome = .failure(error)
        }
        client.stop()
        try await streamsEnded
        return try outcome.get()
    }

    /// What the database holds after the run: applied event ids, rejected records, the sum of
    /// the bench users' leaf counts, and what `reddot verify` finds once the users still dirty
    /// are rolled up.
    private func verify(_ measurement: inout Measurement, group: String) async throws {
        var database = settings.database
        database.sessionSettings += BadgeStore.recommendedSessionSettings  // as reddot verify and the rollup run
        let pool = PGPool(configuration: database, maximumConnections: 1, logger: logger)
        defer { pool.close() }
        let store = BadgeStore(pool: pool)
        while case let claimed = try await store.recomputeDirtyUsers(limit: 500), claimed > 0 {
            measurement.leftDirty += claimed
        }
        let check = try await BadgeVerifier(store: store).run(repair: false)
        measurement.verifiedUsers = check.usersChecked
        measurement.verifyMismatches = check.mismatches
        let warmupUser = Self.warmupUser
        let (applied, rejected, leaves) = try await pool.withConnection { connection in
            (try connection.countAppliedEvents(), try connection.countRejectedRecords(), try connection.sumOfBenchLeafCounts(excluding: warmupUser))
        }
        let warmups = settings.isMockCluster ? Int(settings.partitions) : 1
        measurement.appliedEvents = applied - warmups
        measurement.rejectedRecords = rejected
        measurement.leafCountSum = leaves
    }
}
