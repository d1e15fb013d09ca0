import Dispatch
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LibPQ
import TestSupport
import RdKafka
import Testing

/// The long-running commands and verify, through the real binary.
@Suite("reddot serve, token and verify")
struct ServeCLITests {
    let cli = CLITests()
    static let secret = "cli-test-secret-0123456789abcdef0123"

    @Test("verify: exit 0 when clean, 2 with a line per mismatch, and --repair fixes them")
    func verify() async throws {
        try await cli.withDatabase { url in
            #expect(try await cli.reddot(["migrate", "up", "--database-url", url, "--migrations", Repository.migrationsDirectory.path]).exitCode == 0)
            for (user, path) in [("v1", "root.chat.c1"), ("v1", "root.chat.c2"), ("v2", "root.promo")] {
                _ = try await cli.reddot(["badges", "apply", "--database-url", url, "--user", user, "--op", "incr", "--by", "2", "--path", path])
            }
            let clean = try await cli.reddot(["verify", "--database-url", url])
            #expect(clean.exitCode == 0, "\(clean)")
            #expect(clean.stdout.isEmpty)
            #expect(clean.stderr.contains("checked 2 users: 0 mismatched aggregates"))

            let connection = try PGConnection.connect(PGConfiguration(connectionString: url), logger: TestServer.logger)
            _ = try connection.query(
                PGStatement("plant", "UPDATE badge_aggregate SET count = 99 WHERE user_id = 'v1' AND path = 'root.chat'", prepared: false))
            connection.close()
            let found = try await cli.reddot(["verify", "--database-url", url])
            #expect(found.exitCode == 2)
            #expect(found.stdout == "user 'v1' root.chat: stored count 99; recounted count 4\n")
            let json = try await cli.reddot(["verify", "--json", "--database-url", url])
            let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
            #expect(object["users_checked"] as? Int == 2)
            #expect((object["mismatches"] as? [[String: Any]])?.first?["expected_count"] as? Int == 4)
            #expect(try await cli.reddot(["verify", "--repair", "--database-url", url]).exitCode == 2)
            #expect(try await cli.reddot(["verify", "--database-url", url]).exitCode == 0)
        }
    }

    @Test("serve: answers with a token, refuses a second server on the same port (69), and exits 0 on SIGTERM")
    func serveLifecycle() async throws {
        try await cli.withDatabase { url in
            #expect(try await cli.reddot(["migrate", "up", "--database-url", url, "--migrations", Repository.migrationsDirectory.path]).exitCode == 0)
            _ = try await cli.reddot(["badges", "apply", "--database-url", url, "--user", "sam", "--op", "incr", "--by", "5", "--path", "root.chat.c1"])
            let port = try Self.freePort()
            let server = try Self.start(["serve", "--database-url", url, "--port", "\(port)", "--host", "127.0.0.1"])
            defer { if server.isRunning { server.terminate() } }
            try await Self.waitForHealth(port: port)

            let token = try await cli.reddot(["token", "--subject", "sam", "--jwt-hs256-secret", Self.secret])
            #expect(token.exitCode == 0)
            let (status, body) = try await Self.get(port: port, "/v1/users/sam/badges", token: token.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
            #expect(status == 200)
            #expect(body.contains(#""count":5"#))
            let (refused, _) = try await Self.get(port: port, "/v1/users/sam/badges", token: nil)
            #expect(refused == 401)

            let second = try await cli.reddot(["serve", "--database-url", url, "--port", "\(port)", "--host", "127.0.0.1", "--jwt-hs256-secret", Self.secret])
            #expect(second.exitCode == 69, "\(second)")
            #expect(second.stderr.contains("already in use"))

            let stopped = ContinuousClock.now
            kill(server.processIdentifier, SIGTERM)
            #expect(await ChildProcess.exitStatus(of: server) == 0)
            #expect(ContinuousClock.now - stopped < .seconds(10))
        }
    }

    @Test("run: ingest, rollup and serve in one process; an event posted over HTTP shows in the tree; SIGTERM exits 0")
    func runAllInOne() async throws {
        var logger = TestServer.logger
        logger.logLevel = .error
        let cluster = try KafkaMockCluster(logger: logger)
        defer { cluster.close() }
        let topic = "run-\(UInt32.random(in: 0...UInt32.max))"
        try cluster.createTopic(topic, partitions: 2)
        try cluster.createTopic(topic + ".dlq", partitions: 1)
        try await cli.withDatabase { url in
            #expect(try await cli.reddot(["migrate", "up", "--database-url", url, "--migrations", Repository.migrationsDirectory.path]).exitCode == 0)
            let port = try Self.freePort()
            let server = try Self.start([
                "run", "--database-url", url, "--port", "\(port)", "--host", "127.0.0.1", "--brokers", cluster.bootstrapServers,
                "--topic", topic, "-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=500",
            ])
            defer { if server.isRunning { server.terminate() } }
            try await Self.waitForHealth(port: port)
            let admin = try await cli.reddot(["token", "--admin", "--jwt-hs256-secret", Self.secret]).stdout
                .trimmingCharacters(in: .whitespacesAndNewlines)
            let event = #"{"id": "run-1", "op": "incr", "user": "rita", "path": "root.chat.c1", "by": 4}"#
            let (posted, answer) = try await Self.post(port: port, "/v1/events", token: admin, body: event)
            #expect(posted == 202, "\(answer)")
            let deadline = ContinuousClock.now + .seconds(30)
            var body = ""
            while ContinuousClock.now < deadline {
                body = try await Self.get(port: port, "/v1/users/rita/badges", token: admin).1
                if body.contains(#""count":4"#) { break }
                try await Task.sleep(for: .milliseconds(200))
            }
            #expect(body.contains(#""count":4"#), "\(body)")
            kill(server.processIdentifier, SIGTERM)
            #expect(await ChildProcess.exitStatus(of: server) == 0)
        }
    }

    @Test("serve and token refuse missing or weak auth settings with exit 64 and a sentence")
    func authSettings() async throws {
        let missing = try await cli.reddot(["serve", "--database-url", "postgresql://127.0.0.1:1/none", "--port", "0"])
        #expect(missing.exitCode == 64)
        #expect(missing.stderr.contains("no token keys"))
        let weak = try await cli.reddot(["serve", "--database-url", "postgresql://127.0.0.1:1/none", "--jwt-hs256-secret", "short"])
        #expect(weak.exitCode == 64)
        #expect(weak.stderr.contains("at least 32 bytes"))
        let noSecret = try await cli.reddot(["token", "--subject", "x"])
        #expect(noSecret.exitCode == 64)
        #expect(noSecret.stderr.contains("no secret"))
    }

    // MARK: - helpers

    static func start(_ arguments: [String]) throws -> Process {
        let process = Process()
        process.executableURL = try CLITests.binary.get()
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment["REDDOT_JWT_HS256_SECRET"] = secret
        environment["REDDOT_LOG_LEVEL"] = "warning"
        environment["REDDOT_KAFKA_BROKERS"] = nil
        process.environment = environment
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        return process
    }

    static func freePort() throws -> Int {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { throw TestSetupError("bind() failed") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    static func get(port: Int, _ path: String, token: String?) async throws -> (Int, String) {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        request.timeoutInterval = 5
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
    }

    static func post(port: Int, _ path: String, token: String, body: String) async throws -> (Int, String) {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        request.httpMethod = "POST"
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = Data(body.utf8)
        request.timeoutInterval = 15
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
    }

    static func waitForHealth(port: Int, timeout: Duration = .seconds(60)) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let (status, _) = try? await get(port: port, "/readyz", token: nil), status == 200 { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw TestSetupError("reddot serve did not become ready on port \(port)")
    }
}
