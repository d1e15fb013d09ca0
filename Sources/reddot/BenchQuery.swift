import ArgumentParser
import BadgeAPI
import BadgeCore
import BadgeStore
import Foundation
import Hummingbird
import LibPQ
import Logging
import ServiceLifecycle

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

extension BenchCommand {
    /// `reddot bench query`.
    struct Query: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "query",
            abstract: "Measure tree reads over HTTP against pgbench running the store's own tree query.",
            discussion: BenchScratchOptions.discussion + """
                Load: --users users named by number (0, 1, …), each with the same 20 nodes \
                (root.chat.direct.d0…d5, root.chat.group.g0…g3, root.promotion.p0…p4, root.feed.like, \
                .comment, .follow, .mention, root.system.update) set to a count of 1-9 drawn from \
                --seed: badge_state rows in transactions of --load-batch-users users through \
                BadgeStore.apply, --load-writers connections in parallel, the users marked dirty; then \
                the rollup (recomputeDirtyUsers, one task per writer) fills badge_aggregate (27 rows per \
                user) and user_version; then VACUUM ANALYZE and CHECKPOINT. Reported: rows/s and users/s.

                Phase 1, HTTP: the query service (BadgeAPI, the ChangeHub with a tree cache of \
                --tree-cache-mb, a pool of --pool-size connections, Prometheus metrics as in reddot \
                serve) runs in this process on 127.0.0.1 and a free port. With the cache on (as \
                in reddot serve), repeated reads of an unchanged tree skip PostgreSQL: the report \
                gives the share answered from it; --tree-cache-mb 0 measures every read going to \
                PostgreSQL, the like-for-like comparison with pgbench. The readers are --sample-users users spread evenly over \
                all (user i × (--users / --sample-users)), each with its own HS256 token, signed before the \
                clock starts. A small HTTP/1.1 client (--client-threads threads polling --connections \
                keep-alive connections, one request in flight per connection) sends GET \
                /v1/users/{user}/badges (the whole tree) for random sampled users, with that user's \
                token, for --warmup seconds unmeasured and then --duration seconds measured. By \
                default each connection sends its next request as soon as its answer is in (closed \
                loop: the most the service can do, where latency is mostly queueing); --rate R \
                offers R requests/s on schedule instead (open loop; sent on a 1 ms tick), for \
                latency at a given load. \
                Reported: requests/s, latency p50/p99/max (from writing the request, or from its \
                scheduled time with --rate, to reading the last byte of the answer), and errors \
                (any answer but 200, any broken connection). \
                Before that, three answers are decoded and checked against the loaded counts.

                Phase 2, the machine's limit for the same read: after the server has stopped, \
                pgbench -n -M prepared runs BadgeStore.treeQuerySQL (only $1, $2, $3 renamed to \
                pgbench variables; the whole tree: 'root' and nlevel 17) for random users of the same \
                sample, with --pgbench-clients clients (default: --connections) on --pgbench-threads \
                threads, against the same database: a --warmup run, then a --duration run. \
                Reported: tps, latency average, failed transactions; and the HTTP rate as a \
                percentage of it (the target: 50% or more, with p99 under 10 ms at 200000 users).

                During both measurements the bench samples CPU time (Linux /proc: the machine, \
                this process, pgbench, and the PostgreSQL backends whose process title names the \
                scratch database; each client thread's own clock) and reports the CPU each request \
                costs in the service, the HTTP client or pgbench, and PostgreSQL, and the share of \
                the machine that everything else took (other processes: a busy machine shows here). \
                pgbench is looked up in --pgbench, then PATH, then /usr/lib/postgresql/*/bin.

                The report says whether this is a debug or a release build; only release figures \
                mean anything. Exit codes: 0 measured without errors; 1 errors or a failure; 64 bad \
                arguments; 65 no migrations; 69 the database cannot be reached, or no pgbench.
                """)

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
            guard users >= 1, users <= 100_000_000 else { throw ValidationError("--users takes 1…100000000") }
            guard (1...10_000).contains(connections) else { throw ValidationError("--connections takes 1…10000") }
            guard (1...256).contains(clientThreads) else { throw ValidationError("--client-threads takes 1…256") }
            guard (1...256).contains(poolSize) else { throw ValidationError("--pool-size takes 1…256") }
            guard (0...65_536).contains(treeCacheMegabytes) else { throw ValidationError("--tree-cache-mb takes 0…65536") }
            guard (0...10_000_000).contains(rate) else { throw ValidationError("--rate takes 0…10000000") }
            if let pgbenchClients, !(1...10_000).contains(pgbenchClients) { throw ValidationError("--pgbench-clients takes 1…10000") }
            guard (1...256).contains(pgbenchThreads) else { throw ValidationError("--pgbench-threads takes 1…256") }
            guard (1...3_600).contains(duration) else { throw ValidationError("--duration takes 1…3600 seconds") }
            guard (0...600).contains(warmup) else { throw ValidationError("--warmup takes 0…600 seconds") }
            guard sampleUsers >= 1 else { throw ValidationError("--sample-users takes a number ≥ 1") }
            guard (1...100_000).contains(loadBatchUsers) else { throw ValidationError("--load-batch-users takes 1…100000") }
            guard (1...64).contains(loadWriters) else { throw ValidationError("--load-writers takes 1…64") }
        }

        func run() async throws {
            let logger = try LoggingSetup.logger(label: "reddot.bench", levelText: database.logLevel, defaultLevel: .warning)
            let runID = String(UInt64.random(in: 0...UInt64.max), radix: 36)

            let files = try BenchScratch.migrations(scratchSettings.migrationsDirectory)
            let pgbench: PGBench
            do {
                pgbench = try await onThread(named: "reddot.bench.pgbench") { [pgbenchPath] in try PGBench.locate(pgbenchPath) }
            } catch {
                throw fail("\(error)", code: ExitCodes.unavailable)
            }

            let report = try await BenchScratch.run(
                runID: runID, server: database.configuration(), applicationName: "reddot-bench-query", migrations: files, keep: scratchSettings.keep,
                logger: logger
            ) { scratch, scratchName, serverVersion in
                let settings = QueryBenchmark.Settings(
                    users: users, sampleUsers: min(sampleUsers, users), connections: connections, clientThreads: min(clientThreads, connections),
                    poolSize: poolSize, treeCacheBytes: treeCacheMegabytes << 20, rate: rate, pgbenchClients: pgbenchClients ?? connections, pgbenchThreads: pgbenchThreads,
                    duration: duration, warmup: warmup, loadBatchUsers: loadBatchUsers, loadWriters: loadWriters, seed: seed,
                    database: scratch, databaseName: scratchName)
                let benchmark = QueryBenchmark(settings: settings, pgbench: pgbench, logger: logger)
                return try await benchmark.run(postgresql: serverVersion, database: scratchName, kept: scratchSettings.keep)
            }
            try BenchScratch.print(report, text: report.text, json: scratchSettings.json)
            if report.httpErrors > 0 || report.pgbenchFailed > 0 {
                throw fail(
                    "\(report.httpErrors) HTTP errors, \(report.pgbenchFailed) failed pgbench transactions\(report.firstError.map { ": \($0)" } ?? "")",
                    code: ExitCodes.failure)
            }
        }
    }
}

/// The query benchmark behind `reddot bench query`: loads users into a scratch database, reads
/// their trees over HTTP from an in-process query service, then runs pgbench on the store's own
/// tree query for the same users on the same database.
struct QueryBenchmark: Sendable {
    struct Settings: Sendable {
        var users: Int
        var sampleUsers: Int
        var connections: Int
        var clientThreads: Int
        var poolSize: Int
        var treeCacheBytes: Int
        /// Requests per second offered (0: closed loop).
        var rate: Int
        var pgbenchClients: Int
        var pgbenchThreads: Int
        var duration: Int
        var warmup: Int
        var loadBatchUsers: Int
        var loadWriters: Int
        var seed: UInt64
        /// The scratch database, migrated.
        var database: PGConfiguration

        /// The scratch database's name (its backends' process titles show it).
        var databaseName: String

        /// Sampled user `i` is user `i * stride`.
        var stride: Int { users / sampleUsers }
    }

    let settings: Settings
    let pgbench: PGBench
    let logger: Logger

    /// The nodes every user gets.
    static let nodePaths: [String] =
        (0..<6).map { "root.chat.direct.d\($0)" } + (0..<4).map { "root.chat.group.g\($0)" }
        + (0..<5).map { "root.promotion.p\($0)" }
        + ["root.feed.like", "root.feed.comment", "root.feed.follow", "root.feed.mention", "root.system.update"]

    /// The nodes of every user's tree: the set nodes and their ancestors.
    static var treeNodeCount: Int {
        var nodes: Set<String> = []
        for text in nodePaths {
            var labels = text.split(separator: ".")
            while !labels.isEmpty {
                nodes.insert(labels.joined(separator: "."))
                labels.removeLast()
            }
        }
        return nodes.count
    }

    /// The count of `node` of `user`: 1–9.
    static func count(user: Int, node: Int, seed: UInt64) -> Int64 {
        var generator = SplitMix64(seed: seed &+ UInt64(user) &* 0x1_0000 &+ UInt64(node))
        return Int64(generator.next() % 9) + 1
    }

    static func userName(_ user: Int) -> String { String(user) }

    func run(postgresql: String, database: String, kept: Bool) async throws -> QueryBenchReport {
        progress("loading \(settings.users) users × \(Self.nodePaths.count) nodes")
        let load = try await loadUsers()
        progress(
            "loaded \(load.rows) rows in \(QueryBenchReport.seconds(load.loadSeconds)), rolled up in \(QueryBenchReport.seconds(load.rollupSeconds)), vacuumed in \(QueryBenchReport.seconds(load.vacuumSeconds))"
        )
        progress("phase 1: HTTP, \(settings.connections) connections, \(settings.warmup) s warm-up + \(settings.duration) s")
        let http = try await runHTTP()
        progress(
            "HTTP: \(QueryBenchReport.number(BenchReport.perSecond(http.load.requests, http.load.seconds))) requests/s, p99 \(QueryBenchReport.milliseconds(http.load.latencies.p99Milliseconds)), \(http.load.errors) errors"
        )
        progress("phase 2: pgbench, \(settings.pgbenchClients) clients, \(settings.warmup) s warm-up + \(settings.duration) s")
        let pgbenchRun = try await runPGBench()
        return QueryBenchReport(
            settings: settings, load: load, http: http, pgbench: pgbenchRun, pgbenchVersion: pgbench.version,
            postgresql: postgresql, database: database, kept: kept)
    }

    private func progress(_ message: String) {
        FileHandle.standardError.write(Data("bench: \(message)\n".utf8))
    }

    // MARK: - load

    struct LoadMeasurement: Sendable {
        var rows: Int
        var aggregateRows: Int
        var loadSeconds: Double
        var rollupSeconds: Double
        var vacuumSeconds: Double
    }

    /// Writes every user's own state through `BadgeStore.apply`, marks the users dirty, runs the
    /// rollup until no user is dirty, checks the row counts, and vacuums.
    func loadUsers() async throws -> LoadMeasurement {
        var configuration = settings.database
        configuration.sessionSettings += BadgeStore.recommendedSessionSettings
        let writers = settings.loadWriters
        let pool = PGPool(configuration: configuration, maximumConnections: writers, logger: logger)
        defer { pool.close() }
        let paths = try Self.nodePaths.map { try BadgePath(validating: $0) }
        let users = settings.users
        let batchUsers = settings.loadBatchUsers
        let seed = settings.seed

        let loadStart = BenchClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<writers {
                group.addTask {
                    var chunk = writer
                    while chunk * batchUsers < users {
                        let first = chunk * batchUsers
                        var batch = BadgeBatch()
                        for user in first..<min(users, first + batchUsers) {
                            let id = try UserID(validating: Self.userName(user))
                            for (node, path) in paths.enumerated() {
                                let count = Self.count(user: user, node: node, seed: seed)
                                batch.append(BadgeMutation(user: id, path: path, operation: .set(count: count, icon: nil)))
                            }
                        }
                        let finished = batch
                        try await pool.withTransaction { connection in
                            try BadgeStore.apply(finished, on: connection)
                            try BadgeStore.markDirty(finished.users, on: connection)
                        }
                        chunk += writers
                    }
                }
            }
            try await group.waitForAll()
        }
        let loadSeconds = Double(BenchClock.now - loadStart) / 1e9

        let store = BadgeStore(pool: pool)
        let rollupStart = BenchClock.now
        while try await pool.withConnection({ try BadgeStore.queueDepth(on: $0) }) > 0 {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<writers {
                    group.addTask { while try await store.recomputeDirtyUsers(limit: 1_000) > 0 {} }
                }
                try await group.waitForAll()
            }
        }
        let rollupSeconds = Double(BenchClock.now - rollupStart) / 1e9

        let expectedAggregates = users * Self.treeNodeCount
        let (stateRows, aggregateRows, versions) = try await pool.withConnection { connection in
            let row = try connection.query(
                PGStatement(
                    "bench.count_rows",
                    """
                    SELECT (SELECT count(*) FROM badge_state), (SELECT count(*) FROM badge_aggregate),
                           (SELECT count(*) FROM user_version WHERE version >= 1)
                    """, prepared: false)
            ).singleRow()
            return (try row.decode(0, as: Int.self), try row.decode(1, as: Int.self), try row.decode(2, as: Int.self))
        }
        guard stateRows == users * paths.count, aggregateRows == expectedAggregates, versions == users else {
            throw BenchFailure(
                "the load is incomplete: \(stateRows) own-state rows (expected \(users * paths.count)), \(aggregateRows) aggregates "
                    + "(expected \(expectedAggregates)), \(versions) user versions (expected \(users))")
        }

        // Fresh statistics and visibility maps, and no autovacuum or checkpoint of the load
        // running while the reads are measured.
        let vacuumStart = BenchClock.now
        try await pool.withConnection { connection in
            for table in ["badge_state", "badge_aggregate", "user_version", "dirty_user", "broadcast", "broadcast_clear", "broadcast_version"] {
                try connection.execute(script: "VACUUM (ANALYZE) \(table)", name: "bench.vacuum")
            }
            do {
                try connection.execute(script: "CHECKPOINT", name: "bench.checkpoint")
            } catch {
                logger.warning("CHECKPOINT failed (it needs superuser or pg_checkpoint); measuring anyway", metadata: [LogKey.error: "\(error)"])
            }
        }
        let vacuumSeconds = Double(BenchClock.now - vacuumStart) / 1e9
        return LoadMeasurement(
            rows: stateRows, aggregateRows: aggregateRows, loadSeconds: loadSeconds, rollupSeconds: rollupSeconds,
            vacuumSeconds: vacuumSeconds)
    }

    // MARK: - phase 1: HTTP

    struct HTTPMeasurement: Sendable {
        var load: HTTPLoadResult
        var answerBytes: Int
        var tokenSeconds: Double
        var cpu: CPUUsage
        /// Whole-tree reads answered from the service's cache during the measured window.
        var cache: TreeCacheStatistics
    }

    /// Runs the query service in-process and drives it with the HTTP client.
    func runHTTP() async throws -> HTTPMeasurement {
        let secret = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        let authenticator = try await Authenticator(configuration: AuthConfiguration(hs256Secret: secret))
        let sample = (0..<settings.sampleUsers).map { $0 * settings.stride }

        // One token per sampled user, signed on as many tasks as there are cores.
        let tokenStart = BenchClock.now
        let parts = max(1, ProcessInfo.processInfo.activeProcessorCount)
        let tokens: [String] = try await withThrowingTaskGroup(of: (Int, [String]).self) { group in
            for part in 0..<parts {
                group.addTask {
                    var tokens: [String] = []
                    for index in Swift.stride(from: part, to: sample.count, by: parts) {
                        tokens.append(
                            try await Authenticator.makeHS256Token(
                                secret: secret, subject: Self.userName(sample[index]), expiresIn: 24 * 3600))
                    }
                    return (part, tokens)
                }
            }
            var byPart: [Int: [String]] = [:]
            for try await (part, tokens) in group { byPart[part] = tokens }
            var tokens = [String](repeating: "", count: sample.count)
            for (part, list) in byPart {
                for (position, token) in list.enumerated() { tokens[part + position * parts] = token }
            }
            return tokens
        }
        let tokenSeconds = Double(BenchClock.now - tokenStart) / 1e9

        var configuration = settings.database
        configuration.statementTimeoutMilliseconds = 2_000
        configuration.sessionSettings += BadgeStore.recommendedSessionSettings
        let pool = PGPool(configuration: configuration, maximumConnections: settings.poolSize, logger: logger)
        defer { pool.close() }
        let hub = try ChangeHub(configuration: settings.database, treeCacheBytes: settings.treeCacheBytes, logger: logger)
        var apiConfiguration = APIConfiguration()
        apiConfiguration.host = "127.0.0.1"
        apiConfiguration.port = 0
        let api = BadgeAPI(
            store: BadgeStore(pool: pool, display: apiConfiguration.display), hub: hub, authenticator: authenticator,
            configuration: apiConfiguration, metrics: MetricsSetup.bootstrap(), logger: logger)
        let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
        let application = api.makeApplication { port in portContinuation.yield(port) }
        let serviceGroup = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [hub, application], gracefulShutdownSignals: [], cancellationSignals: [], logger: logger))

        return try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask {
                defer { portContinuation.finish() }
                try await serviceGroup.run()
            }
            let outcome: Result<HTTPMeasurement, any Error>
            do {
                var iterator = ports.makeAsyncIterator()
                guard let port = await iterator.next() else { throw BenchFailure("the query service stopped before it listened") }
                let requests = zip(sample, tokens).map { user, token in
                    HTTPLoadGenerator.request(path: "/v1/users/\(Self.userName(user))/badges", port: port, token: token)
                }
                let answerBytes = try await verifyAnswers(port: port, sample: sample, requests: requests)
                outcome = .success(
                    try await measureHTTP(
                        port: port, requests: requests, answerBytes: answerBytes, tokenSeconds: tokenSeconds,
                        cacheStatistics: { hub.treeCacheStatistics }))
            } catch {
                outcome = .failure(error)
            }
            await serviceGroup.triggerGracefulShutdown()
            try await tasks.waitForAll()
            return try outcome.get()
        }
    }

    /// Reads three sampled users' trees once and checks them against the loaded counts; returns
    /// the size of the first answer's body.
    private func verifyAnswers(port: Int, sample: [Int], requests: [[UInt8]]) async throws -> Int {
        var bytes = 0
        for index in [0, sample.count / 2, sample.count - 1] {
            let request = requests[index]
            let (status, body) = try await onThread(named: "reddot.bench.check") { try HTTPLoadGenerator.fetch(port: port, request: request) }
            guard status == 200 else {
                throw BenchFailure("GET of user \(sample[index])'s tree answered \(status): \(String(decoding: body.prefix(300), as: UTF8.self))")
            }
            let answer = try JSONDecoder().decode(UserBadgeTree.self, from: Data(body))
            let expected = (0..<Self.nodePaths.count).reduce(Int64(0)) { $0 + Self.count(user: sample[index], node: $1, seed: settings.seed) }
            let nodes = answer.tree.map(Self.nodeCount) ?? 0
            guard answer.user.rawValue == Self.userName(sample[index]), answer.version >= 1, answer.tree?.count == expected,
                nodes == Self.treeNodeCount
            else {
                throw BenchFailure(
                    "user \(sample[index])'s tree is not what was loaded: version \(answer.version), root count "
                        + "\(answer.tree?.count ?? -1) (expected \(expected)), \(nodes) nodes (expected \(Self.treeNodeCount))")
            }
            if bytes == 0 { bytes = body.count }
        }
        return bytes
    }

    private static func nodeCount(_ node: BadgeNode) -> Int {
        1 + node.children.reduce(0) { $0 + nodeCount($1) }
    }

    private func measureHTTP(
        port: Int, requests: [[UInt8]], answerBytes: Int, tokenSeconds: Double, cacheStatistics: @Sendable () -> TreeCacheStatistics
    ) async throws -> HTTPMeasurement {
        let start = BenchClock.now + 50_000_000
        let measureStart = start + UInt64(settings.warmup) * 1_000_000_000
        let end = measureStart + UInt64(settings.duration) * 1_000_000_000
        let plan = HTTPLoadGenerator.Plan(
            port: port, requests: requests, connections: settings.connections, threads: settings.clientThreads,
            measureStart: measureStart, end: end, seed: settings.seed, rate: settings.rate)
        async let result = HTTPLoadGenerator.run(plan)
        try await Self.sleep(until: measureStart)
        let database = settings.databaseName
        let before = CPUSample.now(database: database)
        let cacheBefore = cacheStatistics()
        try await Self.sleep(until: end)
        let after = CPUSample.now(database: database)
        let cacheAfter = cacheStatistics()
        let load = try await result
        let cpu = CPUUsage(before: before, after: after, httpClientSeconds: load.clientCPUSeconds)
        let cache = TreeCacheStatistics(hits: cacheAfter.hits - cacheBefore.hits, misses: cacheAfter.misses - cacheBefore.misses)
        return HTTPMeasurement(load: load, answerBytes: answerBytes, tokenSeconds: tokenSeconds, cpu: cpu, cache: cache)
    }

    static func sleep(until deadline: UInt64) async throws {
        let now = BenchClock.now
        if deadline > now { try await Task.sleep(nanoseconds: deadline - now) }
    }

    // MARK: - phase 2: pgbench

    struct PGBenchMeasurement: Sendable {
        var result: PGBench.Result
        var script: String
        var arguments: [String]
        /// Nil for runs of 2 s or less.
        var cpu: CPUUsage?
    }

    /// pgbench on the same database: the store's tree query for random users of the sample.
    func runPGBench() async throws -> PGBenchMeasurement {
        let script = try Self.pgbenchScript(sql: BadgeStore.treeQuerySQL, sampleUsers: settings.sampleUsers, stride: settings.stride)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("reddot-bench-query-\(UInt64.random(in: 0...UInt64.max)).sql")
        try Data(script.utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let connection = settings.database.connectionString
        let arguments = { (seconds: Int) in
            [
                "-n", "-M", "prepared", "-f", file.path, "-c", String(settings.pgbenchClients), "-j", String(settings.pgbenchThreads),
                "-T", String(seconds), "-D", "subtree=root", "-D", "max_level=\(BadgePath.maximumDepth + 1)",
            ]
        }
        let pgbench = self.pgbench
        if settings.warmup > 0 {
            let warmupArguments = arguments(settings.warmup)
            _ = try await onThread(named: "reddot.bench.pgbench") { try pgbench.run(warmupArguments, connection: connection) }
        }
        let measured = arguments(settings.duration)
        let duration = UInt64(settings.duration) * 1_000_000_000
        let database = settings.databaseName
        let (result, cpu) = try await onThread(named: "reddot.bench.pgbench") { () throws -> (PGBench.Result, CPUUsage?) in
            // CPU is sampled while pgbench runs (from 1 s after its start to 0.5 s before its
            // end), so that its backends are still there to be counted.
            var cpu: CPUUsage?
            let result = try pgbench.run(measured, connection: connection) { child in
                guard duration > 2_000_000_000 else { return }
                let started = BenchClock.now
                usleep(1_000_000)
                let before = CPUSample.now(database: database, child: child)
                let end = started + duration - 500_000_000
                let now = BenchClock.now
                if end > now { usleep(UInt32((end - now) / 1_000)) }
                cpu = CPUUsage(before: before, after: CPUSample.now(database: database, child: child), httpClientSeconds: nil)
            }
            return (result, cpu)
        }
        return PGBenchMeasurement(result: result, script: script, arguments: measured, cpu: cpu)
    }

    /// The tree query with `$1`, `$2`, `$3` renamed to pgbench variables, after a line that
    /// draws a sampled user.
    static func pgbenchScript(sql: String, sampleUsers: Int, stride: Int) throws -> String {
        let names = [1: ":user_id", 2: ":subtree", 3: ":max_level"]
        var renamed = ""
        var characters = sql[...]
        while let dollar = characters.firstIndex(of: "$") {
            renamed += characters[..<dollar]
            let digits = characters[characters.index(after: dollar)...].prefix(while: \.isASCII).prefix(while: \.isNumber)
            guard let number = Int(digits), let name = names[number] else {
                throw BenchFailure("the tree query uses a parameter other than $1, $2, $3; the bench cannot rename it for pgbench")
            }
            renamed += name
            characters = characters[digits.endIndex...]
        }
        renamed += characters
        guard !renamed.contains(";") else { throw BenchFailure("the tree query holds a ';': pgbench would split it") }
        return "\\set user_id random(0, \(sampleUsers - 1)) * \(stride)\n\(renamed);\n"
    }
}

// MARK: - the HTTP client

/// A small HTTP/1.1 load generator with little overhead: a few threads, each polling its share
/// of keep-alive connections with one request in flight on each. It records the latency of every
/// answer completed in the measured window, from writing the request to reading the last byte.
enum HTTPLoadGenerator {
    struct Plan: Sendable {
        var port: Int
        /// Whole requests, one per sampled user; each send picks one at random.
        var requests: [[UInt8]]
        var connections: Int
        var threads: Int
        /// `BenchClock` times: the warm-up runs from the start to `measureStart`.
        var measureStart: UInt64
        var end: UInt64
        var seed: UInt64
        /// Requests per second offered by all threads together; 0: closed loop.
        var rate: Int = 0
    }

    struct ThreadResult: Sendable {
        var latencies: [UInt64] = []
        var warmupRequests = 0
        var errors = 0
        var statuses: [Int: Int] = [:]
        var firstError: String?
        var cpuSeconds = 0.0
    }

    static func request(path: String, port: Int, token: String) -> [UInt8] {
        Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nAuthorization: Bearer \(token)\r\nAccept: application/json\r\n\r\n".utf8)
    }

    /// Runs the plan on its threads and merges what they measured.
    static func run(_ plan: Plan) async throws -> HTTPLoadResult {
        let results = try await withThrowingTaskGroup(of: ThreadResult.self) { group in
            for thread in 0..<plan.threads {
                let connections = plan.connections / plan.threads + (thread < plan.connections % plan.threads ? 1 : 0)
                group.addTask {
                    try await onThread(named: "reddot.bench.http.\(thread)") {
                        var worker = HTTPLoadWorker(plan: plan, connections: connections, seed: plan.seed &+ UInt64(thread) &* 7919)
                        return worker.run()
                    }
                }
            }
            var results: [ThreadResult] = []
            for try await result in group { results.append(result) }
            return results
        }
        var merged = HTTPLoadResult()
        var latencies: [UInt64] = []
        for result in results {
            latencies += result.latencies
            merged.warmupRequests += result.warmupRequests
            merged.errors += result.errors
            merged.statuses.merge(result.statuses, uniquingKeysWith: +)
            merged.firstError = merged.firstError ?? result.firstError
            merged.clientCPUSeconds += result.cpuSeconds
        }
        latencies.sort()
        merged.requests = latencies.count
        merged.seconds = Double(plan.end - plan.measureStart) / 1e9
        merged.latencies = LatencySummary(sortedNanoseconds: latencies)
        return merged
    }

    /// One request on a connection of its own, blocking (at most 10 s per read): the status and
    /// the body.
    static func fetch(port: Int, request: [UInt8]) throws -> (status: Int, body: [UInt8]) {
        let descriptor = try BenchSocket.connectLoopback(port: port)
        defer { _ = close(descriptor) }
        if let problem = BenchSocket.sendAll(descriptor, request) { throw BenchFailure(problem) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            switch HTTPAnswerHead.parse(bytes) {
            case .malformed(let problem):
                throw BenchFailure(problem)
            case .complete(let head) where bytes.count >= head.total:
                return (head.status, Array(bytes[head.headLength..<head.total]))
            default:
                var ready = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                guard poll(&ready, 1, 10_000) == 1 else { throw BenchFailure("no answer within 10 s") }
                let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
                guard count > 0 else { throw BenchFailure("the server closed the connection before answering") }
                bytes += chunk[0..<count]
            }
        }
    }
}

/// What the HTTP client measured.
struct HTTPLoadResult: Sendable {
    /// Answers completed in the measured window.
    var requests = 0
    var seconds = 0.0
    var latencies = LatencySummary(sortedNanoseconds: [])
    var warmupRequests = 0
    /// Answers other than 200 and broken connections, warm-up included.
    var errors = 0
    /// Answers other than 200, by status.
    var statuses: [Int: Int] = [:]
    var firstError: String?
    /// CPU time of the client threads during the measured window.
    var clientCPUSeconds = 0.0
}

/// The state of one client thread.
private struct HTTPLoadWorker {
    struct Connection {
        var descriptor: Int32
        /// The answer read so far.
        var bytes: [UInt8] = []
        var head: HTTPAnswerHead?
        var sentAt: UInt64 = 0
    }

    let plan: HTTPLoadGenerator.Plan
    let connectionCount: Int
    var generator: SplitMix64
    var connections: [Connection] = []
    var pollSet: [pollfd] = []
    var chunk = [UInt8](repeating: 0, count: 65_536)
    var result = HTTPLoadGenerator.ThreadResult()
    /// Open loop: the time the next request is due, the spacing of this thread's requests, and
    /// the connections with nothing in flight.
    var nextDue: UInt64 = 0
    var spacing: UInt64 = 0
    var idle: [Int] = []

    init(plan: HTTPLoadGenerator.Plan, connections: Int, seed: UInt64) {
        self.plan = plan
        self.connectionCount = connections
        self.generator = SplitMix64(seed: seed)
    }

    mutating func run() -> HTTPLoadGenerator.ThreadResult {
        result.latencies.reserveCapacity(200_000)
        for _ in 0..<connectionCount {
            connections.append(Connection(descriptor: -1))
            pollSet.append(pollfd(fd: -1, events: Int16(POLLIN), revents: 0))
        }
        defer {
            for connection in connections where connection.descriptor >= 0 { _ = close(connection.descriptor) }
        }
        if plan.rate > 0 {
            spacing = max(1, UInt64(plan.threads) * 1_000_000_000 / UInt64(plan.rate))
            nextDue = BenchClock.now
        }
        for slot in connections.indices { reopen(slot) }
        var cpuAtStart: Double?
        while true {
            let now = BenchClock.now
            if cpuAtStart == nil, now >= plan.measureStart { cpuAtStart = Self.threadCPUSeconds() }
            if now >= plan.end { break }
            var timeout: Int32 = 10
            if spacing > 0 {
                // Requests due go out on idle connections; a late one keeps its scheduled time,
                // so waiting for a free connection counts as latency. poll() counts whole
                // milliseconds, so a request may go out up to 1 ms after its time (counted too).
                while nextDue <= now, let slot = idle.popLast() {
                    sendRequest(slot, scheduledAt: nextDue)
                    nextDue += spacing
                }
                if nextDue > now { timeout = Int32(min(10, (nextDue - now + 999_999) / 1_000_000)) }
            }
            let ready = poll(&pollSet, nfds_t(pollSet.count), timeout)
            if ready < 0, errno != EINTR {
                failed("poll: \(String(cString: strerror(errno)))")
                break
            }
            guard ready > 0 else { continue }
            for slot in pollSet.indices where pollSet[slot].revents != 0 {
                pollSet[slot].revents = 0
                readAnswer(slot)
            }
        }
        result.cpuSeconds = Self.threadCPUSeconds() - (cpuAtStart ?? Self.threadCPUSeconds())
        return result
    }

    private mutating func readAnswer(_ slot: Int) {
        let descriptor = connections[slot].descriptor
        guard descriptor >= 0 else { return }
        let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
        if count == 0 { return broken(slot, "the server closed a connection") }
        if count < 0 {
            if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { return }
            return broken(slot, "recv: \(String(cString: strerror(errno)))")
        }
        connections[slot].bytes += chunk[0..<count]
        if connections[slot].head == nil {
            switch HTTPAnswerHead.parse(connections[slot].bytes) {
            case .incomplete: return
            case .malformed(let problem): return broken(slot, problem)
            case .complete(let head): connections[slot].head = head
            }
        }
        guard let head = connections[slot].head, connections[slot].bytes.count >= head.total else { return }
        if connections[slot].bytes.count > head.total { return broken(slot, "bytes after the answer (nothing was pipelined)") }

        let now = BenchClock.now
        if now >= plan.measureStart, now < plan.end {
            result.latencies.append(now - connections[slot].sentAt)
        } else {
            result.warmupRequests += 1
        }
        if head.status != 200 {
            result.errors += 1
            result.statuses[head.status, default: 0] += 1
            if result.firstError == nil {
                let body = connections[slot].bytes[head.headLength..<head.total].prefix(300)
                result.firstError = "HTTP \(head.status): \(String(decoding: body, as: UTF8.self))"
            }
        }
        connections[slot].bytes.removeAll(keepingCapacity: true)
        connections[slot].head = nil
        if now < plan.end { nextRequest(slot) }
    }

    /// Closed loop: sends at once; open loop: waits for the schedule.
    private mutating func nextRequest(_ slot: Int) {
        if spacing > 0 {
            if !idle.contains(slot) { idle.append(slot) }
        } else {
            sendRequest(slot, scheduledAt: BenchClock.now)
        }
    }

    private mutating func sendRequest(_ slot: Int, scheduledAt: UInt64) {
        let request = plan.requests[Int(generator.next() % UInt64(plan.requests.count))]
        connections[slot].sentAt = scheduledAt
        if let problem = BenchSocket.sendAll(connections[slot].descriptor, request) { broken(slot, problem) }
    }

    /// Counts an error, and replaces the connection (an answer in flight is lost).
    private mutating func broken(_ slot: Int, _ problem: String) {
        failed(problem)
        if connections[slot].descriptor >= 0 { _ = close(connections[slot].descriptor) }
        connections[slot] = Connection(descriptor: -1)
        pollSet[slot].fd = -1
        if BenchClock.now < plan.end { reopen(slot) }
    }

    private mutating func reopen(_ slot: Int) {
        do {
            let descriptor = try BenchSocket.connectLoopback(port: plan.port)
            _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
            connections[slot] = Connection(descriptor: descriptor)
            pollSet[slot].fd = descriptor
            nextRequest(slot)
        } catch {
            failed("\(error)")
        }
    }

    private mutating func failed(_ problem: String) {
        result.errors += 1
        if result.firstError == nil { result.firstError = problem }
    }

    static func threadCPUSeconds() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}

/// The head of an HTTP/1.1 answer: its status and where the answer ends.
struct HTTPAnswerHead: Sendable, Equatable {
    var status: Int
    /// Bytes up to and including the blank line.
    var headLength: Int
    /// The whole answer's length: the head and `Content-Length` bytes of body.
    var total: Int

    enum Parse: Equatable {
        case incomplete
        case complete(HTTPAnswerHead)
        case malformed(String)
    }

    /// Parses the head at the start of `bytes`. Answers need a `Content-Length` (chunked bodies
    /// are not supported), except 204, 304 and 1xx. Bytes only: it runs once per answer in the
    /// client's hot loop.
    static func parse(_ bytes: [UInt8]) -> Parse {
        guard let blank = headEnd(bytes) else {
            return bytes.count > 65_536 ? .malformed("an answer's head is longer than 64 KiB") : .incomplete
        }
        let prefix = Array("HTTP/1.1 ".utf8)
        guard blank >= 12, bytes.starts(with: prefix), let status = number(bytes[9..<12]) else {
            return .malformed("not an HTTP/1.1 answer: \(String(decoding: bytes.prefix(min(blank, 80)), as: UTF8.self))")
        }
        var length: Int?
        var lineStart = 0
        while let lineEnd = lineEnd(bytes, from: lineStart, before: blank + 2) {
            let line = bytes[lineStart..<lineEnd]
            lineStart = lineEnd + 2
            if hasName(line, "content-length:") {
                guard let value = number(trimmed(line.dropFirst(15))) else {
                    return .malformed("Content-Length '\(String(decoding: line.prefix(40), as: UTF8.self))' is not a length")
                }
                length = value
            } else if hasName(line, "transfer-encoding:") {
                return .malformed("the answer has \(String(decoding: line.prefix(60), as: UTF8.self)); the bench reads only Content-Length bodies")
            }
        }
        if length == nil, status == 204 || status == 304 || (100..<200).contains(status) { length = 0 }
        guard let length else { return .malformed("an answer without Content-Length (status \(status))") }
        let headLength = blank + 4
        return .complete(HTTPAnswerHead(status: status, headLength: headLength, total: headLength + length))
    }

    /// Where `\r\n\r\n` starts, if it is there.
    private static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4)
        where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
            return index
        }
        return nil
    }

    /// Where the `\r\n` that ends the line starting at `start` is, if before `limit`.
    private static func lineEnd(_ bytes: [UInt8], from start: Int, before limit: Int) -> Int? {
        var index = start
        while index + 1 < limit {
            if bytes[index] == 13, bytes[index + 1] == 10 { return index }
            index += 1
        }
        return nil
    }

    /// Whether `line` starts with `name` (lowercase), ignoring ASCII case.
    private static func hasName(_ line: ArraySlice<UInt8>, _ name: StaticString) -> Bool {
        guard line.count >= name.utf8CodeUnitCount else { return false }
        return name.withUTF8Buffer { expected in
            zip(line, expected).allSatisfy { ($0 >= 65 && $0 <= 90 ? $0 | 0x20 : $0) == $1 }
        }
    }

    private static func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var slice = bytes
        while let first = slice.first, first == 32 || first == 9 { slice = slice.dropFirst() }
        while let last = slice.last, last == 32 || last == 9 { slice = slice.dropLast() }
        return slice
    }

    /// A decimal number of 1–18 digits.
    private static func number(_ digits: ArraySlice<UInt8>) -> Int? {
        guard !digits.isEmpty, digits.count <= 18 else { return nil }
        var value = 0
        for digit in digits {
            guard digit >= 48, digit <= 57 else { return nil }
            value = value * 10 + Int(digit - 48)
        }
        return value
    }
}

/// Blocking TCP helpers for the client.
enum BenchSocket {
    /// A connected TCP socket to 127.0.0.1:`port` with Nagle off; the caller closes it.
    static func connectLoopback(port: Int) throws -> Int32 {
        #if canImport(Glibc)
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
            let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard descriptor >= 0 else { throw BenchFailure("socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            let problem = String(cString: strerror(errno))
            _ = close(descriptor)
            throw BenchFailure("connect to 127.0.0.1:\(port): \(problem)")
        }
        var one: Int32 = 1
        _ = setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        #if canImport(Darwin)
            _ = setsockopt(descriptor, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
        return descriptor
    }

    /// Writes all of `bytes` (waiting while the socket is full); a problem, or nil.
    static func sendAll(_ descriptor: Int32, _ bytes: [UInt8]) -> String? {
        #if canImport(Glibc)
            let flags = Int32(MSG_NOSIGNAL)
        #else
            let flags: Int32 = 0
        #endif
        return bytes.withUnsafeBytes { buffer -> String? in
            var offset = 0
            while offset < buffer.count {
                let written = send(descriptor, buffer.baseAddress! + offset, buffer.count - offset, flags)
                if written > 0 {
                    offset += written
                } else if written < 0, errno == EINTR {
                    continue
                } else if written < 0, errno == EAGAIN || errno == EWOULDBLOCK {
                    var ready = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
                    _ = poll(&ready, 1, 1_000)
                } else {
                    return "send: \(String(cString: strerror(errno)))"
                }
            }
            return nil
        }
    }
}

// MARK: - pgbench

/// The `pgbench` executable.
struct PGBench: Sendable {
    let executable: String
    let version: String

    struct Result: Sendable {
        var transactions: Int
        var failed: Int
        var tps: Double
        var latencyAverageMilliseconds: Double
    }

    /// `explicit`, else `pgbench` in PATH, else the newest /usr/lib/postgresql/*/bin/pgbench.
    static func locate(_ explicit: String?) throws -> PGBench {
        var candidates: [String] = []
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
            candidates.append("\(directory)/pgbench")
        }
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        for version in versions.sorted(by: { (Int($0) ?? 0) > (Int($1) ?? 0) }) {
            candidates.append("/usr/lib/postgresql/\(version)/bin/pgbench")
        }
        let found = explicit.map { [$0] } ?? candidates
        guard let executable = found.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw BenchFailure(
                explicit.map { "\($0) is not an executable pgbench" }
                    ?? "pgbench not found in PATH or /usr/lib/postgresql/*/bin; give its path with --pgbench")
        }
        let (status, output) = try execute(executable, ["--version"])
        guard status == 0 else { throw BenchFailure("\(executable) --version failed: \(output.prefix(200))") }
        // "pgbench (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)"
        let words = output.split(whereSeparator: \.isWhitespace)
        let version = words.firstIndex(of: "(PostgreSQL)").flatMap { $0 + 1 < words.count ? String(words[$0 + 1]) : nil } ?? "?"
        return PGBench(executable: executable, version: version)
    }

    /// Runs pgbench with `arguments` against `connection` (a libpq connection string, passed as
    /// the database name, which pgbench expands; empty: the PG* variables) and parses its summary.
    func run(_ arguments: [String], connection: String, whileRunning: (Int32) -> Void = { _ in }) throws -> Result {
        let (status, output) = try Self.execute(executable, arguments + (connection.isEmpty ? [] : [connection]), whileRunning: whileRunning)
        guard status == 0 else {
            throw BenchFailure("pgbench exited with status \(status): \(output.suffix(800))")
        }
        func value(after prefix: String) -> Double? {
            for line in output.split(separator: "\n") where line.hasPrefix(prefix) {
                let rest = line.dropFirst(prefix.count).trimmingCharacters(in: .whitespaces)
                return Double(rest.prefix(while: { $0.isNumber || $0 == "." }))
            }
            return nil
        }
        guard let tps = value(after: "tps = "), let latency = value(after: "latency average = "),
            let transactions = value(after: "number of transactions actually processed:")
        else {
            throw BenchFailure("cannot read pgbench's summary: \(output.suffix(800))")
        }
        let failed = value(after: "number of failed transactions:") ?? 0
        return Result(transactions: Int(transactions), failed: Int(failed), tps: tps, latencyAverageMilliseconds: latency)
    }

    /// Runs a program to its end, calling `whileRunning` with its process id once it started;
    /// returns its exit status and its output (stdout and stderr together; the program blocks
    /// while `whileRunning` runs if it writes more than a pipe holds). Call it on a thread of its
    /// own (see `onThread`): it unblocks that thread's signals.
    static func execute(
        _ executable: String, _ arguments: [String], whileRunning: (Int32) -> Void = { _ in }
    ) throws -> (Int32, String) {
        // A child inherits the spawning thread's signal mask, and threads started from Swift's
        // concurrency pool block nearly every signal: pgbench would never get the SIGALRM that
        // ends its -T run (nor a SIGTERM).
        var unblocked = sigset_t()
        sigemptyset(&unblocked)
        pthread_sigmask(SIG_SETMASK, &unblocked, nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        whileRunning(process.processIdentifier)
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}

// MARK: - CPU

/// CPU times at one moment (Linux `/proc`; zero elsewhere): the whole machine's, this
/// process's, the PostgreSQL backends serving the scratch database (their process titles name
/// it), and a child process's.
struct CPUSample: Sendable {
    var machineBusySeconds = 0.0
    var machineTotalSeconds = 0.0
    var processSeconds = 0.0
    var databaseSeconds = 0.0
    var childSeconds = 0.0

    static func now(database: String, child: Int32? = nil) -> CPUSample {
        var sample = CPUSample()
        if let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8), let line = text.split(separator: "\n").first,
            line.hasPrefix("cpu ")
        {
            let ticks = line.split(separator: " ").dropFirst().compactMap { Double($0) }
            if ticks.count >= 8 {
                // user nice system idle iowait irq softirq steal
                sample.machineTotalSeconds = ticks.prefix(8).reduce(0, +) / hertz
                sample.machineBusySeconds = sample.machineTotalSeconds - (ticks[3] + ticks[4]) / hertz
            }
        }
        sample.processSeconds = processSeconds("self") ?? 0
        if let child { sample.childSeconds = processSeconds(String(child)) ?? 0 }
        let marker = Array(" \(database) ".utf8)
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] where entry.first?.isNumber == true {
            guard let title = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline"), title.starts(with: Array("postgres: ".utf8)),
                title.firstRange(of: marker) != nil
            else { continue }
            sample.databaseSeconds += processSeconds(entry) ?? 0
        }
        return sample
    }

    private static let hertz = Double(sysconf(Int32(_SC_CLK_TCK)))

    /// utime + stime of `/proc/<process>/stat`.
    private static func processSeconds(_ process: String) -> Double? {
        guard let text = try? String(contentsOfFile: "/proc/\(process)/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return nil }
        // After "pid (comm) ": state is field 3, utime 14, stime 15.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / hertz
    }
}

/// Where the CPU went during a measurement, in core-seconds.
struct CPUUsage: Sendable {
    /// Every core's time, busy or idle.
    var machineTotalSeconds: Double
    var machineBusySeconds: Double
    /// The load generator: the HTTP client's threads, or pgbench.
    var clientSeconds: Double
    /// The query service: this process less the HTTP client (0 for pgbench).
    var serviceSeconds: Double
    /// The backends of the scratch database.
    var databaseSeconds: Double
    /// Everything else busy: other processes (another user's build shows here), PostgreSQL's
    /// background processes, the kernel's interrupt work.
    var otherSeconds: Double

    /// `httpClientSeconds`: the HTTP client's threads, part of this process; nil: the client is
    /// the child (pgbench) of the samples.
    init(before: CPUSample, after: CPUSample, httpClientSeconds: Double?) {
        machineTotalSeconds = after.machineTotalSeconds - before.machineTotalSeconds
        machineBusySeconds = after.machineBusySeconds - before.machineBusySeconds
        let process = after.processSeconds - before.processSeconds
        let child = after.childSeconds - before.childSeconds
        clientSeconds = httpClientSeconds ?? child
        serviceSeconds = httpClientSeconds.map { max(0, process - $0) } ?? 0
        databaseSeconds = after.databaseSeconds - before.databaseSeconds
        otherSeconds = max(0, machineBusySeconds - process - child - databaseSeconds)
    }
}

// MARK: - report

/// What `reddot bench query` prints.
struct QueryBenchReport: Encodable {
    var build: String
    var date: String
    var processors: Int
    var postgresql: String
    var pgbenchVersion: String
    var database: String
    var databaseKept: Bool
    var users: Int
    var nodesPerUser: Int
    var treeNodes: Int
    var stateRows: Int
    var aggregateRows: Int
    var loadSeconds: Double
    var loadRowsPerSecond: Double
    var loadWriters: Int
    var loadBatchUsers: Int
    var rollupSeconds: Double
    var rollupUsersPerSecond: Double
    var vacuumSeconds: Double
    var sampleUsers: Int
    var sampleStride: Int
    var tokenSeconds: Double
    var answerBytes: Int
    var connections: Int
    var clientThreads: Int
    var poolSize: Int
    var treeCacheMegabytes: Int
    /// Requests per second offered (open loop); 0: closed loop.
    var offeredRate: Int
    /// The share of the measured reads answered from the tree cache, in percent.
    var treeCacheHitPercent: Double
    var warmupSeconds: Int
    var durationSeconds: Int
    var httpRequests: Int
    var httpWarmupRequests: Int
    var httpRequestsPerSecond: Double
    var httpP50Ms: Double
    var httpP99Ms: Double
    var httpMaxMs: Double
    var httpErrors: Int
    var httpErrorStatuses: [String: Int]
    var firstError: String?
    var httpCPU: CPUShare?
    var pgbenchClients: Int
    var pgbenchThreads: Int
    var pgbenchTransactions: Int
    var pgbenchFailed: Int
    var pgbenchTps: Double
    var pgbenchLatencyAverageMs: Double
    var pgbenchCommand: String
    var pgbenchScript: String
    var pgbenchCPU: CPUShare?
    var httpPercentOfPgbench: Double

    /// CPU per request, in microseconds, and the share of the machine that other processes took.
    struct CPUShare: Encodable {
        var machineBusyPercent: Double
        var clientMicroseconds: Double
        var serviceMicroseconds: Double
        var postgresqlMicroseconds: Double
        /// Other processes, PostgreSQL's background work and the kernel's interrupt work, as a
        /// percentage of all cores.
        var otherPercent: Double

        /// `requestsPerSecond` during the sampled window.
        init?(_ usage: CPUUsage?, requestsPerSecond: Double) {
            guard let usage, usage.machineTotalSeconds > 0 else { return nil }
            let cores = Double(max(1, ProcessInfo.processInfo.activeProcessorCount))
            let requests = requestsPerSecond * usage.machineTotalSeconds / cores
            let per = requests > 0 ? 1e6 / requests : 0
            machineBusyPercent = 100 * usage.machineBusySeconds / usage.machineTotalSeconds
            clientMicroseconds = usage.clientSeconds * per
            serviceMicroseconds = usage.serviceSeconds * per
            postgresqlMicroseconds = usage.databaseSeconds * per
            otherPercent = 100 * usage.otherSeconds / usage.machineTotalSeconds
        }

        func text(client: String) -> String {
            let service = serviceMicroseconds > 0 ? "service \(QueryBenchReport.micro(serviceMicroseconds)), " : ""
            return "\(service)\(client) \(QueryBenchReport.micro(clientMicroseconds)), PostgreSQL \(QueryBenchReport.micro(postgresqlMicroseconds)); "
                + "machine \(String(format: "%.0f", machineBusyPercent))% busy, other processes \(String(format: "%.0f", otherPercent))%"
        }
    }

    init(
        settings: QueryBenchmark.Settings, load: QueryBenchmark.LoadMeasurement, http: QueryBenchmark.HTTPMeasurement,
        pgbench: QueryBenchmark.PGBenchMeasurement, pgbenchVersion: String, postgresql: String, database: String, kept: Bool
    ) {
        #if DEBUG
            build = "debug"
        #else
            build = "release"
        #endif
        date = ISO8601DateFormatter().string(from: Date())
        processors = ProcessInfo.processInfo.activeProcessorCount
        self.postgresql = postgresql
        self.pgbenchVersion = pgbenchVersion
        self.database = database
        databaseKept = kept
        users = settings.users
        nodesPerUser = QueryBenchmark.nodePaths.count
        treeNodes = QueryBenchmark.treeNodeCount
        stateRows = load.rows
        aggregateRows = load.aggregateRows
        loadSeconds = load.loadSeconds
        loadRowsPerSecond = BenchReport.perSecond(load.rows, load.loadSeconds)
        loadWriters = settings.loadWriters
        loadBatchUsers = settings.loadBatchUsers
        rollupSeconds = load.rollupSeconds
        rollupUsersPerSecond = BenchReport.perSecond(settings.users, load.rollupSeconds)
        vacuumSeconds = load.vacuumSeconds
        sampleUsers = settings.sampleUsers
        sampleStride = settings.stride
        tokenSeconds = http.tokenSeconds
        answerBytes = http.answerBytes
        connections = settings.connections
        clientThreads = settings.clientThreads
        poolSize = settings.poolSize
        treeCacheMegabytes = settings.treeCacheBytes >> 20
        offeredRate = settings.rate
        let lookups = http.cache.hits + http.cache.misses
        treeCacheHitPercent = lookups > 0 ? 100 * Double(http.cache.hits) / Double(lookups) : 0
        warmupSeconds = settings.warmup
        durationSeconds = settings.duration
        httpRequests = http.load.requests
        httpWarmupRequests = http.load.warmupRequests
        httpRequestsPerSecond = BenchReport.perSecond(http.load.requests, http.load.seconds)
        httpP50Ms = http.load.latencies.p50Milliseconds
        httpP99Ms = http.load.latencies.p99Milliseconds
        httpMaxMs = http.load.latencies.maxMilliseconds
        httpErrors = http.load.errors
        httpErrorStatuses = Dictionary(uniqueKeysWithValues: http.load.statuses.map { (String($0.key), $0.value) })
        firstError = http.load.firstError
        httpCPU = CPUShare(http.cpu, requestsPerSecond: httpRequestsPerSecond)
        pgbenchClients = settings.pgbenchClients
        pgbenchThreads = settings.pgbenchThreads
        pgbenchTransactions = pgbench.result.transactions
        pgbenchFailed = pgbench.result.failed
        pgbenchTps = pgbench.result.tps
        pgbenchLatencyAverageMs = pgbench.result.latencyAverageMilliseconds
        var shown = pgbench.arguments
        if let file = shown.firstIndex(of: "-f"), file + 1 < shown.count { shown[file + 1] = "<script>" }
        pgbenchCommand = "pgbench " + shown.joined(separator: " ") + " <scratch database>"
        pgbenchScript = pgbench.script
        pgbenchCPU = CPUShare(pgbench.cpu, requestsPerSecond: pgbench.result.tps)
        httpPercentOfPgbench = pgbenchTps > 0 ? 100 * httpRequestsPerSecond / pgbenchTps : 0
    }

    var text: String {
        let number = BenchReport.number
        let p99Met = httpP99Ms < 10
        let ratioMet = httpPercentOfPgbench >= 50
        let errorText =
            httpErrors == 0
            ? "0"
            : "\(httpErrors) (\(httpErrorStatuses.sorted { $0.key < $1.key }.map { "\($0.value)× \($0.key)" }.joined(separator: ", ")); first: \(firstError ?? "?"))"
        let script = pgbenchScript.split(separator: "\n").map { "            " + $0 }.joined(separator: "\n")
        return """
            reddot bench query: \(build) build, \(date), \(processors) CPUs, PostgreSQL \(postgresql), pgbench \(pgbenchVersion)
            data:       \(number(Double(users))) users × \(nodesPerUser) nodes: \(number(Double(stateRows))) own-state rows, \(number(Double(aggregateRows))) aggregate rows (\(treeNodes) nodes per tree)
            load:       \(number(loadRowsPerSecond)) rows/s (\(Self.seconds(loadSeconds)); \(loadWriters) writers, \(loadBatchUsers) users per transaction); rollup \(number(rollupUsersPerSecond)) users/s (\(Self.seconds(rollupSeconds))); vacuum \(Self.seconds(vacuumSeconds))
            readers:    \(number(Double(sampleUsers))) users (\(sampleStride == 1 ? "all" : "one in \(sampleStride)")), one HS256 token each (signed in \(Self.seconds(tokenSeconds)))
            http:       GET /v1/users/{user}/badges, whole tree (\(number(Double(answerBytes))) bytes); \(connections) connections on \(clientThreads) client threads; pool \(poolSize); \(warmupSeconds) s warm-up, \(durationSeconds) s measured
                        load: \(offeredRate == 0 ? "closed loop (each connection sends again as soon as its answer is in)" : "open loop, \(number(Double(offeredRate))) requests/s offered (latency from each request's scheduled time)")
                        tree cache: \(treeCacheMegabytes == 0 ? "off (every answer read from PostgreSQL)" : "\(treeCacheMegabytes) MiB, \(String(format: "%.1f", treeCacheHitPercent))% of the measured reads answered from it")
                        \(number(httpRequestsPerSecond)) requests/s; latency p50 \(Self.milliseconds(httpP50Ms)), p99 \(Self.milliseconds(httpP99Ms)), max \(Self.milliseconds(httpMaxMs)); errors \(errorText)
                        CPU per request: \(httpCPU?.text(client: "client") ?? "not measured")
            pgbench:    the same query for the same users, \(pgbenchClients) clients on \(pgbenchThreads) threads: \(number(pgbenchTps)) tps; latency average \(Self.milliseconds(pgbenchLatencyAverageMs)); failed \(pgbenchFailed)
                        CPU per query: \(pgbenchCPU?.text(client: "pgbench") ?? "not measured (runs of 2 s or less)")
                        \(pgbenchCommand)
            \(script)
            ratio:      http = \(String(format: "%.1f", httpPercentOfPgbench))% of pgbench's rate\(treeCacheMegabytes == 0 ? "" : " (with the cache; --tree-cache-mb 0 for every read from PostgreSQL)")
            targets:    ≥ 50% of pgbench: \(offeredRate > 0 ? "not measured (open loop: the rate is what was offered)" : ratioMet ? "yes" : "NO"); p99 < 10 ms: \(p99Met ? "yes" : "NO"); no errors: \(httpErrors == 0 && pgbenchFailed == 0 ? "yes" : "NO")
            database:   \(database) (\(databaseKept ? "kept" : "dropped"))
            """
    }

    static func number(_ value: Double) -> String { BenchReport.number(value) }
    static func seconds(_ value: Double) -> String { BenchReport.seconds(value) }
    static func milliseconds(_ value: Double) -> String { String(format: "%.2f ms", value) }
    static func micro(_ value: Double) -> String { String(format: "%.0f µs", value) }
}
