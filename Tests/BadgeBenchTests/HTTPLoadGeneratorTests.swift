import BadgeBench
import Testing

/// The HTTP/1.1 load generator against a local server that answers known statuses after known
/// delays, and a fixed number of requests in all.
@Suite("HTTP load generator")
struct HTTPLoadGeneratorTests {
    /// The nearest-rank percentile of `values` (milliseconds), computed here independently.
    static func percentile(_ quantile: Double, of values: [Int]) -> Double {
        let sorted = values.sorted()
        let rank = Int((quantile * Double(sorted.count)).rounded(.up))
        return Double(sorted[min(sorted.count - 1, max(0, rank - 1))])
    }

    @Test("closed loop: every answer is counted, and the statuses other than 200 exactly")
    func statusCounts() async throws {
        let server = try await DelayServer(budget: 150)
        let requests = [
            server.request(status: 200, delayMilliseconds: 2), server.request(status: 404, delayMilliseconds: 2),
            server.request(status: 503, delayMilliseconds: 1), server.request(status: 200, delayMilliseconds: 0),
        ]
        let start = BenchClock.now
        let plan = HTTPLoadGenerator.Plan(
            port: server.port, requests: requests, connections: 6, threads: 2, measureStart: start, end: start + 120_000_000_000, seed: 7,
            answerLimit: 150)
        let result = try await HTTPLoadGenerator.run(plan)
        try await server.shutdown()

        let answers = server.ledger.answers
        let notFound = answers.count { $0.status == 404 }
        let unavailable = answers.count { $0.status == 503 }
        #expect(answers.count == 150)
        #expect(result.requests == 150)
        #expect(result.warmupRequests == 0)
        #expect(result.statuses == [404: notFound, 503: unavailable].filter { $0.value > 0 })
        #expect(result.errors == notFound + unavailable)
        #expect(notFound > 0 && unavailable > 0)
        #expect(result.firstError?.hasPrefix("HTTP 404: ok") == true || result.firstError?.hasPrefix("HTTP 503: ok") == true)
        // The run stops at its answer limit, long before the 120 s window ends.
        #expect(result.seconds > 0 && result.seconds < 120)
    }

    @Test("the latency percentiles match the server's delays (never below them, at most 500 ms above)")
    func latencies() async throws {
        let server = try await DelayServer(budget: 40)
        let requests = [server.request(status: 200, delayMilliseconds: 10), server.request(status: 200, delayMilliseconds: 400)]
        let start = BenchClock.now
        let plan = HTTPLoadGenerator.Plan(
            port: server.port, requests: requests, connections: 4, threads: 1, measureStart: start, end: start + 120_000_000_000, seed: 42,
            answerLimit: 40)
        let result = try await HTTPLoadGenerator.run(plan)
        try await server.shutdown()

        let delays = server.ledger.answers.map(\.delayMilliseconds)
        #expect(delays.count == 40)
        #expect(result.requests == 40)
        #expect(result.errors == 0, "\(result.firstError ?? "")")
        // Each latency is its answer's delay plus the time on the wire and in the schedulers: a
        // percentile of the latencies is at least the same percentile of the delays. The margin
        // and the long window (the run stops at its answer limit) leave room for a loaded 2-core
        // machine running other suites.
        let tolerance = 500.0
        for (measured, quantile) in [(result.latencies.p50Milliseconds, 0.5), (result.latencies.p99Milliseconds, 0.99)] {
            let expected = Self.percentile(quantile, of: delays)
            #expect(measured >= expected && measured <= expected + tolerance, "p\(Int(quantile * 100)) \(measured) ms, delays' \(expected) ms")
        }
        let longest = Double(delays.max() ?? 0)
        #expect(result.latencies.maxMilliseconds >= longest && result.latencies.maxMilliseconds <= longest + 1_000)
    }

    @Test("open loop: requests go out on schedule and every answer is counted")
    func openLoop() async throws {
        let server = try await DelayServer(budget: 30)
        let start = BenchClock.now
        let plan = HTTPLoadGenerator.Plan(
            port: server.port, requests: [server.request(status: 200, delayMilliseconds: 5)], connections: 3, threads: 1,
            measureStart: start, end: start + 120_000_000_000, seed: 1, rate: 100, answerLimit: 30)
        let result = try await HTTPLoadGenerator.run(plan)
        try await server.shutdown()

        #expect(server.ledger.answers.count == 30)
        #expect(result.requests == 30)
        #expect(result.errors == 0, "\(result.firstError ?? "")")
        #expect(result.latencies.p50Milliseconds >= 5)
    }

    @Test("fetch: one request on a connection of its own gives the status and the body")
    func fetch() async throws {
        let server = try await DelayServer(budget: 1)
        let request = server.request(status: 404, delayMilliseconds: 1)
        let port = server.port
        let (status, body) = try await onThread(named: "test.fetch") { try HTTPLoadGenerator.fetch(port: port, request: request) }
        try await server.shutdown()
        #expect(status == 404)
        #expect(body == Array("ok".utf8))
    }
}
