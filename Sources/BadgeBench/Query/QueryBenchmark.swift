import BadgeCore
import BadgeStore
public import LibPQ
public import Logging
public import Prometheus

/// The query benchmark behind `reddot bench query`: loads users into a scratch database, reads
/// their trees over HTTP from an in-process query service, then runs pgbench on the store's own
/// tree query for the same users on the same database.
public struct QueryBenchmark: Sendable {
    /// What to measure, and where.
    public struct Settings: Sendable {
        /// How many users to load (each with 20 nodes).
        public var users: Int
        /// How many users are read (each gets a token), spread evenly over all.
        public var sampleUsers: Int
        /// HTTP connections, each with one request in flight.
        public var connections: Int
        /// Threads of the HTTP client; the connections are split among them.
        public var clientThreads: Int
        /// The query service's database connections.
        public var poolSize: Int
        /// The query service's cache of whole trees, in bytes; 0: off.
        public var treeCacheBytes: Int
        /// Requests per second offered (0: closed loop).
        public var rate: Int
        /// pgbench's clients (-c).
        public var pgbenchClients: Int
        /// pgbench's threads (-j).
        public var pgbenchThreads: Int
        /// Seconds measured, for HTTP and for pgbench each.
        public var duration: Int
        /// Seconds of unmeasured load before each measurement.
        public var warmup: Int
        /// Users per load transaction.
        public var loadBatchUsers: Int
        /// Connections loading in parallel; as many rollup tasks.
        public var loadWriters: Int
        /// The seed of the counts and of the readers' choice of users.
        public var seed: UInt64
        /// The scratch database, migrated.
        public var database: PGConfiguration
        /// The scratch database's name (its backends' process titles show it).
        public var databaseName: String

        /// Sampled user `i` is user `i * stride`.
        var stride: Int { users / sampleUsers }

        /// Settings with every field given.
        public init(
            users: Int, sampleUsers: Int, connections: Int, clientThreads: Int, poolSize: Int, treeCacheBytes: Int, rate: Int,
            pgbenchClients: Int, pgbenchThreads: Int, duration: Int, warmup: Int, loadBatchUsers: Int, loadWriters: Int, seed: UInt64,
            database: PGConfiguration, databaseName: String
        ) {
            self.users = users
            self.sampleUsers = sampleUsers
            self.connections = connections
            self.clientThreads = clientThreads
            self.poolSize = poolSize
            self.treeCacheBytes = treeCacheBytes
            self.rate = rate
            self.pgbenchClients = pgbenchClients
            self.pgbenchThreads = pgbenchThreads
            self.duration = duration
            self.warmup = warmup
            self.loadBatchUsers = loadBatchUsers
            self.loadWriters = loadWriters
            self.seed = seed
            self.database = database
            self.databaseName = databaseName
        }
    }

    let settings: Settings
    let pgbench: PGBench
    /// The metrics registry of the in-process query service, made when it starts.
    let metrics: @Sendable () -> PrometheusCollectorRegistry?
    let logger: Logger

    /// A benchmark of `settings` with `pgbench`; `metrics` gives the query service its
    /// Prometheus registry (it is called once, when the service starts).
    public init(
        settings: Settings, pgbench: PGBench, metrics: @escaping @Sendable () -> PrometheusCollectorRegistry?, logger: Logger
    ) {
        self.settings = settings
        self.pgbench = pgbench
        self.metrics = metrics
        self.logger = logger
    }

    /// The first problem with these option values, as the sentence `reddot bench query` prints
    /// (naming the flag); nil when they are all in range.
    public static func problem(
        users: Int, connections: Int, clientThreads: Int, poolSize: Int, treeCacheMegabytes: Int, rate: Int, pgbenchClients: Int?,
        pgbenchThreads: Int, duration: Int, warmup: Int, sampleUsers: Int, loadBatchUsers: Int, loadWriters: Int
    ) -> String? {
        guard users >= 1, users <= 100_000_000 else { return "--users takes 1…100000000" }
        guard (1...10_000).contains(connections) else { return "--connections takes 1…10000" }
        guard (1...256).contains(clientThreads) else { return "--client-threads takes 1…256" }
        guard (1...256).contains(poolSize) else { return "--pool-size takes 1…256" }
        guard (0...65_536).contains(treeCacheMegabytes) else { return "--tree-cache-mb takes 0…65536" }
        guard (0...10_000_000).contains(rate) else { return "--rate takes 0…10000000" }
        if let pgbenchClients, !(1...10_000).contains(pgbenchClients) { return "--pgbench-clients takes 1…10000" }
        guard (1...256).contains(pgbenchThreads) else { return "--pgbench-threads takes 1…256" }
        guard (1...3_600).contains(duration) else { return "--duration takes 1…3600 seconds" }
        guard (0...600).contains(warmup) else { return "--warmup takes 0…600 seconds" }
        guard sampleUsers >= 1 else { return "--sample-users takes a number ≥ 1" }
        guard (1...100_000).contains(loadBatchUsers) else { return "--load-batch-users takes 1…100000" }
        guard (1...64).contains(loadWriters) else { return "--load-writers takes 1…64" }
        return nil
    }

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

    /// The count of `node` of `user`: 1–9, drawn from `seed`.
    public static func count(user: Int, node: Int, seed: UInt64) -> Int64 {
        var generator = SplitMix64(seed: seed &+ UInt64(user) &* 0x1_0000 &+ UInt64(node))
        return Int64(generator.next() % 9) + 1
    }

    static func userName(_ user: Int) -> String { String(user) }

    /// Loads, measures HTTP, then pgbench, and reports; `postgresql`: the server's version;
    /// `database`: the scratch database's name; `kept`: whether it is kept afterwards.
    ///
    /// - Throws: `BenchFailure` when a phase cannot measure; `PGError`.
    public func run(postgresql: String, database: String, kept: Bool) async throws -> QueryBenchReport {
        benchProgress("loading \(settings.users) users × \(Self.nodePaths.count) nodes")
        let load = try await loadUsers()
        benchProgress(
            "loaded \(load.rows) rows in \(QueryBenchReport.seconds(load.loadSeconds)), rolled up in \(QueryBenchReport.seconds(load.rollupSeconds)), vacuumed in \(QueryBenchReport.seconds(load.vacuumSeconds))"
        )
        benchProgress("phase 1: HTTP, \(settings.connections) connections, \(settings.warmup) s warm-up + \(settings.duration) s")
        let http = try await runHTTP()
        benchProgress(
            "HTTP: \(QueryBenchReport.number(BenchReport.perSecond(http.load.requests, http.load.seconds))) requests/s, p99 \(QueryBenchReport.milliseconds(http.load.latencies.p99Milliseconds)), \(http.load.errors) errors"
        )
        benchProgress("phase 2: pgbench, \(settings.pgbenchClients) clients, \(settings.warmup) s warm-up + \(settings.duration) s")
        let pgbenchRun = try await runPGBench()
        return QueryBenchReport(
            settings: settings, load: load, http: http, pgbench: pgbenchRun, pgbenchVersion: pgbench.version,
            postgresql: postgresql, database: database, kept: kept)
    }
}
