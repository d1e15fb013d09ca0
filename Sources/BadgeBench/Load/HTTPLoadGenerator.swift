import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A small HTTP/1.1 load generator with little overhead: a few threads, each polling its share
/// of keep-alive connections with one request in flight on each. It records the latency of every
/// answer completed in the measured window, from writing the request to reading the last byte.
public enum HTTPLoadGenerator {
    /// What to send, where, and when.
    public struct Plan: Sendable {
        /// The server's port on 127.0.0.1.
        public var port: Int
        /// Whole requests (for example one per sampled user); each send picks one at random.
        public var requests: [[UInt8]]
        /// Keep-alive connections, each with one request in flight.
        public var connections: Int
        /// Client threads; the connections are split among them.
        public var threads: Int
        /// `BenchClock` times: the warm-up runs from the start to `measureStart`.
        public var measureStart: UInt64
        /// The `BenchClock` time the load ends; answers still in flight are dropped.
        public var end: UInt64
        /// The seed of the choice of requests.
        public var seed: UInt64
        /// Requests per second offered by all threads together; 0: closed loop.
        public var rate: Int = 0
        /// Stop once this many answers (warm-up included) came back on all threads together,
        /// before `end`; nil: run until `end`.
        public var answerLimit: Int?

        /// A plan with every field given.
        public init(
            port: Int, requests: [[UInt8]], connections: Int, threads: Int, measureStart: UInt64, end: UInt64, seed: UInt64, rate: Int = 0,
            answerLimit: Int? = nil
        ) {
            self.port = port
            self.requests = requests
            self.connections = connections
            self.threads = threads
            self.measureStart = measureStart
            self.end = end
            self.seed = seed
            self.rate = rate
            self.answerLimit = answerLimit
        }
    }

    /// The answers all threads of one run have read, for ``Plan/answerLimit``.
    final class AnswerTally: Sendable {
        let count = Atomic<Int>(0)
    }

    struct ThreadResult: Sendable {
        var latencies: [UInt64] = []
        var warmupRequests = 0
        var errors = 0
        var statuses: [Int: Int] = [:]
        var firstError: String?
        var cpuSeconds = 0.0
        /// When the thread stopped (`BenchClock`).
        var stoppedAt: UInt64 = 0
    }

    /// The bytes of `GET path` to 127.0.0.1:`port` with a bearer `token`, asking for `accept`.
    public static func request(path: String, port: Int, token: String, accept: String = "application/json") -> [UInt8] {
        Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nAuthorization: Bearer \(token)\r\nAccept: \(accept)\r\n\r\n".utf8)
    }

    /// Runs the plan on its threads (never Swift's cooperative pool) and merges what they
    /// measured.
    public static func run(_ plan: Plan) async throws -> HTTPLoadResult {
        let tally = AnswerTally()
        let results = try await withThrowingTaskGroup(of: ThreadResult.self) { group in
            for thread in 0..<plan.threads {
                let connections = plan.connections / plan.threads + (thread < plan.connections % plan.threads ? 1 : 0)
                group.addTask {
                    try await onThread(named: "reddot.bench.http.\(thread)") {
                        var worker = HTTPLoadWorker(
                            plan: plan, connections: connections, seed: plan.seed &+ UInt64(thread) &* 7919, tally: tally)
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
        // The window ends at `end`, or earlier when the answer limit stopped every thread.
        let stopped = min(plan.end, results.map(\.stoppedAt).max() ?? plan.end)
        merged.seconds = Double(stopped > plan.measureStart ? stopped - plan.measureStart : 0) / 1e9
        merged.latencies = LatencySummary(sortedNanoseconds: latencies)
        return merged
    }

    /// One request on a connection of its own, blocking (at most 10 s per read): the status and
    /// the body.
    ///
    /// - Throws: `BenchFailure` when the connection fails or the answer is malformed or late.
    public static func fetch(port: Int, request: [UInt8]) throws -> (status: Int, body: [UInt8]) {
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
public struct HTTPLoadResult: Sendable {
    /// Answers completed in the measured window.
    public var requests = 0
    /// The measured window's length.
    public var seconds = 0.0
    /// The latencies of the answers completed in the measured window.
    public var latencies = LatencySummary(sortedNanoseconds: [])
    /// Answers completed before the measured window.
    public var warmupRequests = 0
    /// Answers other than 200 and broken connections, warm-up included.
    public var errors = 0
    /// Answers other than 200, by status.
    public var statuses: [Int: Int] = [:]
    /// The first error, as a sentence.
    public var firstError: String?
    /// CPU time of the client threads during the measured window.
    public var clientCPUSeconds = 0.0
}

