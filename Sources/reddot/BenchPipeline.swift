import ArgumentParser
import BadgeAPI
import BadgeCore
import BadgeIngest
import BadgeRollup
import BadgeStore
import Foundation
import LibPQ
import Logging
import Metrics
import Prometheus
import RdKafka
import ServiceLifecycle
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

extension BenchCommand {
    /// `reddot bench pipeline`.
    struct Pipeline: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "pipeline",
            abstract: "Measure the whole pipeline: Kafka → ingest → rollup → an SSE client sees the change.",
            discussion: BenchScratchOptions.discussion + """
                What runs: ingest, the rollup workers and the query service in this process, as \
                reddot run runs them (one service group; the ingest and rollup options below are \
                reddot run's, with its defaults), against the scratch database. The query service \
                listens on 127.0.0.1 (a free port) with HS256 auth. Kafka: by default an in-process \
                librdkafka mock cluster with a fresh topic of --partitions partitions; with --brokers, \
                real brokers and the topic of --topic (use a new or empty topic).

                The clients: the first --streams of the --users users (u0, u1, …; default: all), \
                each with one Server-Sent Events stream (GET /v1/users/{user}/badges/stream with \
                the user's own token), read by one thread of this process that parses every \
                event's id: and data:. The streams are open before the first event is published; \
                only the events of users with a stream are timed to visibility.

                The load, open loop: events are published on schedule at --rate events/s (whatever \
                happens downstream; the producer sleeps at least 1 ms at a time and then sends every \
                event due, and it only waits when the mock broker's memory would overflow; the report \
                says how far it fell behind), for --warmup seconds \
                unmeasured and then --seconds measured. Each event is an incr by 1 of one of \
                --paths paths (root.bench.p0…) of one of the users, drawn from --seed, JSON as \
                producers send it, keyed by user. So the n-th event on a (user, path) implies a \
                count of n there: it counts as visible at the moment the user's stream delivers \
                a snapshot or change whose node at that path shows a count of n or more.

                Reported, for the events scheduled in the measured window: \
                publish → visible p50/p99/max (from the event's produce() call to the read of the \
                SSE event that shows it); its two parts, publish → ingest commit (matched by \
                partition and offset from the delivery reports, as bench ingest does) and ingest \
                commit → visible; the rollup lag p50/p99/max: every sample of the rollup's own \
                metric reddot_rollup_lag_seconds recorded in the window (a user's dirty mark, \
                written in the ingest transaction, to the commit of the rollup transaction that \
                recomputed that user; DESIGN's target is p99 under 100 ms); the offered and the \
                achieved publish rate; stream events and errors; and the CPU the machine spent \
                (Linux /proc: this process, the load generator's two threads within it, the \
                PostgreSQL backends of the scratch database, everything else). The report names \
                PostgreSQL's fsync and synchronous_commit settings: durable (both on) is the \
                headline; anything else is labelled relaxed.

                After the last event is published the bench waits up to --drain-seconds for every \
                event to become visible, then checks the database: every event id applied once, \
                nothing rejected, and the leaves' counts summing to the number of events.

                The report says whether this is a debug or a release build; only release figures \
                mean anything. Exit codes: 0 measured and verified (every event became visible); \
                1 events not visible, lost, stream errors or another failure; 64 bad arguments; \
                65 no migrations; 69 the database cannot be reached.
                """)

        @OptionGroup var database: DatabaseOptions
        @OptionGroup var kafka: KafkaOptions

        @Option(help: ArgumentHelp("Events published per second, on schedule (open loop).", valueName: "events/s"))
        var rate: Double = 5_000

        @Option(help: "Seconds of load measured, after the warm-up.")
        var seconds: Int = 30

        @Option(help: "Seconds of the same load before the measured window.")
        var warmup: Int = 5

        @Option(help: "Users the events are spread over; each has one SSE stream open.")
        var users: Int = 200

        @Option(help: "How many of the users (u0, u1, …) have an SSE stream open; only their events are timed to visibility. Default: all.")
        var streams: Int?

        @Option(help: "Paths per user (root.bench.p0…).")
        var paths: Int = 10

        @Option(help: "Partitions of the mock cluster's topic (ignored with --brokers).")
        var partitions: Int32 = 8

        @Option(name: .customLong("pool-size"), help: "The query service's database connections (reddot serve's --pool-size).")
        var poolSize: Int = 8

        @Option(name: .customLong("drain-seconds"), help: "How long to wait, after the last publish, for every event to become visible.")
        var drainSeconds: Int = 60

        @Option(help: "The seed of the events' users and paths.")
        var seed: UInt64 = 42

        @OptionGroup var ingest: IngestOptions
        @OptionGroup var rollup: RollupOptions
        @OptionGroup var scratchSettings: BenchScratchOptions

        func validate() throws {
            guard rate > 0, rate <= 1_000_000 else { throw ValidationError("--rate takes a number of events/s in (0, 1000000]") }
            guard (1...3_600).contains(seconds) else { throw ValidationError("--seconds takes 1…3600") }
            guard (0...600).contains(warmup) else { throw ValidationError("--warmup takes 0…600") }
            guard (1...10_000).contains(users) else { throw ValidationError("--users takes 1…10000") }
            if let streams, !(1...users).contains(streams) { throw ValidationError("--streams takes 1…--users") }
            guard (1...1_000).contains(paths) else { throw ValidationError("--paths takes 1…1000") }
            guard partitions >= 1, partitions <= 10_000 else { throw ValidationError("--partitions takes 1…10000") }
            guard (1...256).contains(poolSize) else { throw ValidationError("--pool-size takes 1…256") }
            guard (1...3_600).contains(drainSeconds) else { throw ValidationError("--drain-seconds takes 1…3600") }
            guard rate * Double(seconds) >= 1 else { throw ValidationError("--rate × --seconds must come to at least one event") }
            guard rate * Double(seconds + warmup) <= 50_000_000 else { throw ValidationError("--rate × (--warmup + --seconds) must stay under 50,000,000 events") }
        }

        func run() async throws {
            let logger = try LoggingSetup.logger(label: "reddot.bench", levelText: database.logLevel, defaultLevel: .warning)
            let runID = String(UInt64.random(in: 0...UInt64.max), radix: 36)
            let files = try BenchScratch.migrations(scratchSettings.migrationsDirectory)
            // The rollup's lag metric is read from here; the rest goes to Prometheus, as in reddot run.
            let lagCapture = RollupLagCapture()
            let registry = PrometheusCollectorRegistry()
            MetricsSystem.bootstrap(MultiplexMetricsHandler(factories: [PrometheusMetricsFactory(registry: registry), lagCapture]))

            let report = try await BenchScratch.run(
                runID: runID, server: database.configuration(), applicationName: "reddot-bench-pipeline", migrations: files,
                keep: scratchSettings.keep, logger: logger
            ) { scratch, scratchName, serverVersion in
                try await measure(
                    scratch: scratch, scratchName: scratchName, runID: runID, serverVersion: serverVersion, registry: registry,
                    lagCapture: lagCapture, logger: logger)
            }
            try BenchScratch.print(report, text: report.text, json: scratchSettings.json)
            if !report.verified {
                throw fail("the pipeline did not deliver every event: \(report.verification)", code: ExitCodes.failure)
            }
        }

        private func measure(
            scratch: PGConfiguration, scratchName: String, runID: String, serverVersion: String, registry: PrometheusCollectorRegistry,
            lagCapture: RollupLagCapture, logger: Logger
        ) async throws -> PipelineReport {
            let useMock = kafka.brokerList == nil
            let cluster = useMock ? try KafkaMockCluster(logger: logger) : nil
            defer { cluster?.close() }
            let topic = KafkaOptions.nonEmpty(kafka.topicName) ?? (useMock ? "reddot.bench" : "reddot.bench.\(runID)")
            if let problem = KafkaOptions.topicProblem(topic) { throw ValidationError(problem) }
            var kafkaConfiguration = try kafka.configuration()
            if let cluster {
                try cluster.createTopic(topic, partitions: partitions)
                try cluster.createTopic(topic + ".dlq", partitions: 1)
                kafkaConfiguration.set("bootstrap.servers", cluster.bootstrapServers)
            }
            // The services connect as reddot run would, with the scratch database as --database-url.
            let scratchOptions = try DatabaseOptions.parse(["--database-url", scratch.connectionString])
            var ingestConfiguration = try ingest.configuration(kafka: kafka, database: scratchOptions)
            ingestConfiguration.kafka = kafkaConfiguration
            ingestConfiguration.topic = topic
            ingestConfiguration.group = ingest.group ?? "reddot-bench-\(runID)"
            ingestConfiguration.deadLetterTopic = ingest.deadLetterTopic ?? topic + ".dlq"

            let settings = PipelineBenchmark.Settings(
                rate: rate, seconds: seconds, warmup: warmup, users: users, streams: streams ?? users, paths: paths, partitions: partitions,
                drainSeconds: drainSeconds, seed: seed, runID: runID, kafka: kafkaConfiguration, topic: topic, isMockCluster: useMock,
                database: scratch, databaseName: scratchName)
            let secret = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
            let serve = try ServeOptions.parse([
                "--host", "127.0.0.1", "--port", "0", "--jwt-hs256-secret", secret, "--pool-size", "\(poolSize)",
            ])
            let benchmark = PipelineBenchmark(settings: settings, logger: logger)
            let measurement = try await benchmark.run(
                ingest: ingestConfiguration,
                rollup: { rollup.service(database: scratchOptions, logger: logger) },
                serve: { onRunning in
                    try await serve.makeServices(database: scratchOptions, registry: registry, logger: logger, onRunning: onRunning)
                },
                secret: secret, lagCapture: lagCapture)
            return PipelineReport(
                settings: settings, measurement: measurement, ingest: ingestConfiguration, rollup: rollup, poolSize: poolSize,
                kafka: useMock ? "mock cluster (in-process)" : "brokers \(kafka.brokers)", postgresql: serverVersion,
                kept: scratchSettings.keep)
        }
    }
}

/// The pipeline benchmark behind `reddot bench pipeline`: an open-loop producer, ingest, rollup
/// and the query service in this process, and one SSE stream per user; each event is timed from
/// its `produce()` call to the stream event that shows it.
struct PipelineBenchmark: Sendable {
    struct Settings: Sendable {
        var rate: Double
        var seconds: Int
        var warmup: Int
        var users: Int
        /// Users u0 … u(streams - 1) have a stream open.
        var streams: Int
        var paths: Int
        var partitions: Int32
        var drainSeconds: Int
        var seed: UInt64
        var runID: String
        /// Kafka properties for the producer (bootstrap servers included).
        var kafka: KafkaConfiguration
        var topic: String
        var isMockCluster: Bool
        /// The scratch database, migrated.
        var database: PGConfiguration
        var databaseName: String

        /// Events scheduled in all, warm-up included.
        var totalEvents: Int { Int((rate * Double(warmup + seconds)).rounded(.up)) }
        /// Events scheduled before the measured window.
        var warmupEvents: Int { Int((rate * Double(warmup)).rounded(.up)) }
    }

    let settings: Settings
    let logger: Logger

    /// How long the producer may wait on the mock broker's window with no commit before giving up.
    static let stallSeconds: Double = 60
    static let warmupUser = "warmup"

    static func userName(_ user: Int) -> String { "u\(user)" }

    struct Measurement: Sendable {
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
        var rollupLagUnder100Percent = 0.0
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
        var appliedEvents = 0
        var rejectedRecords = 0
        var leafCountSum: Int64 = 0
        var drainSeconds = 0.0
    }

    /// Starts the services, opens the streams, runs the load and measures.
    func run(
        ingest: IngestConfiguration, rollup: () -> RollupService,
        serve: (@escaping @Sendable (Int) -> Void) async throws -> (application: any Service, services: [any Service]),
        secret: String, lagCapture: RollupLagCapture
    ) async throws -> Measurement {
        let postgresqlSettings = try await readSettings()
        let total = settings.totalEvents
        let recorder = BenchRecorder(topic: settings.topic, events: total)
        var ingestConfiguration = ingest
        ingestConfiguration.onCommit = { offsets in recorder.committed(offsets) }
        let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
        let (application, apiServices) = try await serve { port in portContinuation.yield(port) }
        // reddot run's order: ingest, rollup, the application, then the change hub.
        let services: [any Service] = [IngestService(configuration: ingestConfiguration, logger: logger), rollup(), application] + apiServices
        let serviceGroup = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: services, gracefulShutdownSignals: [], cancellationSignals: [], logger: logger))

        return try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask {
                defer { portContinuation.finish() }
                do {
                    try await serviceGroup.run()
                    recorder.ingestEnded(error: nil)
                } catch {
                    recorder.ingestEnded(error: "\(error)")
                }
            }
            let outcome: Result<Measurement, any Error>
            do {
                var iterator = ports.makeAsyncIterator()
                guard let port = await iterator.next() else {
                    throw BenchFailure("the query service stopped before it listened: \(recorder.ingestError ?? "")")
                }
                var measurement = try await load(port: port, secret: secret, recorder: recorder, lagCapture: lagCapture)
                measurement.postgresqlSettings = postgresqlSettings
                outcome = .success(measurement)
            } catch {
                outcome = .failure(error)
            }
            await serviceGroup.triggerGracefulShutdown()
            try await tasks.waitForAll()
            var measurement = try outcome.get()
            if let error = recorder.ingestError { throw BenchFailure("the services failed: \(error)") }
            try await verify(&measurement, group: ingestConfiguration.group)
            return measurement
        }
    }

    private func progress(_ message: String) {
        FileHandle.standardError.write(Data("bench: \(message)\n".utf8))
    }

    /// PostgreSQL's durability settings, as the scratch database's sessions see them.
    private func readSettings() async throws -> [String: String] {
        let pool = PGPool(configuration: settings.database, maximumConnections: 1, logger: logger)
        defer { pool.close() }
        return try await pool.withConnection { connection in
            var values: [String: String] = [:]
            for name in ["fsync", "synchronous_commit", "full_page_writes", "shared_buffers"] {
                // The names are ours, never input.
                values[name] = try connection.query(PGStatement("bench.show_setting", "SHOW \(name)", prepared: false))
                    .singleRow().decode(0, as: String.self)
            }
            return values
        }
    }

    private func load(port: Int, secret: String, recorder: BenchRecorder, lagCapture: RollupLagCapture) async throws -> Measurement {
        let settings = self.settings
        let tracker = PipelineTracker(events: settings.totalEvents, users: settings.streams, paths: settings.paths)

        progress("opening \(settings.streams) SSE streams on 127.0.0.1:\(port)")
        var requests: [[UInt8]] = []
        for user in 0..<settings.streams {
            let token = try await Authenticator.makeHS256Token(secret: secret, subject: Self.userName(user), expiresIn: 24 * 3600)
            let path = "/v1/users/\(Self.userName(user))/badges/stream"
            requests.append(
                Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nAuthorization: Bearer \(token)\r\nAccept: text/event-stream\r\n\r\n".utf8))
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

    private func publishAndWatch(
        client: PipelineStreamClient, recorder: BenchRecorder, tracker: PipelineTracker, lagCapture: RollupLagCapture
    ) async throws -> Measurement {
        let settings = self.settings
        let openDeadline = BenchClock.now + 60_000_000_000
        while client.readyStreams < settings.streams {
            if let problem = client.totals.firstError { throw BenchFailure("an SSE stream failed while opening: \(problem)") }
            if recorder.hasIngestEnded { throw BenchFailure("the services stopped: \(recorder.ingestError ?? "")") }
            if BenchClock.now > openDeadline { throw BenchFailure("only \(client.readyStreams) of \(settings.streams) SSE streams opened within 60 s") }
            try await Task.sleep(for: .milliseconds(5))
        }

        let producer = try KafkaProducer(configuration: settings.kafka, logger: logger)
        defer { producer.close() }
        progress("warming up ingest (the consumer group joins)")
        let warmups = try await benchWarmUp(
            producer, recorder: recorder, topic: settings.topic, mockPartitions: settings.isMockCluster ? settings.partitions : nil,
            runID: settings.runID, user: Self.warmupUser, path: "root.warmup", stallSeconds: Self.stallSeconds)

        let total = settings.totalEvents
        let warmupEvents = settings.warmupEvents
        progress("generating \(total) events")
        let workload = try await onThread(named: "reddot.bench.generate") { try PipelineWorkload(settings: settings) }
        let start = BenchClock.now + 20_000_000
        let measureStart = start + UInt64(settings.warmup) * 1_000_000_000
        let measureEnd = measureStart + UInt64(settings.seconds) * 1_000_000_000
        progress(
            "publishing \(BenchReport.number(settings.rate)) events/s over \(settings.users) users × \(settings.paths) paths: "
                + "\(settings.warmup) s warm-up, then \(settings.seconds) s measured")
        // About 2 MB of records per partition may be published and not yet committed (the mock
        // broker keeps ~5 MB of each); the producer waits beyond that.
        let window = settings.isMockCluster ? max(20_000, Int(settings.partitions) * 2_000_000 / (workload.averagePayloadBytes + 60)) : Int.max
        let baseline = recorder.committedTotal
        async let published: PublishOutcome = onThread(named: "reddot.bench.producer") {
            try Self.publish(
                workload, settings: settings, start: start, window: window, baseline: baseline, producer: producer, recorder: recorder,
                tracker: tracker)
        }

        try await QueryBenchmark.sleep(until: measureStart)
        let before = CPUSample.now(database: settings.databaseName)
        let (producerBefore, streamsBefore) = (tracker.producerCPUNanoseconds, client.cpuNanoseconds)
        try await QueryBenchmark.sleep(until: measureEnd)
        let after = CPUSample.now(database: settings.databaseName)
        let producerSeconds = Double(tracker.producerCPUNanoseconds - producerBefore) / 1e9
        let streamSeconds = Double(client.cpuNanoseconds - streamsBefore) / 1e9
        let cpu = CPUUsage(before: before, after: after, httpClientSeconds: producerSeconds + streamSeconds)

        let outcome = try await published
        try producer.flush(timeoutMilliseconds: 120_000)
        while !recorder.allReported { try await Task.sleep(for: .milliseconds(1)) }
        let deliveries = recorder.deliveries
        if deliveries.failures > 0 {
            throw BenchFailure("\(deliveries.failures) events were not delivered to Kafka: \(deliveries.firstFailure ?? "")")
        }

        progress("published \(total) events; waiting for the last ones to become visible")
        let drainStart = BenchClock.now
        let drainDeadline = drainStart + UInt64(settings.drainSeconds) * 1_000_000_000
        let tracked = tracker.trackedCount
        while tracker.visibleCount < tracked, BenchClock.now < drainDeadline, !recorder.hasIngestEnded {
            try await Task.sleep(for: .milliseconds(5))
        }
        let drainSeconds = Double(BenchClock.now - drainStart) / 1e9
        // Let the last commits' callbacks land before reading the history.
        var ends: [Int32: Int64] = [:]
        for (partition, offset) in warmups { ends[partition] = max(ends[partition] ?? 0, offset + 1) }
        for index in 0..<total { ends[deliveries.partitions[index]] = max(ends[deliveries.partitions[index]] ?? 0, deliveries.offsets[index] + 1) }
        let commitDeadline = BenchClock.now + 5_000_000_000
        while !ends.allSatisfy({ recorder.committedNext(partition: $0.key) >= $0.value }), BenchClock.now < commitDeadline,
            !recorder.hasIngestEnded
        {
            try await Task.sleep(for: .milliseconds(5))
        }

        let (producedAt, visibleAt) = tracker.times
        let commits = recorder.commitHistory
        var toVisible: [UInt64] = []
        var toCommit: [UInt64] = []
        var commitToVisible: [UInt64] = []
        var uncommitted = 0
        var trackedInWindow = 0
        for index in warmupEvents..<total {
            let produced = producedAt[index]
            let visible = visibleAt[index]
            if visible > 0 { toVisible.append(visible >= produced ? visible - produced : 0) }
            if Int(workload.users[index]) < settings.streams { trackedInWindow += 1 }
            guard let history = commits[deliveries.partitions[index]],
                let committedAt = IngestBenchmark.firstCommit(after: deliveries.offsets[index], in: history)
            else {
                uncommitted += 1
                continue
            }
            toCommit.append(committedAt >= produced ? committedAt - produced : 0)
            if visible > 0 { commitToVisible.append(visible >= committedAt ? visible - committedAt : 0) }
        }
        toVisible.sort()
        toCommit.sort()
        commitToVisible.sort()
        var lag = lagCapture.samples(from: measureStart, to: measureEnd)
        lag.sort()
        let under = lag.isEmpty ? 0 : 100 * Double(lag.count(where: { $0 < 100_000_000 })) / Double(lag.count)
        let windowEvents = total - warmupEvents
        let firstProduced = producedAt[warmupEvents]
        let lastProduced = producedAt[total - 1]
        return Measurement(
            postgresqlSettings: [:], publishedInWindow: windowEvents, trackedInWindow: trackedInWindow,
            windowPublishSeconds: lastProduced > firstProduced ? Double(lastProduced - firstProduced) / 1e9 : 0,
            maxBehindScheduleMilliseconds: Double(outcome.maxBehindNanoseconds) / 1e6, visibleInWindow: toVisible.count,
            toVisible: LatencySummary(sortedNanoseconds: toVisible), toCommit: LatencySummary(sortedNanoseconds: toCommit),
            commitToVisible: LatencySummary(sortedNanoseconds: commitToVisible),
            rollupLag: LatencySummary(sortedNanoseconds: lag.map { UInt64(max(0, $0)) }), rollupLagSamples: lag.count,
            rollupLagUnder100Percent: under, totalEvents: total, trackedEvents: tracked, visibleEvents: tracker.visibleCount, uncommittedEvents: uncommitted,
            streams: client.totals, cpu: cpu, producerCPUSeconds: producerSeconds, streamClientCPUSeconds: streamSeconds,
            drainSeconds: drainSeconds)
    }

    struct PublishOutcome: Sendable {
        var maxBehindNanoseconds: UInt64
    }

    /// The open-loop producer, on its own thread: event `i` is due at `start + i / rate`.
    private static func publish(
        _ workload: PipelineWorkload, settings: Settings, start: UInt64, window: Int, baseline: Int64, producer: KafkaProducer,
        recorder: BenchRecorder, tracker: PipelineTracker
    ) throws -> PublishOutcome {
        let spacing = 1e9 / settings.rate
        var behind: UInt64 = 0
        var stalledSince: UInt64?
        defer { tracker.producerCPUNanoseconds = threadCPUNanoseconds() }
        for index in 0..<settings.totalEvents {
            if recorder.hasIngestEnded { throw BenchFailure("the services stopped while the events were being published: \(recorder.ingestError ?? "")") }
            let due = start + UInt64(Double(index) * spacing)
            var now = BenchClock.now
            if due > now {
                // At least 1 ms per sleep: the events due meanwhile go out together (at 20,000/s,
                // 20 at a time), instead of one wake-up per event.
                tracker.producerCPUNanoseconds = threadCPUNanoseconds()
                usleep(UInt32(min(100_000, max(1_000, (due - now) / 1_000))))
            }
            while index - Int(recorder.committedTotal - baseline) > window {
                if recorder.hasIngestEnded { throw BenchFailure("the services stopped while the events were being published") }
                let since = stalledSince ?? BenchClock.now
                stalledSince = since
                if Double(BenchClock.now - since) / 1e9 > stallSeconds {
                    throw BenchFailure("ingest committed nothing for \(Int(stallSeconds)) s")
                }
                usleep(1_000)
            }
            stalledSince = nil
            let user = Int(workload.users[index])
            let record = KafkaOutgoingRecord(topic: settings.topic, key: workload.keys[user], payload: workload.payloads[index])
            now = BenchClock.now
            if now > due { behind = max(behind, now - due) }
            if user < settings.streams { tracker.willPublish(index: index, user: user, path: Int(workload.paths[index]), at: now) }
            tracker.published(index: index, at: now)
            try producer.produce(record) { result in recorder.delivered(index: index, result) }
        }
        return PublishOutcome(maxBehindNanoseconds: behind)
    }


    /// What the database holds after the run: applied event ids, rejected records, and the sum of
    /// the bench users' leaf counts.
    private func verify(_ measurement: inout Measurement, group: String) async throws {
        let pool = PGPool(configuration: settings.database, maximumConnections: 1, logger: logger)
        defer { pool.close() }
        let warmupUser = Self.warmupUser
        let (applied, rejected, leaves) = try await pool.withConnection { connection in
            let applied = try connection.query(
                PGStatement("bench.count_applied", "SELECT count(*) FROM applied_event", prepared: false)
            ).singleRow().decode(0, as: Int.self)
            let rejected = try connection.query(
                PGStatement("bench.count_rejected", "SELECT count(*) FROM rejected_record", prepared: false)
            ).singleRow().decode(0, as: Int.self)
            let leaves = try connection.query(
                PGStatement(
                    "bench.sum_leaves",
                    "SELECT coalesce(sum(count), 0)::bigint FROM badge_aggregate WHERE user_id <> $1 AND path <@ 'root.bench' AND nlevel(path) = 3",
                    prepared: false),
                [warmupUser]
            ).singleRow().decode(0, as: Int64.self)
            return (applied, rejected, leaves)
        }
        let warmups = settings.isMockCluster ? Int(settings.partitions) : 1
        measurement.appliedEvents = applied - warmups
        measurement.rejectedRecords = rejected
        measurement.leafCountSum = leaves
    }
}

/// Thread CPU time of the calling thread, in nanoseconds.
func threadCPUNanoseconds() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

/// The events, made before the clock starts: incr by 1 of a (user, path) drawn from the seed,
/// encoded as producers send them.
struct PipelineWorkload: Sendable {
    /// Per user: the record key.
    let keys: [[UInt8]]
    let payloads: [[UInt8]]
    let users: [Int32]
    let paths: [Int32]
    let averagePayloadBytes: Int

    init(settings: PipelineBenchmark.Settings) throws {
        var generator = SplitMix64(seed: settings.seed)
        let encoder = EventEncoder()
        let badgePaths = try (0..<settings.paths).map { try BadgePath(validating: "root.bench.p\($0)") }
        let userIDs = try (0..<settings.users).map { try UserID(validating: PipelineBenchmark.userName($0)) }
        let total = settings.totalEvents
        var payloads: [[UInt8]] = []
        var users: [Int32] = []
        var paths: [Int32] = []
        payloads.reserveCapacity(total)
        users.reserveCapacity(total)
        paths.reserveCapacity(total)
        var bytes = 0
        for index in 0..<total {
            let user = Int(generator.next() % UInt64(settings.users))
            let path = Int(generator.next() % UInt64(settings.paths))
            let event = BadgeEvent(
                id: try EventID(validating: "\(settings.runID)-\(index)"), audience: .users([userIDs[user]]),
                body: .operation(path: badgePaths[path], operation: .increment(by: 1)))
            let payload = encoder.encode(event)
            bytes += payload.count
            payloads.append(payload)
            users.append(Int32(user))
            paths.append(Int32(path))
        }
        keys = userIDs.map { Array($0.rawValue.utf8) }
        self.payloads = payloads
        self.users = users
        self.paths = paths
        averagePayloadBytes = total > 0 ? bytes / total : 100
    }
}

// MARK: - matching events to what the streams show

/// Each event's produce time and the time a stream first showed it. The n-th event on a (user,
/// path) implies a count of n there; a stream event showing a count c at that path makes every
/// pending event with an implied count ≤ c visible.
final class PipelineTracker: Sendable {
    private struct State {
        var producedAt: [UInt64]
        var visibleAt: [UInt64]
        var impliedCount: [Int64]
        /// Per (user, path): events published so far, the indexes of the events in order, and how
        /// many of them are visible.
        var published: [Int64]
        var pending: [[Int32]]
        var visibleHead: [Int]
        var tracked = 0
        var visible = 0
    }

    private let paths: Int
    private let state: Mutex<State>
    private let producerCPU = Atomic<UInt64>(0)

    init(events: Int, users: Int, paths: Int) {
        self.paths = paths
        state = Mutex(
            State(
                producedAt: [UInt64](repeating: 0, count: events), visibleAt: [UInt64](repeating: 0, count: events),
                impliedCount: [Int64](repeating: 0, count: events), published: [Int64](repeating: 0, count: users * paths),
                pending: [[Int32]](repeating: [], count: users * paths), visibleHead: [Int](repeating: 0, count: users * paths)))
    }

    /// Called just before the `produce()` of an event of a user with a stream.
    func willPublish(index: Int, user: Int, path: Int, at time: UInt64) {
        let key = user * paths + path
        state.withLock { state in
            state.published[key] += 1
            state.impliedCount[index] = state.published[key]
            state.pending[key].append(Int32(index))
            state.tracked += 1
        }
    }

    /// Called just before every event's `produce()`.
    func published(index: Int, at time: UInt64) {
        state.withLock { $0.producedAt[index] = time }
    }

    /// A stream of `user` showed these counts at `time`.
    func shown(user: Int, counts: [(path: Int, count: Int64)], at time: UInt64) {
        state.withLock { state in
            for (path, count) in counts where path < paths {
                let key = user * paths + path
                var head = state.visibleHead[key]
                let pending = state.pending[key]
                while head < pending.count, state.impliedCount[Int(pending[head])] <= count {
                    state.visibleAt[Int(pending[head])] = time
                    head += 1
                    state.visible += 1
                }
                state.visibleHead[key] = head
            }
        }
    }

    var visibleCount: Int { state.withLock { $0.visible } }
    var trackedCount: Int { state.withLock { $0.tracked } }
    var times: (producedAt: [UInt64], visibleAt: [UInt64]) { state.withLock { ($0.producedAt, $0.visibleAt) } }

    /// The producer thread's CPU time so far (it updates it before each sleep).
    var producerCPUNanoseconds: UInt64 {
        get { producerCPU.load(ordering: .relaxed) }
        set { producerCPU.store(newValue, ordering: .relaxed) }
    }
}

/// Samples of the rollup's `reddot_rollup_lag_seconds` timer, with the time each was recorded;
/// every other metric is dropped here (Prometheus gets them all).
final class RollupLagCapture: MetricsFactory, Sendable {
    static let label = "reddot_rollup_lag_seconds"
    private let recorded = Mutex<[(at: UInt64, nanoseconds: Int64)]>([])

    final class LagTimer: TimerHandler, Sendable {
        let capture: RollupLagCapture
        init(_ capture: RollupLagCapture) { self.capture = capture }
        func recordNanoseconds(_ duration: Int64) {
            let now = BenchClock.now
            capture.recorded.withLock { $0.append((now, duration)) }
        }
    }

    /// The samples recorded in `[from, to)`, in nanoseconds.
    func samples(from start: UInt64, to end: UInt64) -> [Int64] {
        recorded.withLock { samples in samples.filter { $0.at >= start && $0.at < end }.map(\.nanoseconds) }
    }

    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        label == Self.label ? LagTimer(self) : NOOPMetricsHandler.instance
    }
    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler { NOOPMetricsHandler.instance }
    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler { NOOPMetricsHandler.instance }
    func destroyCounter(_ handler: any CounterHandler) {}
    func destroyRecorder(_ handler: any RecorderHandler) {}
    func destroyTimer(_ handler: any TimerHandler) {}
}

// MARK: - the SSE client

/// One thread reading every user's Server-Sent Events stream (HTTP/1.1, chunked or not): it
/// parses each event's `id:` and `data:` and tells the tracker which leaf counts the stream shows.
final class PipelineStreamClient: Sendable {
    struct Totals: Sendable {
        var snapshots = 0
        var changes = 0
        var heartbeats = 0
        var bytes = 0
        var reconnects = 0
        var errors = 0
        var firstError: String?
    }

    let port: Int
    let requests: [[UInt8]]
    let paths: Int
    let tracker: PipelineTracker
    private let stopping = Atomic<Bool>(false)
    private let ready = Atomic<Int>(0)
    private let cpu = Atomic<UInt64>(0)
    private let counters = Mutex(Totals())

    init(port: Int, requests: [[UInt8]], paths: Int, tracker: PipelineTracker) {
        self.port = port
        self.requests = requests
        self.paths = paths
        self.tracker = tracker
    }

    var readyStreams: Int { ready.load(ordering: .acquiring) }
    var cpuNanoseconds: UInt64 { cpu.load(ordering: .relaxed) }
    var totals: Totals { counters.withLock { $0 } }
    func stop() { stopping.store(true, ordering: .releasing) }

    private struct Stream {
        enum Chunk { case size, data(Int), trailer, ended }
        var descriptor: Int32 = -1
        var input: [UInt8] = []
        var headDone = false
        var chunked = false
        var chunk = Chunk.size
        var body: [UInt8] = []
        var opened = false
        /// The last event id seen (the version), sent as Last-Event-ID on a reconnect.
        var lastID: String?
    }

    /// Runs until `stop()`; blocking, on a thread of its own.
    func run() {
        var streams = [Stream](repeating: Stream(), count: requests.count)
        var pollSet = [pollfd](repeating: pollfd(fd: -1, events: Int16(POLLIN), revents: 0), count: requests.count)
        var buffer = [UInt8](repeating: 0, count: 65_536)
        defer {
            for stream in streams where stream.descriptor >= 0 { _ = close(stream.descriptor) }
        }
        for user in streams.indices { open(user, &streams, &pollSet) }
        while !stopping.load(ordering: .acquiring) {
            cpu.store(threadCPUNanoseconds(), ordering: .relaxed)
            let count = poll(&pollSet, nfds_t(pollSet.count), 10)
            if count < 0, errno != EINTR {
                failed("poll: \(String(cString: strerror(errno)))")
                return
            }
            guard count > 0 else { continue }
            for user in pollSet.indices where pollSet[user].revents != 0 {
                pollSet[user].revents = 0
                let descriptor = streams[user].descriptor
                guard descriptor >= 0 else { continue }
                let received = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
                let now = BenchClock.now
                if received < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { continue }
                if received <= 0 {
                    broken(user, received == 0 ? "the server closed a stream" : "recv: \(String(cString: strerror(errno)))", &streams, &pollSet)
                    continue
                }
                counters.withLock { $0.bytes += received }
                streams[user].input += buffer[0..<received]
                if let problem = process(user, &streams[user], at: now) { broken(user, problem, &streams, &pollSet) }
            }
        }
        cpu.store(threadCPUNanoseconds(), ordering: .relaxed)
    }

    private func open(_ user: Int, _ streams: inout [Stream], _ pollSet: inout [pollfd]) {
        do {
            let descriptor = try BenchSocket.connectLoopback(port: port)
            var request = requests[user]
            if let lastID = streams[user].lastID {
                // Resume: insert Last-Event-ID before the blank line that ends the head.
                request.removeLast(2)
                request += Array("Last-Event-ID: \(lastID)\r\n\r\n".utf8)
            }
            if let problem = BenchSocket.sendAll(descriptor, request) {
                _ = close(descriptor)
                throw BenchFailure(problem)
            }
            _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
            let lastID = streams[user].lastID
            let opened = streams[user].opened
            streams[user] = Stream(descriptor: descriptor, opened: opened, lastID: lastID)
            pollSet[user].fd = descriptor
        } catch {
            failed("stream of user \(user): \(error)")
        }
    }

    /// Counts an error and opens the stream again (resuming from the last event id).
    private func broken(_ user: Int, _ problem: String, _ streams: inout [Stream], _ pollSet: inout [pollfd]) {
        if streams[user].descriptor >= 0 { _ = close(streams[user].descriptor) }
        streams[user].descriptor = -1
        pollSet[user].fd = -1
        if stopping.load(ordering: .acquiring) { return }
        failed("stream of user \(user): \(problem)")
        counters.withLock { $0.reconnects += 1 }
        open(user, &streams, &pollSet)
    }

    private func failed(_ problem: String) {
        counters.withLock { totals in
            totals.errors += 1
            if totals.firstError == nil { totals.firstError = problem }
        }
    }

    /// Consumes what arrived on a stream; a problem that breaks it, or nil.
    private func process(_ user: Int, _ stream: inout Stream, at time: UInt64) -> String? {
        if !stream.headDone {
            guard let end = Self.find([13, 10, 13, 10], in: stream.input, from: 0) else {
                return stream.input.count > 65_536 ? "an answer head longer than 64 KiB" : nil
            }
            let head = String(decoding: stream.input[0..<end], as: UTF8.self)
            guard head.hasPrefix("HTTP/1.1 200") else {
                return "the stream answered \(head.prefix(40)) \(String(decoding: stream.input.suffix(from: end).prefix(200), as: UTF8.self))"
            }
            stream.chunked = head.lowercased().contains("transfer-encoding: chunked")
            stream.input.removeFirst(end + 4)
            stream.headDone = true
        }
        if stream.chunked {
            var index = 0
            decoding: while index < stream.input.count {
                switch stream.chunk {
                case .size:
                    guard let lineEnd = Self.find([13, 10], in: stream.input, from: index) else { break decoding }
                    let line = String(decoding: stream.input[index..<lineEnd], as: UTF8.self)
                    guard let size = Int(line.split(separator: ";").first.map(String.init) ?? "", radix: 16) else {
                        return "a bad chunk size '\(line.prefix(20))'"
                    }
                    index = lineEnd + 2
                    stream.chunk = size == 0 ? .ended : .data(size)
                case .data(let remaining):
                    let take = min(remaining, stream.input.count - index)
                    stream.body += stream.input[index..<(index + take)]
                    index += take
                    stream.chunk = take == remaining ? .trailer : .data(remaining - take)
                case .trailer:
                    guard stream.input.count - index >= 2 else { break decoding }
                    index += 2
                    stream.chunk = .size
                case .ended:
                    return "the server ended a stream"
                }
            }
            stream.input.removeFirst(index)
        } else {
            stream.body += stream.input
            stream.input.removeAll(keepingCapacity: true)
        }
        // Events end with a blank line.
        var start = 0
        while let end = Self.find([10, 10], in: stream.body, from: start) {
            handleEvent(user, stream.body[start..<end], &stream, at: time)
            start = end + 2
        }
        if start > 0 { stream.body.removeFirst(start) }
        return nil
    }

    private func handleEvent(_ user: Int, _ block: ArraySlice<UInt8>, _ stream: inout Stream, at time: UInt64) {
        if !stream.opened {
            stream.opened = true
            ready.add(1, ordering: .releasing)
        }
        var name = "message"
        var data: [UInt8] = []
        var hasData = false
        for line in block.split(separator: 10, omittingEmptySubsequences: false) {
            if line.first == 58 { continue }  // ":" a comment (heartbeat)
            let text = String(decoding: line, as: UTF8.self)
            if text.hasPrefix("event:") {
                name = text.dropFirst(6).trimmingCharacters(in: .whitespaces)
            } else if text.hasPrefix("id:") {
                stream.lastID = text.dropFirst(3).trimmingCharacters(in: .whitespaces)
            } else if text.hasPrefix("data:") {
                if hasData { data.append(10) }
                var value = line.dropFirst(5)
                if value.first == 32 { value = value.dropFirst() }
                data += value
                hasData = true
            }
        }
        if block.first == 58 {
            counters.withLock { $0.heartbeats += 1 }
            return
        }
        guard hasData, name == "snapshot" || name == "change" else { return }
        guard let message = try? JSONDecoder().decode(StreamMessage.self, from: Data(data)) else {
            failed("an undecodable \(name) event: \(String(decoding: data.prefix(200), as: UTF8.self))")
            return
        }
        var counts: [(path: Int, count: Int64)] = []
        func visit(_ node: StreamNode) {
            if let path = Self.leafIndex(node.path) { counts.append((path, node.count)) }
            node.children?.forEach(visit)
        }
        if let tree = message.tree { visit(tree) }
        for node in message.changed ?? [] { visit(node) }
        let isSnapshot = name == "snapshot"
        counters.withLock { totals in
            if isSnapshot { totals.snapshots += 1 } else { totals.changes += 1 }
        }
        if !counts.isEmpty { tracker.shown(user: user, counts: counts, at: time) }
    }

    /// `root.bench.pN` → N.
    static func leafIndex(_ path: String) -> Int? {
        guard path.hasPrefix("root.bench.p") else { return nil }
        return Int(path.dropFirst(12))
    }

    static func find(_ needle: [UInt8], in bytes: [UInt8], from start: Int) -> Int? {
        guard bytes.count >= needle.count, start <= bytes.count - needle.count else { return nil }
        var index = start
        while index <= bytes.count - needle.count {
            if bytes[index] == needle[0] {
                var matched = true
                for offset in 1..<needle.count where bytes[index + offset] != needle[offset] {
                    matched = false
                    break
                }
                if matched { return index }
            }
            index += 1
        }
        return nil
    }

    /// The data of a `snapshot` (`tree`) or `change` (`changed`) event.
    struct StreamMessage: Decodable {
        var version: Int64
        var tree: StreamNode?
        var changed: [StreamNode]?
    }

    struct StreamNode: Decodable {
        var path: String
        var count: Int64
        var children: [StreamNode]?
    }
}

// MARK: - report

/// What `reddot bench pipeline` prints.
struct PipelineReport: Encodable {
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
    var database: String
    var databaseKept: Bool
    var users: Int
    var paths: Int
    var streams: Int
    var ingestBatchSize: Int
    var ingestBatchWaitMs: Int
    var ingestWriters: Int
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
    var commitToVisibleP50Ms: Double
    var commitToVisibleP99Ms: Double
    var commitToVisibleMaxMs: Double
    var rollupLagSamples: Int
    var rollupLagP50Ms: Double
    var rollupLagP99Ms: Double
    var rollupLagMaxMs: Double
    var rollupLagUnder100MsPercent: Double
    var streamSnapshots: Int
    var streamChanges: Int
    var streamBytes: Int
    var streamErrors: Int
    var firstStreamError: String?
    var drainSeconds: Double
    var machineBusyPercent: Double
    var pipelineProcessPercent: Double
    var loadGeneratorPercent: Double
    var producerPercent: Double
    var streamClientPercent: Double
    var postgresqlPercent: Double
    var otherPercent: Double
    var appliedEvents: Int
    var rejectedRecords: Int
    var leafCountSum: Int64
    var verified: Bool
    var verification: String

    init(
        settings: PipelineBenchmark.Settings, measurement: PipelineBenchmark.Measurement, ingest: IngestConfiguration,
        rollup: RollupOptions, poolSize: Int, kafka: String, postgresql: String, kept: Bool
    ) {
        #if DEBUG
            build = "debug"
        #else
            build = "release"
        #endif
        date = ISO8601DateFormatter().string(from: Date())
        processors = ProcessInfo.processInfo.activeProcessorCount
        librdkafka = RdKafkaVersion.text
        self.postgresql = postgresql
        let pg = measurement.postgresqlSettings
        postgresqlFsync = pg["fsync"] ?? "?"
        postgresqlSynchronousCommit = pg["synchronous_commit"] ?? "?"
        postgresqlFullPageWrites = pg["full_page_writes"] ?? "?"
        postgresqlDurable = postgresqlFsync == "on" && postgresqlSynchronousCommit == "on"
        self.kafka = kafka
        partitions = Int(settings.partitions)
        database = settings.databaseName
        databaseKept = kept
        users = settings.users
        paths = settings.paths
        streams = settings.streams
        ingestBatchSize = ingest.batchSize
        ingestBatchWaitMs = ingest.batchWaitMilliseconds
        ingestWriters = ingest.writers
        rollupWorkers = rollup.workers
        rollupBatchSize = rollup.batchSize
        rollupIdleMs = rollup.idleMilliseconds
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
        commitToVisibleP50Ms = measurement.commitToVisible.p50Milliseconds
        commitToVisibleP99Ms = measurement.commitToVisible.p99Milliseconds
        commitToVisibleMaxMs = measurement.commitToVisible.maxMilliseconds
        rollupLagSamples = measurement.rollupLagSamples
        rollupLagP50Ms = measurement.rollupLag.p50Milliseconds
        rollupLagP99Ms = measurement.rollupLag.p99Milliseconds
        rollupLagMaxMs = measurement.rollupLag.maxMilliseconds
        rollupLagUnder100MsPercent = measurement.rollupLagUnder100Percent
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
        loadGeneratorPercent = 100 * cpu.clientSeconds / total
        producerPercent = 100 * measurement.producerCPUSeconds / total
        streamClientPercent = 100 * measurement.streamClientCPUSeconds / total
        postgresqlPercent = 100 * cpu.databaseSeconds / total
        otherPercent = 100 * cpu.otherSeconds / total
        appliedEvents = measurement.appliedEvents
        rejectedRecords = measurement.rejectedRecords
        leafCountSum = measurement.leafCountSum

        var problems: [String] = []
        if measurement.visibleEvents < measurement.trackedEvents {
            problems.append(
                "\(measurement.trackedEvents - measurement.visibleEvents) of \(measurement.trackedEvents) events of streamed users never became visible "
                    + "within \(settings.drainSeconds) s of the last publish")
        }
        if measurement.uncommittedEvents > 0 { problems.append("\(measurement.uncommittedEvents) events of the window never covered by an ingest commit") }
        if measurement.appliedEvents != measurement.totalEvents {
            problems.append("\(measurement.appliedEvents) of \(measurement.totalEvents) event ids applied")
        }
        if measurement.rejectedRecords > 0 { problems.append("\(measurement.rejectedRecords) records rejected") }
        if measurement.leafCountSum != Int64(measurement.totalEvents) {
            problems.append("the leaves' counts sum to \(measurement.leafCountSum), not \(measurement.totalEvents)")
        }
        if measurement.streams.errors > 0 {
            problems.append("\(measurement.streams.errors) stream errors (first: \(measurement.streams.firstError ?? "?"))")
        }
        verified = problems.isEmpty
        verification =
            problems.isEmpty
            ? "every event visible over SSE; \(measurement.appliedEvents) event ids applied, 0 rejected; leaf counts sum to \(measurement.leafCountSum); 0 stream errors"
            : problems.joined(separator: "; ")
    }

    var text: String {
        let number = BenchReport.number
        func ms(_ value: Double) -> String { String(format: "%.1f ms", value) }
        func percent(_ value: Double) -> String { String(format: "%.0f%%", value) }
        let durability =
            postgresqlDurable
            ? "durable: fsync on, synchronous_commit on"
            : "RELAXED: fsync \(postgresqlFsync), synchronous_commit \(postgresqlSynchronousCommit)"
        let sustained = achievedPublishRate >= 0.99 * offeredRate ? "" : ": the offered rate was NOT sustained"
        let behind = " (at most \(ms(maxBehindScheduleMs)) behind schedule\(sustained))"
        return """
            reddot bench pipeline: \(build) build, \(date), \(processors) CPUs, PostgreSQL \(postgresql) (\(durability)), librdkafka \(librdkafka)
            workload:   incr by 1 over \(users) users × \(paths) paths (root.bench.p0…), keyed by user; \(streams == users ? "\(streams) SSE streams, one per user" : "SSE streams for \(streams) of the users, one each")
            kafka:      \(kafka), \(partitions) partitions
            services:   in this process, as reddot run: ingest (batch \(ingestBatchSize), wait \(ingestBatchWaitMs) ms, \(ingestWriters) writers), rollup (\(rollupWorkers) workers, batch \(rollupBatchSize), idle \(rollupIdleMs) ms), serve (127.0.0.1, pool \(servePoolSize))
            load:       open loop, \(number(offeredRate)) events/s offered; \(warmupSeconds) s warm-up + \(measuredSeconds) s measured; \(number(Double(eventsInWindow))) events in the window published at \(number(achievedPublishRate)) events/s\(behind)
            visible:    publish → visible over SSE p50 \(ms(publishToVisibleP50Ms)), p99 \(ms(publishToVisibleP99Ms)), max \(ms(publishToVisibleMaxMs)) (\(number(Double(visibleInWindow))) of \(number(Double(trackedInWindow))) events\(trackedInWindow == eventsInWindow ? "" : " of streamed users"))
            parts:      publish → ingest commit p50 \(ms(publishToCommitP50Ms)), p99 \(ms(publishToCommitP99Ms)); ingest commit → visible p50 \(ms(commitToVisibleP50Ms)), p99 \(ms(commitToVisibleP99Ms)), max \(ms(commitToVisibleMaxMs))
            rollup lag: dirty mark → aggregates committed (reddot_rollup_lag_seconds, \(number(Double(rollupLagSamples))) samples in the window) p50 \(ms(rollupLagP50Ms)), p99 \(ms(rollupLagP99Ms)), max \(ms(rollupLagMaxMs)); \(String(format: "%.1f", rollupLagUnder100MsPercent))% under 100 ms
            streams:    \(number(Double(streamChanges))) change and \(number(Double(streamSnapshots))) snapshot events, \(number(Double(streamBytes))) bytes; \(streamErrors) errors\(firstStreamError.map { " (first: \($0))" } ?? ""); drain after the last publish \(BenchReport.seconds(drainSeconds))
            CPU:        machine \(percent(machineBusyPercent)) busy in the window: this process \(percent(pipelineProcessPercent + loadGeneratorPercent)) (of it the bench's producer \(percent(producerPercent)) and SSE client \(percent(streamClientPercent))), PostgreSQL backends \(percent(postgresqlPercent)), other \(percent(otherPercent)) (percent of all cores)
            target:     rollup lag p99 < 100 ms: \(rollupLagSamples == 0 ? "not measured" : rollupLagP99Ms < 100 ? "yes" : "NO")
            verified:   \(verified ? "yes, " : "NO: ")\(verification)
            database:   \(database) (\(databaseKept ? "kept" : "dropped"))
            """
    }
}
