import Dispatch
import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The server under test of ``HostileClientTests``, and how each test runs it.
extension HostileClientTests {
    /// A `reddot serve` process on a migrated database with two users' badges, and tokens.
    final class Server: @unchecked Sendable {
        let arguments: [String]
        let openFiles: Int?
        let logFile: URL
        let userToken: String
        let otherToken: String
        let adminToken: String
        private(set) var process: Process
        private(set) var port: Int
        /// Probes that killed the process, with its last log lines.
        private(set) var crashes: [String] = []

        init(arguments: [String], openFiles: Int?, userToken: String, otherToken: String, adminToken: String) async throws {
            self.arguments = arguments
            self.openFiles = openFiles
            self.userToken = userToken
            self.otherToken = otherToken
            self.adminToken = adminToken
            logFile = FileManager.default.temporaryDirectory.appendingPathComponent("reddot-hostile-\(UInt32.random(in: 0...UInt32.max)).log")
            (process, port) = try await Self.start(arguments, openFiles: openFiles, log: logFile)
        }

        private static func start(_ arguments: [String], openFiles: Int?, log: URL) async throws -> (Process, Int) {
            let port = try ServeCLITests.freePort()
            let process = Process()
            let binary = try CLITests.binary.get()
            let all = arguments + ["--port", "\(port)", "--host", "127.0.0.1"]
            if let openFiles {
                process.executableURL = URL(fileURLWithPath: "/bin/sh")
                process.arguments = ["-c", "ulimit -n \(openFiles) && exec \"$0\" \"$@\"", binary.path] + all
            } else {
                process.executableURL = binary
                process.arguments = all
            }
            var environment = ProcessInfo.processInfo.environment
            environment["REDDOT_JWT_HS256_SECRET"] = ServeCLITests.secret
            environment["REDDOT_LOG_LEVEL"] = "warning"
            environment["REDDOT_KAFKA_BROKERS"] = nil
            process.environment = environment
            _ = FileManager.default.createFile(atPath: log.path, contents: nil)
            let handle = try FileHandle(forWritingTo: log)
            handle.seekToEndOfFile()
            process.standardOutput = FileHandle.nullDevice
            process.standardError = handle
            process.standardInput = FileHandle.nullDevice
            try process.run()
            try handle.close()
            do {
                try await ServeCLITests.waitForHealth(port: port)
            } catch {
                if process.isRunning { process.terminate() }
                throw error
            }
            return (process, port)
        }

        /// The server's fatal error lines, if any, then the last lines it logged.
        var logTail: String {
            let lines = ((try? String(contentsOf: logFile, encoding: .utf8)) ?? "").split(separator: "\n")
            let fatal = lines.filter { $0.contains("Fatal error") || $0.contains("fatal") || $0.contains("Crash") }.prefix(5)
            return (fatal + lines.suffix(12)).joined(separator: "\n")
        }

        func send(_ request: [UInt8], headOnly: Bool = false, timeout: Duration = .seconds(10)) async -> RawResponse {
            await RawHTTP.exchange(port: port, request, headOnly: headOnly, timeout: timeout)
        }

        func timedHealth(timeout: Duration = .seconds(5)) async -> (status: Int?, elapsed: Duration, error: String?) {
            let started = ContinuousClock.now
            let answer = await RawHTTP.exchange(port: port, RawHTTP.get("/healthz", token: nil), headOnly: false, timeout: timeout)
            return (answer.status, ContinuousClock.now - started, answer.error)
        }

        /// What the process holds open, for a failure message: its file descriptors by kind
        /// (from /proc), and its last log lines.
        var openFilesReport: String {
            let folder = "/proc/\(process.processIdentifier)/fd"
            let entries = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
            var kinds: [String: Int] = [:]
            for entry in entries {
                let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: "\(folder)/\(entry)")) ?? "?"
                kinds[target.split(separator: ":").first.map(String.init) ?? target, default: 0] += 1
            }
            let summary = kinds.sorted { $0.value > $1.value }.prefix(6).map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            return "\(entries.count) open files (\(summary)); log:\n\(logTail)"
        }

        /// The process lives and answers `/healthz` with 200 within 2 s; else the failure names
        /// `probe`, and a dead process is started again.
        func expectHealthy(after probe: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
            let health = await timedHealth(timeout: .seconds(2))
            if health.status == 200, process.isRunning { return }
            // A crashing process may take a while to end (its backtrace is written first).
            let deadline = ContinuousClock.now + .seconds(15)
            while process.isRunning, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(100)) }
            guard !process.isRunning else {
                Issue.record("GET /healthz after \(probe): \(health)", sourceLocation: sourceLocation)
                return
            }
            let report = "the server died (status \(process.terminationStatus)) after: \(probe)\n\(logTail)"
            crashes.append(report)
            Issue.record(Comment(rawValue: report), sourceLocation: sourceLocation)
            // Start it again, so that the remaining probes still run.
            try? FileManager.default.removeItem(at: logFile)
            (process, port) = try await Self.start(arguments, openFiles: openFiles, log: logFile)
        }

        /// Sends each probe on a connection of its own; checks its answers and the server's health.
        func run(_ probes: [Probe], sourceLocation: SourceLocation = #_sourceLocation) async throws {
            var table: [String] = []
            for probe in probes {
                let answer = await send(probe.request, headOnly: probe.headOnly, timeout: probe.timeout)
                table.append("\(answer.statuses.map(String.init).joined(separator: ",").isEmpty ? (answer.error ?? "no answer") : answer.statuses.map(String.init).joined(separator: ",")) \(probe.name)")
                let bad = answer.statuses.filter { (500...599).contains($0) }
                #expect(bad.isEmpty, "\(probe.name) answered \(bad): \(answer.text.prefix(300))", sourceLocation: sourceLocation)
                try await expectHealthy(after: probe.name, sourceLocation: sourceLocation)
            }
            if ProcessInfo.processInfo.environment["REDDOT_TEST_HOSTILE_TABLE"] == "1" {
                print(table.joined(separator: "\n"))
            }
        }

        func stop() async {
            if process.isRunning {
                kill(process.processIdentifier, SIGTERM)
                _ = await ChildProcess.exitStatus(of: process)
            }
            try? FileManager.default.removeItem(at: logFile)
        }
    }

    /// Starts a server with `arguments` on a fresh database, runs `body`, checks that the server
    /// is still alive and exits 0 on SIGTERM.
    func withServer(_ arguments: [String] = [], openFiles: Int? = nil, _ body: (Server) async throws -> Void) async throws {
        try await cli.withDatabase { url in
            let migrate = try await cli.reddot(["migrate", "up", "--database-url", url, "--migrations", Repository.migrationsDirectory.path])
            try #require(migrate.exitCode == 0, "\(migrate)")
            for user in [Self.user, "other"] {
                let applied = try await cli.reddot(["badges", "apply", "--database-url", url, "--user", user, "--op", "incr", "--by", "3", "--path", "root.chat.c1"])
                try #require(applied.exitCode == 0, "\(applied)")
            }
            let token = { (arguments: [String]) async throws -> String in
                let result = try await cli.reddot(["token", "--jwt-hs256-secret", ServeCLITests.secret, "--expires-in", "3600"] + arguments)
                try #require(result.exitCode == 0, "\(result)")
                return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            }
            let server = try await Server(
                arguments: ["serve", "--database-url", url] + arguments, openFiles: openFiles,
                userToken: try await token(["--subject", Self.user]), otherToken: try await token(["--subject", "other"]),
                adminToken: try await token(["--admin"]))
            do {
                try await body(server)
            } catch {
                await server.stop()
                throw error
            }
            #expect(server.process.isRunning, "the server died: \(server.logTail)")
            kill(server.process.processIdentifier, SIGTERM)
            let status = await ChildProcess.exitStatus(of: server.process)
            #expect(status == 0, "exit status after SIGTERM: \(server.logTail)")
            await server.stop()
        }
    }
}
