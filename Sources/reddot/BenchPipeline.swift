import ArgumentParser
import BadgeBench
import LibPQ
import Logging
import Metrics
import Prometheus
import RedDotCommandLine

extension BenchCommand {
    /// `reddot bench pipeline`.
    struct Pipeline: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "pipeline",
            abstract: "Measure the whole pipeline: Kafka → ingest → rollup → an SSE client sees the change.",
            discussion: BenchScratch.discussion + PipelineBenchmark.discussion)

        @OptionGroup var database: DatabaseOptions
        @OptionGroup var kafka: KafkaOptions

        @Option(help: ArgumentHelp("Events published per second, on schedule (open loop).", valueName: "events/s"))
        var rate: Double = 5_000

        @Option(help: "Seconds of load measured, after the warm-up.")
        var seconds: Int = 30

        @Option(help: "Seconds of the same load before the measured window.")
        var warmup: Int = 5

        @Option(help: "Users the events are spread over (up to 10,000,000; a user comes into being with its first event).")
        var users: Int = 200

        @Option(name: .customLong("hot-users"), help: "The first N users (u0 …) get --hot-share of the events; the rest spread over all users. Default 0: every user alike.")
        var hotUsers: Int = 0

        @Option(name: .customLong("hot-share"), help: "The share of the events that goes to the --hot-users users. Default 0.5.")
        var hotShare: Double?

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

        @Flag(
            name: .customLong("ingest-alone"), inversion: .prefixedNo,
            help: "After the pipeline, measure ingest alone in the same run: --rate × --seconds events (10,000 to 1,000,000) of the same users and paths, as fast as ingest takes them, without the rollup.")
        var ingestAlone = true

        @OptionGroup var ingest: IngestOptions
        @OptionGroup var rollup: RollupOptions
        @OptionGroup var scratchSettings: BenchScratchOptions

        func validate() throws {
            if let problem = PipelineBenchmark.problem(
                rate: rate, seconds: seconds, warmup: warmup, users: users, streams: streams, paths: paths, partitions: partitions,
                poolSize: poolSize, drainSeconds: drainSeconds, hotUsers: hotUsers, hotShare: hotShare)
            {
                throw ValidationError(problem)
            }
        }

        func run() async throws {
            let logger = try LoggingSetup.logger(label: "reddot.bench", levelText: database.logLevel, defaultLevel: .warning)
            let runID = String(UInt64.random(in: 0...UInt64.max), radix: 36)
            let files = try scratchSettings.migrations()
            // The rollup's lag metric is read from here; the rest goes to Prometheus, as in reddot run.
            let lagCapture = RollupLagCapture()
            let registry = PrometheusCollectorRegistry()
            MetricsSystem.bootstrap(MultiplexMetricsHandler(factories: [PrometheusMetricsFactory(registry: registry), lagCapture]))

            var report = try await scratchSettings.run(
                runID: runID, database: database, migrations: files, applicationName: "reddot-bench-pipeline", logger: logger
            ) { scratch, scratchName, serverVersion in
                try await measure(
                    scratch: scratch, scratchName: scratchName, runID: runID, serverVersion: serverVersion, registry: registry,
                    lagCapture: lagCapture, logger: logger)
            }
            if ingestAlone {
                let aloneID = runID + "a"
                let alone = try await scratchSettings.run(
                    runID: aloneID, database: database, migrations: files, applicationName: "reddot-bench-pipeline", logger: logger
                ) { scratch, _, _ in
                    try await measureIngestAlone(scratch: scratch, runID: aloneID, logger: logger)
                }
                (report.ingestAloneRate, report.ingestAloneEvents, report.ingestAloneProblem) = alone
            }
            try scratchSettings.print(report, text: report.text)
            if !report.verified {
                throw fail("the pipeline did not deliver every event: \(report.verification)", code: ExitCodes.failure)
            }
            if let problem = report.ingestAloneProblem {
                throw fail("ingest alone did not complete: \(problem)", code: ExitCodes.failure)
            }
        }

        /// Ingest alone over `--rate × --seconds` incr events (10,000 to 1,000,000) of the same
        /// users and paths, on a topic and a scratch database of its own, without the rollup.
        private func measureIngestAlone(scratch: PGConfiguration, runID: String, logger: Logger) async throws -> (Double, Int, String?) {
            let kafka = try BenchCommand.kafka(self.kafka, partitions: partitions, runID: runID, logger: logger)
            defer { kafka.close() }
            let wanted = rate * Double(seconds)
            let events = wanted.isFinite ? Int(min(1_000_000, max(10_000, wanted))) : 10_000
            var ingestSettings = ingest.settings
            ingestSettings.rollUp = false
            var settings = IngestBenchmark.Settings(
                events: events, users: users, paths: paths, partitions: partitions, ingest: ingestSettings, rate: nil, seed: seed &+ 1, runID: runID,
                kafka: kafka.configuration, topic: kafka.topic, isMockCluster: kafka.cluster != nil, database: scratch)
            settings.workload = .increments
            let alone = try await IngestBenchmark(settings: settings, logger: logger).ingestAlone()
            return (alone.rate, alone.events, alone.problem)
        }

        /// The services as reddot run makes them, against the scratch database, and the run.
        private func measure(
            scratch: PGConfiguration, scratchName: String, runID: String, serverVersion: String, registry: PrometheusCollectorRegistry,
            lagCapture: RollupLagCapture, logger: Logger
        ) async throws -> PipelineReport {
            let kafka = try BenchCommand.kafka(self.kafka, partitions: partitions, runID: runID, logger: logger)
            defer { kafka.close() }
            // The services connect as reddot run would, with the scratch database as --database-url.
            let scratchOptions = try DatabaseOptions.parse(["--database-url", scratch.connectionString])
            var ingestConfiguration = try ingest.configuration(kafka: self.kafka, database: scratchOptions)
            ingestConfiguration.kafka = kafka.configuration
            ingestConfiguration.topic = kafka.topic
            ingestConfiguration.settings.group = ingest.settings.group ?? "reddot-bench-\(runID)"
            ingestConfiguration.settings.deadLetterTopic = ingest.settings.deadLetterTopic ?? kafka.topic + ".dlq"

            var settings = PipelineBenchmark.Settings(
                rate: rate, seconds: seconds, warmup: warmup, users: users, streams: streams ?? users, paths: paths, partitions: partitions,
                drainSeconds: drainSeconds, seed: seed, runID: runID, kafka: kafka.configuration, topic: kafka.topic,
                isMockCluster: kafka.cluster != nil, database: scratch, databaseName: scratchName)
            settings.hotUsers = hotUsers
            settings.hotShare = hotUsers > 0 ? hotShare ?? 0.5 : 0
            let secret = randomBenchSecret()
            let serve = try ServeOptions.parse([
                "--host", "127.0.0.1", "--port", "0", "--jwt-hs256-secret", secret, "--pool-size", "\(poolSize)",
            ])
            let measurement = try await PipelineBenchmark(settings: settings, logger: logger).run(
                ingest: ingestConfiguration,
                rollup: {
                    // The change feed to the run's own topic, on the same brokers.
                    var options = rollup
                    options.settings.changesTopic = kafka.topic + ".changes"
                    return try options.services(
                        database: scratchOptions, brokers: kafka.configuration["bootstrap.servers"] ?? self.kafka.brokers, logger: logger)
                },
                serve: { onRunning in
                    try await serve.makeServices(database: scratchOptions, registry: registry, logger: logger, onRunning: onRunning)
                },
                secret: secret, lagCapture: lagCapture)
            return PipelineReport(
                settings: settings, measurement: measurement, ingest: ingestConfiguration, rollupWorkers: rollup.settings.workers,
                rollupBatchSize: rollup.settings.batchSize, rollupIdleMilliseconds: rollup.settings.idleMilliseconds, poolSize: poolSize,
                kafka: kafka.reportName, postgresql: serverVersion,
                kept: scratchSettings.keep)
        }
    }
}
