import Foundation
import RedDotClient
import Synchronization
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `reddot run` (ingest, rollup and the query service) as a child process on a fixed port, over
/// a ``PipelineHarness`` (a migrated test database, librdkafka's mock cluster in this process),
/// with the default settings of the service: for RedDotClient's tests. The server can be
/// stopped and started again on the same port.
final class ClientServerHarness: Sendable {
    let pipeline: PipelineHarness
    let port: Int
    let group = "client-\(UInt32.random(in: 0...UInt32.max))"
    private let child = Mutex<ReddotChild?>(nil)
    static let secret = "client-test-secret-0123456789abcdef"

    var url: URL { URL(string: "http://127.0.0.1:\(port)")! }

    static func with(_ body: (ClientServerHarness) async throws -> Void) async throws {
        let harness = try await ClientServerHarness()
        do {
            try await harness.startServer()
            try await body(harness)
        } catch {
            await harness.tearDown()
            throw error
        }
        await harness.tearDown()
    }

    private init() async throws {
        pipeline = try await PipelineHarness()
        port = try ServeCLITests.freePort()
    }

    private func tearDown() async {
        _ = try? await stopServer()
        await pipeline.tearDown()
    }

    /// Starts `reddot run` and waits until it is ready.
    func startServer() async throws {
        var environment = ProcessInfo.processInfo.environment
        environment["REDDOT_JWT_HS256_SECRET"] = Self.secret
        environment["REDDOT_LOG_LEVEL"] = "warning"
        environment["REDDOT_KAFKA_BROKERS"] = nil
        let started = try ReddotChild(
            [
                "run", "--database-url", pipeline.database.url, "--port", "\(port)", "--host", "127.0.0.1",
                "--brokers", pipeline.cluster.bootstrapServers, "--topic", pipeline.topic, "--group", group,
                "--rules", pipeline.rulesFile.path, "--no-change-feed",
            ], in: pipeline.folder, name: "run-\(UInt32.random(in: 0...UInt32.max))", environment: environment)
        child.withLock { $0 = started }
        try await ServeCLITests.waitForHealth(port: port, timeout: .seconds(60))
    }

    /// Stops the server (SIGTERM, as a deploy does); returns its exit status.
    @discardableResult
    func stopServer() async throws -> Int32? {
        guard let running = child.withLock({ $0 }) else { return nil }
        defer { child.withLock { $0 = nil } }
        return try await running.stop()
    }

    func token(_ user: String) async throws -> String {
        try await CLITests().reddot(["token", "--subject", user, "--jwt-hs256-secret", Self.secret]).stdout
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func adminToken() async throws -> String {
        try await CLITests().reddot(["token", "--admin", "--jwt-hs256-secret", Self.secret]).stdout
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A client of `user` on this server.
    func client(_ user: String, options: RedDotClient.Options = .init()) async throws -> RedDotClient {
        let token = try await token(user)
        return RedDotClient(server: url, user: user, options: options) { token }
    }

    /// Publishes `incr` events (user, path, by) through Kafka.
    func increment(_ increments: [(user: String, path: String, by: Int)]) async throws {
        try await pipeline.publish(
            increments.map { increment in
                let id = UUID().uuidString
                return (
                    increment.user,
                    #"{"id": "\#(id)", "op": "incr", "user": "\#(increment.user)", "path": "\#(increment.path)", "by": \#(increment.by)}"#
                )
            })
    }

    /// The server's tree of `user`: its version and every shown node's badge (version 0 and
    /// none for a user the server does not know yet).
    func serverTree(_ user: String) async throws -> (version: Int64, nodes: [String: Badge]) {
        let (status, body) = try await ServeCLITests.get(port: port, "/v1/users/\(user)/badges", token: try await adminToken())
        if status == 404 { return (0, [:]) }  // a user with nothing yet
        try #require(status == 200, "\(body)")
        let probe = RedDotClient(user: user)
        try probe.receive(tree: Data(body.utf8))
        var nodes: [String: Badge] = [:]
        struct Tree: Decodable {
            struct Node: Decodable {
                var path: String
                var shown: Bool
                var children: [Node]?
            }
            var tree: Node?
        }
        func visit(_ node: Tree.Node) {
            if node.shown { nodes[node.path] = probe.badge(node.path) }
            node.children?.forEach(visit)
        }
        if let tree = try JSONDecoder().decode(Tree.self, from: Data(body.utf8)).tree { visit(tree) }
        return (probe.version, nodes)
    }

    /// Waits (up to `seconds`) until the server's tree of `user` is at `version` or later and
    /// `check` holds for it; returns it.
    @discardableResult
    func waitForServer(
        _ user: String, seconds: Int = 30, _ check: @escaping ((version: Int64, nodes: [String: Badge])) -> Bool
    ) async throws -> (version: Int64, nodes: [String: Badge]) {
        let deadline = ContinuousClock.now + .seconds(seconds)
        var last = try await serverTree(user)
        while !check(last), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(100))
            last = try await serverTree(user)
        }
        return last
    }

    /// How many requests the server answered on `route` with `method` (any status), from its
    /// metrics.
    func requests(route: String, method: String = "GET", status: String? = nil) async throws -> Int {
        let page = try await PrometheusPage.scrape(port: port)
        let labels = [#"route="\#(route)""#, #"method="\#(method)""#] + (status.map { [#"status="\#($0)""#] } ?? [])
        let values = page.values("reddot_api_requests_total", matching: labels)
        if values.isEmpty, status == nil {
            let known = page.samples.map(\.series).filter { $0.hasPrefix("reddot_api_requests_total") }
            Issue.record("no requests_total series for \(route); the server has \(known)")
        }
        return Int(values.reduce(0, +))
    }
}

/// Waits (up to `seconds`) until `condition` holds; returns whether it did.
@discardableResult
func eventually(seconds: Double = 30, _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return try await condition()
}

/// Badges a callback received, in order.
final class Received: Sendable {
    private let badges = Mutex<[Badge]>([])

    func append(_ badge: Badge) { badges.withLock { $0.append(badge) } }
    var all: [Badge] { badges.withLock { $0 } }
    var count: Int { badges.withLock { $0.count } }
    var last: Badge? { badges.withLock { $0.last } }
}
