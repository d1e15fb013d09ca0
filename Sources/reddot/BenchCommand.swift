public import ArgumentParser
public import BadgeBench
import BadgeIngest
import BadgeStore
import LibPQ
import Logging
import RdKafka
import RedDotCommandLine

/// `reddot bench`: measurements anyone can rerun; the figures in BENCHMARKS.md come from here.
/// The benchmarks themselves live in BadgeBench; these commands map their options to settings.
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Measure RedDot on this machine.",
        subcommands: [Ingest.self, Query.self, Pipeline.self, Backlog.self])

    /// `reddot bench ingest`.
    struct Ingest: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "ingest",
            abstract: "Measure ingest end to end (Kafka → PostgreSQL) against the plain batched upsert of the same rows.",
            discussion: BenchScratch.discussion + IngestBenchmark.discussion)

        @OptionGroup var database: DatabaseOptions
        @OptionGroup var kafka: KafkaOptions

        @Option(help: "How many events to publish.")
        var events: Int = 100_000

        @Option(help: "How many distinct users the events are spread over (the Kafka key).")
        var users: Int = 10_000

        @Option(help: "How many distinct paths per user (root.bench.p0…).")
        var paths: Int = 20

        @Option(help: "Partitions of the mock cluster's topic (ignored with --brokers).")
        var partitions: Int32 = 8

        @Option(name: .customLong("batch-size"), help: "Ingest's batch size, and the upsert's.")
        var batchSize: Int = IngestSettings.defaults.batchSize

        @Option(name: .customLong("batch-wait-ms"), help: "How long an ingest batch may wait to fill, in milliseconds.")
        var batchWaitMilliseconds: Int = IngestSettings.defaults.batchWaitMilliseconds

        @Option(help: "Ingest's writer threads (each with its own database connection), as reddot ingest --writers.")
        var writers: Int = IngestSettings.defaults.writers

        /// Ingest's settings: the defaults with this command's batching and writers.
        var ingest: IngestSettings {
            var ingest = IngestSettings.defaults
            (ingest.batchSize, ingest.batchWaitMilliseconds, ingest.writers) = (batchSize, batchWaitMilliseconds, writers)
            return ingest
        }

        @Option(help: ArgumentHelp("Publish at most this many events/s (default: as fast as possible).", valueName: "events/s"))
        var rate: Double?

        @Option(help: "The workload generator's seed.")
        var seed: UInt64 = 42

        @Option(help: "counter (90% incr, 10% set), items (90% add of a new item, 10% remove of an earlier one) or increments (every event an incr by 1).")
        var workload: BenchWorkload.Kind = .counter

        @Flag(help: "Use the in-process mock Kafka cluster (the default unless --brokers is given).")
        var mock = false

        @OptionGroup var scratchSettings: BenchScratchOptions

        func validate() throws {
            if let problem = IngestBenchmark.problem(
                events: events, users: users, paths: paths, partitions: partitions, ingest: ingest, rate: rate)
            {
                throw ValidationError(problem)
            }
            if mock, kafka.brokerList != nil { throw ValidationError("--mock and --brokers exclude each other") }
        }

        func run() async throws {
            let logger = try LoggingSetup.logger(label: "reddot.bench", levelText: database.logLevel, defaultLevel: .warning)
            let runID = String(UInt64.random(in: 0...UInt64.max), radix: 36)
            let files = try scratchSettings.migrations()
            let report = try await scratchSettings.run(
                runID: runID, database: database, migrations: files, applicationName: "reddot-bench-ingest", logger: logger
            ) { scratch, scratchName, serverVersion in
                let kafka = try BenchCommand.kafka(kafka, partitions: partitions, runID: runID, logger: logger)
                defer { kafka.close() }
                var settings = IngestBenchmark.Settings(
                    events: events, users: users, paths: paths, partitions: partitions, ingest: ingest, rate: rate, seed: seed, runID: runID,
                    kafka: kafka.configuration, topic: kafka.topic, isMockCluster: kafka.cluster != nil, database: scratch)
                settings.workload = workload
                return try await IngestBenchmark(settings: settings, logger: logger).run(
                    brokers: kafka.brokers, postgresql: serverVersion, database: scratchName, kept: scratchSettings.keep)
            }
            try scratchSettings.print(report, text: report.text)
            if !report.verified {
                throw fail("events were lost: \(report.verification)", code: ExitCodes.failure)
            }
        }
    }
}

extension BenchCommand {
    /// The Kafka of a bench run: with no `--brokers`, an in-process mock cluster with a fresh
    /// topic of `partitions` partitions; else the brokers and `--topic` (by default a new topic
    /// `reddot.bench.<runID>`).
    ///
    /// - Throws: `ValidationError` for a bad topic name; `KafkaError`.
    static func kafka(_ options: KafkaOptions, partitions: Int32, runID: String, logger: Logger) throws -> BenchKafka {
        let useMock = options.brokerList == nil
        let topic = KafkaOptions.nonEmpty(options.topicName) ?? (useMock ? "reddot.bench" : "reddot.bench.\(runID)")
        if let problem = KafkaOptions.topicProblem(topic) { throw ValidationError(problem) }
        return try BenchKafka(
            brokers: useMock ? nil : options.brokers, configuration: options.configuration(), topic: topic, partitions: partitions,
            logger: logger)
    }
}

extension BenchWorkload.Kind: ExpressibleByArgument {}
