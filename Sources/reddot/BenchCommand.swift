import ArgumentParser
import BadgeStore
import Foundation
import LibPQ
import Logging
import RdKafka

/// `reddot bench`: measurements anyone can rerun; the figures in BENCHMARKS.md come from here.
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Measure RedDot on this machine.",
        subcommands: [Ingest.self, Query.self, Pipeline.self])

    /// `reddot bench ingest`.
    struct Ingest: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "ingest",
            abstract: "Measure ingest end to end (Kafka → PostgreSQL) against the plain batched upsert of the same rows.",
            discussion: BenchScratchOptions.discussion + """
                Kafka: by default an in-process librdkafka mock cluster with a fresh topic of \
                --partitions partitions. That broker keeps only about the last 5 MB of each \
                partition, so ingest is started first and the producer never runs more than about \
                2 MB per partition ahead of the commits. With --brokers, the bench uses real brokers \
                and the topic of --topic (default: a new topic reddot.bench.<random>, which needs \
                auto.create.topics.enable); use a new or empty topic.

                The workload: --events direct-operation events (90% incr by 1, 10% set with a count \
                of 0-9) over --users users × --paths paths root.bench.p0…, JSON as producers send \
                them, keyed by user, from a seeded generator (--seed). Unthrottled by default; \
                --rate throttles the producer to that many events/s, which is how latency is measured \
                (the target is p99 under 1 s at 20000 events/s).

                Phase 1, ingest: one IngestService runs in-process; after one warm-up event per \
                partition is committed (the group has joined), the events are published while it \
                consumes. Reported: events/s from the first publish to the last commit, and each \
                event's latency from its produce() call to the commit of the batch that holds it \
                (matched by partition and offset from the delivery reports), p50/p99/max. Then \
                the bench checks that every event was committed: the offsets stored in PostgreSQL \
                equal the log-end offsets of every partition, and the number of applied event ids \
                equals --events. If not, it says what was lost and exits 1.

                Phase 2, the machine's limit: the same (user, path, count) rows, in batches of \
                --batch-size (rows made distinct within each batch), upserted into a fresh table \
                shaped like badge_state with INSERT … SELECT FROM unnest(…) ON CONFLICT DO UPDATE, \
                one writer, one transaction per batch, no Kafka, no JSON, no dedupe: rows/s. The \
                report gives ingest events/s as a percentage of it (the target is 60% or more).

                Phase 3, where ingest's time goes: a copy of the workload for other users is \
                decoded into batches on one thread (events/s), then written with ingest's own \
                transaction (offsets, dedupe, badge writes, dirty marks) by one writer without \
                Kafka (events/s).

                The report says whether this is a debug or a release build; only release figures \
                mean anything. Exit codes: 0 measured and verified; 1 events lost or a failure; \
                64 bad arguments; 65 no migrations; 69 the database cannot be reached.
                """)

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
        var batchSize: Int = 5_000

        @Option(name: .customLong("batch-wait-ms"), help: "How long an ingest batch may wait to fill, in milliseconds.")
        var batchWaitMilliseconds: Int = 100

        @Option(help: ArgumentHelp("Publish at most this many events/s (default: as fast as possible).", valueName: "events/s"))
        var rate: Double?

        @Option(help: "The workload generator's seed.")
        var seed: UInt64 = 42

        @Flag(help: "Use the in-process mock Kafka cluster (the default unless --brokers is given).")
        var mock = false

        @OptionGroup var scratchSettings: BenchScratchOptions

        func validate() throws {
            guard (1...1_000_000_000).contains(events) else { throw ValidationError("--events takes 1…1000000000") }
            guard users >= 1, users <= Int(Int32.max) else { throw ValidationError("--users takes a number ≥ 1") }
            guard paths >= 1, paths <= 1_000_000 else { throw ValidationError("--paths takes 1…1000000") }
            guard partitions >= 1, partitions <= 10_000 else { throw ValidationError("--partitions takes 1…10000") }
            guard batchSize >= 1, batchSize <= 100_000 else { throw ValidationError("--batch-size takes 1…100000") }
            guard batchWaitMilliseconds >= 0 else { throw ValidationError("--batch-wait-ms takes a number ≥ 0") }
            // The schedule is UInt64(index / rate * 1e9) ns: a tiny rate would trap.
            if let rate, !(rate >= 1 && rate <= 100_000_000) { throw ValidationError("--rate takes 1…100000000 events/s") }
            if mock, kafka.brokerList != nil { throw ValidationError("--mock and --brokers exclude each other") }
        }

        func run() async throws {
            let logger = try LoggingSetup.logger(label: "reddot.bench", levelText: database.logLevel, defaultLevel: .warning)
            let runID = String(UInt64.random(in: 0...UInt64.max), radix: 36)
            let useMock = kafka.brokerList == nil

            let files = try BenchScratch.migrations(scratchSettings.migrationsDirectory)

            let report = try await BenchScratch.run(
                runID: runID, server: database.configuration(), applicationName: "reddot-bench-ingest", migrations: files, keep: scratchSettings.keep,
                logger: logger
            ) { scratch, scratchName, serverVersion in
                try await measure(
                    scratch: scratch, scratchName: scratchName, runID: runID, useMock: useMock, serverVersion: serverVersion, logger: logger)
            }
            try BenchScratch.print(report, text: report.text, json: scratchSettings.json)
            if !report.verified {
                throw fail("events were lost: \(report.verification)", code: ExitCodes.failure)
            }
        }

        private func measure(
            scratch: PGConfiguration, scratchName: String, runID: String, useMock: Bool, serverVersion: String, logger: Logger
        ) async throws -> BenchReport {
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
            let settings = IngestBenchmark.Settings(
                events: events, users: users, paths: paths, partitions: partitions, batchSize: batchSize,
                batchWaitMilliseconds: batchWaitMilliseconds, rate: rate, seed: seed, runID: runID,
                kafka: kafkaConfiguration, topic: topic, isMockCluster: useMock, database: scratch)
            let benchmark = IngestBenchmark(settings: settings, logger: logger)

            progress("generating \(events) events over \(users) users × \(paths) paths")
            let workload = try BenchWorkload(events: events, users: users, paths: paths, seed: seed, idPrefix: runID, userPrefix: "u")
            progress("phase 1: ingest through \(useMock ? "the in-process mock cluster" : "brokers \(kafka.brokers)"), topic \(topic)")
            let ingest = try await benchmark.runIngest(workload)
            progress("phase 2: plain batched upsert of the same rows")
            let upsert = try await benchmark.runUpsert(workload)
            progress("phase 3: decode alone, then ingest's transactions alone")
            let copy = try BenchWorkload(events: events, users: users, paths: paths, seed: seed, idPrefix: runID + "-sql", userPrefix: "s")
            let breakdown = try await benchmark.runBreakdown(copy)

            return BenchReport(
                settings: settings, workload: workload, ingest: ingest, upsert: upsert, breakdown: breakdown,
                kafka: useMock ? "mock cluster (in-process)" : "brokers \(kafka.brokers)",
                postgresql: serverVersion, database: scratchName, kept: scratchSettings.keep)
        }

        private func progress(_ message: String) {
            FileHandle.standardError.write(Data("bench: \(message)\n".utf8))
        }

        /// `server` with its database replaced by `name`: a URI's path, or a `dbname=` key
        /// appended to a key=value string (a later key wins in libpq).
        static func connectionString(_ server: String, database name: String) -> String {
            guard let schemeEnd = server.range(of: "://") else {
                return server.isEmpty ? "dbname=\(name)" : "\(server) dbname=\(name)"
            }
            let rest = server[schemeEnd.upperBound...]
            let queryStart = rest.firstIndex(of: "?") ?? rest.endIndex
            let authorityEnd = rest[..<queryStart].firstIndex(of: "/") ?? queryStart
            return String(server[..<authorityEnd]) + "/" + name + String(server[queryStart...])
        }

        /// Creates the scratch database; returns the server's version.
        static func createDatabase(_ name: String, server: PGConfiguration, logger: Logger) async throws -> String {
            let pool = PGPool(configuration: server, maximumConnections: 1, logger: logger)
            defer { pool.close() }
            do {
                return try await pool.withConnection { connection in
                    // The name is ours (letters and digits), never input: it cannot be bound.
                    _ = try connection.query(PGStatement("bench.create_database", "CREATE DATABASE \(name)", prepared: false))
                    return try connection.query(PGStatement("bench.server_version", "SHOW server_version", prepared: false))
                        .singleRow().decode(0, as: String.self)
                }
            } catch let error as PGError {
                let what = error.code == .connectionFailed ? "cannot connect to the database" : "cannot create the scratch database \(name)"
                throw fail("\(what): \(error)", code: error.exitCode)
            }
        }

        static func dropDatabase(_ name: String, server: PGConfiguration, logger: Logger) async {
            let pool = PGPool(configuration: server, maximumConnections: 1, logger: logger)
            defer { pool.close() }
            do {
                try await pool.withConnection { connection in
                    _ = try connection.query(PGStatement("bench.drop_database", "DROP DATABASE IF EXISTS \(name) WITH (FORCE)", prepared: false))
                }
            } catch {
                FileHandle.standardError.write(Data("reddot: could not drop the scratch database \(name): \(error)\n".utf8))
            }
        }
    }
}

/// The scratch database of one bench run: created on the server of `--database-url`, migrated
/// with the real migrations, dropped afterwards unless `--keep`. Failures become exit codes with
/// a sentence.
/// The settings of the scratch database every bench runs in, and how its report is printed.
struct BenchScratchOptions: ParsableArguments {
    /// The opening paragraph of every bench's help.
    static let discussion = """
        Nothing touches real data. The bench creates a scratch database reddot_bench_<random> \
        on the server of --database-url (so that role needs CREATEDB), migrates it with the \
        real migrations, runs everything there and drops it at the end (unless --keep). An \
        interrupted bench leaves its scratch database behind: drop it by hand.


        """

    @Flag(help: "Keep the scratch database (its name is printed).")
    var keep = false

    @Flag(help: "Print the report as JSON on stdout.")
    var json = false

    @Option(
        name: .customLong("migrations"),
        help: ArgumentHelp(
            "The migrations directory. Default: REDDOT_MIGRATIONS_DIR, else as 'reddot migrate' finds it.",
            valueName: "dir"))
    var migrationsDirectory: String?
}

enum BenchScratch {
    /// The migration files of `directory` (else where `reddot migrate` finds them).
    static func migrations(_ directory: String?) throws -> [MigrationFile] {
        do {
            let arguments = directory.map { ["--migrations", $0] } ?? []
            return try MigrationFile.load(from: try MigrateCommand.Options.parse(arguments).resolveDirectory())
        } catch let error as MigrationError {
            throw fail(error.message, code: error.exitCode)
        }
    }

    /// Creates `reddot_bench_<runID>`, migrates it, and runs `body` with its configuration, name
    /// and the server's version; drops it afterwards (also on failure) unless `keep`.
    static func run<T>(
        runID: String, server: PGConfiguration, applicationName: String, migrations files: [MigrationFile], keep: Bool,
        logger: Logger, _ body: (PGConfiguration, String, String) async throws -> T
    ) async throws -> T {
        let name = "reddot_bench_\(runID)"
        let scratch = PGConfiguration(
            connectionString: BenchCommand.Ingest.connectionString(server.connectionString, database: name),
            applicationName: applicationName)
        let serverVersion = try await BenchCommand.Ingest.createDatabase(name, server: server, logger: logger)
        let value: T
        do {
            let pool = PGPool(configuration: scratch, maximumConnections: 1, logger: logger)
            defer { pool.close() }
            let migrator = Migrator(files: files, logger: logger)
            try await pool.withConnection { connection in _ = try migrator.up(on: connection) }
            value = try await body(scratch, name, serverVersion)
        } catch {
            if !keep { await BenchCommand.Ingest.dropDatabase(name, server: server, logger: logger) }
            if let error = error as? ExitCode { throw error }
            if let error = error as? PGError { throw fail("database error: \(error)", code: error.exitCode) }
            throw fail("\(error)", code: ExitCodes.failure)
        }
        if !keep { await BenchCommand.Ingest.dropDatabase(name, server: server, logger: logger) }
        return value
    }

    /// Prints a report: its text, or with `json` the report in snake-case JSON.
    static func print(_ report: some Encodable, text: String, json: Bool) throws {
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            encoder.keyEncodingStrategy = .convertToSnakeCase
            Swift.print(String(decoding: try encoder.encode(report), as: UTF8.self))
        } else {
            Swift.print(text)
        }
    }
}

/// What `reddot bench ingest` prints.
struct BenchReport: Encodable {
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
    var incrementEvents: Int
    var setEvents: Int
    var batchSize: Int
    var batchWaitMs: Int
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
    var verified: Bool
    var verification: String

    init(
        settings: IngestBenchmark.Settings, workload: BenchWorkload, ingest: IngestMeasurement, upsert: UpsertMeasurement,
        breakdown: BreakdownMeasurement, kafka: String, postgresql: String, database: String, kept: Bool
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
        self.kafka = kafka
        self.database = database
        databaseKept = kept
        events = settings.events
        users = settings.users
        paths = settings.paths
        partitions = ingest.partitionsWritten
        incrementEvents = workload.incrementCount
        setEvents = workload.count - workload.incrementCount
        batchSize = settings.batchSize
        batchWaitMs = settings.batchWaitMilliseconds
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

    var text: String {
        let rateText = rateLimit.map { "\(Self.number($0)) events/s" } ?? "unthrottled"
        let percent = String(format: "%.1f", ingestPercentOfUpsert)
        let distinct = upsertDistinctRows == upsertRows ? "" : " (\(upsertDistinctRows) distinct within their batches)"
        return """
            reddot bench ingest: \(build) build, \(date), \(processors) CPUs, PostgreSQL \(postgresql), librdkafka \(librdkafka)
            workload:   \(events) events (\(incrementEvents) incr, \(setEvents) set) over \(users) users × \(paths) paths, keyed by user
            kafka:      \(kafka), \(partitions) partitions; batch size \(batchSize), batch wait \(batchWaitMs) ms; rate \(rateText)
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
