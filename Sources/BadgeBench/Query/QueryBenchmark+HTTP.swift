import BadgeAPI
import BadgeCore
import BadgeStore
import Foundation
import Hummingbird
import LibPQ

extension QueryBenchmark {
    /// What phase 1 measured.
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
        let secret = randomBenchSecret()
        let authenticator = try await Authenticator(configuration: AuthConfiguration(hs256Secret: secret))
        let sample = (0..<settings.sampleUsers).map { $0 * settings.stride }
        let tokenStart = BenchClock.now
        let tokens = try await Self.signTokens(secret: secret, users: sample)
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
            configuration: apiConfiguration, metrics: metrics(), logger: logger)
        let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
        let application = api.makeApplication { port in portContinuation.yield(port) }
        return try await withServiceGroup([hub, application], logger: logger, onExit: { portContinuation.finish() }) {
            var iterator = ports.makeAsyncIterator()
            guard let port = await iterator.next() else { throw BenchFailure("the query service stopped before it listened") }
            let requests = zip(sample, tokens).map { user, token in
                HTTPLoadGenerator.request(path: "/v1/users/\(Self.userName(user))/badges", port: port, token: token)
            }
            let answerBytes = try await verifyAnswers(port: port, sample: sample, requests: requests)
            return try await measureHTTP(
                port: port, requests: requests, answerBytes: answerBytes, tokenSeconds: tokenSeconds,
                cacheStatistics: { hub.treeCacheStatistics })
        }
    }

    /// One HS256 token per user of `sample`, in its order, signed on as many tasks as there are
    /// cores.
    private static func signTokens(secret: String, users sample: [Int]) async throws -> [String] {
        let parts = max(1, ProcessInfo.processInfo.activeProcessorCount)
        return try await withThrowingTaskGroup(of: (Int, [String]).self) { group in
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
        try await BenchClock.sleep(until: measureStart)
        let database = settings.databaseName
        let before = CPUSample.now(database: database)
        let cacheBefore = cacheStatistics()
        try await BenchClock.sleep(until: end)
        let after = CPUSample.now(database: database)
        let cacheAfter = cacheStatistics()
        let load = try await result
        let cpu = CPUUsage(before: before, after: after, httpClientSeconds: load.clientCPUSeconds)
        let cache = TreeCacheStatistics(hits: cacheAfter.hits - cacheBefore.hits, misses: cacheAfter.misses - cacheBefore.misses)
        return HTTPMeasurement(load: load, answerBytes: answerBytes, tokenSeconds: tokenSeconds, cpu: cpu, cache: cache)
    }
}
