import ArgumentParser
import BadgeBench
import RedDotCommandLine

extension BenchCommand {
    /// `reddot bench query`.
    struct Query: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "query",
            abstract: "Measure tree reads over HTTP against pgbench running the store's own tree query.",
            discussion: BenchScratch.discussion + QueryBenchmark.discussion)

        @OptionGroup var database: DatabaseOptions

        @Option(help: "How many users to load (each with 20 nodes).")
        var users: Int = 200_000

        @Option(help: "HTTP connections, each with one request in flight.")
        var connections: Int = 32

        @Option(name: .customLong("client-threads"), help: "Threads of the HTTP client; the connections are split among them.")
        var clientThreads: Int = 2

        @Option(name: .customLong("pool-size"), help: "The query service's database connections.")
        var poolSize: Int = 8

        @Option(
            help: ArgumentHelp(
                "Requests per second offered in all (open loop: sent on schedule, latency counted from the scheduled time); 0: each connection sends its next request as soon as its answer is in (closed loop, the most the service can do).",
                valueName: "requests/s"))
        var rate: Int = 0

        @Option(
            name: .customLong("tree-cache-mb"),
            help: "The query service's cache of whole trees, in MiB, as reddot serve's --tree-cache-mb (default 64); 0 reads every answer from PostgreSQL.")
        var treeCacheMegabytes: Int = 64

        @Option(name: .customLong("pgbench-clients"), help: "pgbench's clients (-c). Default: --connections.")
        var pgbenchClients: Int?

        @Option(name: .customLong("pgbench-threads"), help: "pgbench's threads (-j).")
        var pgbenchThreads: Int = 2

        @Option(help: "Seconds measured, for HTTP and for pgbench each.")
        var duration: Int = 20

        @Option(help: "Seconds of unmeasured load before each measurement.")
        var warmup: Int = 3

        @Option(name: .customLong("sample-users"), help: "How many users are read (each gets a token), spread evenly over all.")
        var sampleUsers: Int = 20_000

        @Option(name: .customLong("load-batch-users"), help: "Users per load transaction (20 rows each).")
        var loadBatchUsers: Int = 500

        @Option(name: .customLong("load-writers"), help: "Connections loading in parallel; as many rollup tasks.")
        var loadWriters: Int = 2

        @Option(help: "The seed of the counts and of the readers' choice of users.")
        var seed: UInt64 = 42

        @Option(name: .customLong("pgbench"), help: ArgumentHelp("The pgbench executable.", valueName: "path"))
        var pgbenchPath: String?

        @OptionGroup var scratchSettings: BenchScratchOptions

        func validate() throws {
            if let problem = QueryBenchmark.problem(
                users: users, connections: connections, clientThreads: clientThreads, poolSize: poolSize,
                treeCacheMegabytes: treeCacheMegabytes, rate: rate, pgbenchClients: pgbenchClients, pgbenchThreads: pgbenchThreads,
                duration: duration, warmup: warmup, sampleUsers: sampleUsers, loadBatchUsers: loadBatchUsers, loadWriters: loadWriters)
            {
                throw ValidationError(problem)
            }
        }

        func run() async throws {
            let logger = try LoggingSetup.logger(label: "reddot.bench", levelText: database.logLevel, defaultLevel: .warning)
            let runID = String(UInt64.random(in: 0...UInt64.max), radix: 36)
            let files = try scratchSettings.migrations()
            let pgbench: PGBench
            do {
                pgbench = try await onThread(named: "reddot.bench.pgbench") { [pgbenchPath] in try PGBench.locate(pgbenchPath) }
            } catch {
                throw fail("\(error)", code: ExitCodes.unavailable)
            }
            let report = try await scratchSettings.run(
                runID: runID, database: database, migrations: files, applicationName: "reddot-bench-query", logger: logger
            ) { scratch, scratchName, serverVersion in
                let settings = QueryBenchmark.Settings(
                    users: users, sampleUsers: min(sampleUsers, users), connections: connections, clientThreads: min(clientThreads, connections),
                    poolSize: poolSize, treeCacheBytes: treeCacheMegabytes << 20, rate: rate, pgbenchClients: pgbenchClients ?? connections,
                    pgbenchThreads: pgbenchThreads, duration: duration, warmup: warmup, loadBatchUsers: loadBatchUsers, loadWriters: loadWriters,
                    seed: seed, database: scratch, databaseName: scratchName)
                let benchmark = QueryBenchmark(settings: settings, pgbench: pgbench, metrics: { MetricsSetup.bootstrap() }, logger: logger)
                return try await benchmark.run(postgresql: serverVersion, database: scratchName, kept: scratchSettings.keep)
            }
            try scratchSettings.print(report, text: report.text)
            if report.httpErrors > 0 || report.pgbenchFailed > 0 {
                throw fail(
                    "\(report.httpErrors) HTTP errors, \(report.pgbenchFailed) failed pgbench transactions\(report.firstError.map { ": \($0)" } ?? "")",
                    code: ExitCodes.failure)
            }
        }
    }
}
