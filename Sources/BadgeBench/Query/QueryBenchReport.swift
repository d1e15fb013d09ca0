import Foundation

/// What `reddot bench query` prints: ``text``, or the report itself as JSON.
public struct QueryBenchReport: Encodable, Sendable {
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
    /// HTTP answers other than 200 and broken connections.
    public var httpErrors: Int
    var httpErrorStatuses: [String: Int]
    /// The first HTTP error, as a sentence.
    public var firstError: String?
    var httpCPU: CPUShare?
    var pgbenchClients: Int
    var pgbenchThreads: Int
    var pgbenchTransactions: Int
    /// pgbench's failed transactions.
    public var pgbenchFailed: Int
    var pgbenchTps: Double
    var pgbenchLatencyAverageMs: Double
    var pgbenchCommand: String
    var pgbenchScript: String
    var pgbenchCPU: CPUShare?
    var httpPercentOfPgbench: Double

    /// CPU per request, in microseconds, and the share of the machine that other processes took.
    struct CPUShare: Encodable, Sendable {
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
        (build, date, processors) = (BenchMachine.build, BenchMachine.date, BenchMachine.processors)
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

    /// The report as the lines the command prints.
    public var text: String {
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
