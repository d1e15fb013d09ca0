import BadgeCore
import BadgeIngest
import BadgeStore
import Foundation
import RdKafka
import Synchronization
import TestSupport
import Testing

@Suite("reddot ingest killed with SIGKILL at random moments")
struct IngestCrashTests {
    /// A `reddot ingest` child process.
    final class Child: @unchecked Sendable {
        let pid: pid_t

        init(_ arguments: [String]) throws {
            let binary = try ReddotBinary.url.get().path
            var pid: pid_t = 0
            let argv: [UnsafeMutablePointer<CChar>?] = ([binary] + arguments).map { strdup($0) } + [nil]
            defer { argv.forEach { free($0) } }
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
            let result = posix_spawn(&pid, binary, &actions, nil, argv, environ)
            guard result == 0 else { throw TestSetupError("cannot start \(binary): error \(result)") }
            self.pid = pid
        }

        /// Sends `signal` and returns the exit status (or 128 + signal number when killed).
        func end(with signal: Int32) async throws -> Int32 {
            kill(pid, signal)
            let pid = self.pid
            return try await onThread {
                var status: Int32 = 0
                while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
                let terminatedBy = status & 0x7f
                return terminatedBy == 0 ? (status >> 8) & 0xff : 128 + terminatedBy
            }
        }
    }

    /// Rolls up, then names the users u0… whose stored tree differs from the script's model.
    static func usersDifferingFromModel(_ harness: IngestHarness, _ script: EventScript, users: Int) async throws -> [String] {
        try await harness.rollUp()
        let now = Date()
        var mismatches: [String] = []
        for index in 0..<users {
            let user = try UserID(validating: "u\(index)")
            if try await harness.ownTree(for: user) != (script.models[user] ?? BadgeTree()).node(at: .root, now: now) {
                mismatches.append(user.rawValue)
            }
        }
        return mismatches
    }

    @Test("ten SIGKILLs during a run lose nothing and count nothing twice; SIGTERM exits 0")
    func killNine() async throws {
        let harness = try await IngestHarness(partitions: 4)
        try await tearingDown({ await harness.tearDown() }) {
            let script = try await onThread { EventScript(count: 30_000, users: 300, seed: 99) }  // CPU-heavy: off the cooperative pool
            let group = "g-kill"
            let arguments = [
                "ingest", "--brokers", harness.cluster.bootstrapServers, "--topic", harness.topic, "--group", group,
                "--database-url", harness.database.url, "--batch-wait-ms", "20", "--log-level", "error",
            ]
            let slices = stride(from: 0, to: script.records.count, by: 2_000).map {
                Array(script.records[$0..<min($0 + 2_000, script.records.count)])
            }
            let publisher = Task {
                var ends: [TopicPartition: Int64] = [:]
                for slice in slices {
                    ends.merge(try await harness.publish(slice)) { max($0, $1) }
                    try await Task.sleep(for: .milliseconds(400))
                }
                return ends
            }

            var kills = 0
            var random = SystemRandomNumberGenerator()
            func committed() async -> Int64 {
                ((try? await harness.storedOffsets(group: group)) ?? [:]).values.reduce(0, +)
            }
            while kills < 10 {
                let batchSize = [50, 200, 1_000][Int.random(in: 0..<3, using: &random)]
                let child = try Child(arguments + ["--batch-size", String(batchSize)])
                // Let it join and commit something, then kill it at a random moment mid-stream.
                let before = await committed()
                let deadline = ContinuousClock.now + .seconds(15)
                while await committed() == before, ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(50))
                }
                try await Task.sleep(for: .milliseconds(Int.random(in: 0...400, using: &random)))
                let status = try await child.end(with: SIGKILL)
                #expect(status == 128 + SIGKILL)
                kills += 1
            }
            let ends = try await publisher.value
            let last = try Child(arguments + ["--batch-size", "500"])
            let caughtUp = try await harness.waitForOffsets(group: group, ends, seconds: 120)
            #expect(caughtUp)
            // Let it finish starting (a signal before its handlers are installed just kills it).
            try await Task.sleep(for: .seconds(2))
            let terminated = try await last.end(with: SIGTERM)
            #expect(terminated == 0, "exit status after SIGTERM: \(terminated)")

            #expect(kills >= 10)
            #expect(try await harness.storedOffsets(group: group) == ends)
            #expect(try await harness.count("SELECT count(*)::int FROM \(AppliedKeys.table)") == script.uniqueEvents)
            let mismatches = try await Self.usersDifferingFromModel(harness, script, users: 300)
            #expect(mismatches.isEmpty, "\(mismatches.count) users differ, e.g. \(mismatches.prefix(5))")
        }
    }

    /// What an operator meets after crashes: no consumer property set, so the member that died
    /// is still in the group when its successor (same host, so the same instance id) joins.
    @Test("five SIGKILLs in a row with the default consumer settings: the next ingest commits within 20 s on the mock cluster (librdkafka's 45 s default took minutes)")
    func crashRecoveryWithDefaults() async throws {
        let harness = try await IngestHarness(partitions: 4)
        try await tearingDown({ await harness.tearDown() }) {
            let script = try await onThread { EventScript(count: 60_000, users: 300, seed: 7) }  // CPU-heavy: off the cooperative pool
            let group = "g-recover"
            let arguments = [
                "ingest", "--brokers", harness.cluster.bootstrapServers, "--topic", harness.topic, "--group", group,
                "--database-url", harness.database.url, "--log-level", "error",
            ]
            let slices = stride(from: 0, to: script.records.count, by: 300).map {
                Array(script.records[$0..<min($0 + 300, script.records.count)])
            }
            // A steady trickle while the kills go on; the rest at once after the last restart.
            let hurry = Mutex(false)
            let publisher = Task {
                var ends: [TopicPartition: Int64] = [:]
                for slice in slices {
                    ends.merge(try await harness.publish(slice)) { max($0, $1) }
                    if !hurry.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(400)) }
                }
                return ends
            }
            func committed() async -> Int64 {
                ((try? await harness.storedOffsets(group: group)) ?? [:]).values.reduce(0, +)
            }
            /// Starts an ingest and returns it with the time from its start to its first commit.
            func startAndTime() async throws -> (Child, Duration?) {
                let before = await committed()
                let started = ContinuousClock.now
                let child = try Child(arguments)
                while ContinuousClock.now - started < .seconds(60) {
                    if await committed() > before { return (child, ContinuousClock.now - started) }
                    try await Task.sleep(for: .milliseconds(50))
                }
                return (child, nil)
            }
            var recoveries: [Duration?] = []
            var random = SystemRandomNumberGenerator()
            for _ in 0..<5 {
                let (child, recovery) = try await startAndTime()
                recoveries.append(recovery)
                try await Task.sleep(for: .milliseconds(Int.random(in: 0...400, using: &random)))
                #expect(try await child.end(with: SIGKILL) == 128 + SIGKILL)
            }
            let (last, recovery) = try await startAndTime()
            hurry.withLock { $0 = true }
            let ends = try await publisher.value
            print("ingest restarts, start to first commit: \(recoveries.map { $0.map { "\($0)" } ?? "none" }); after the fifth SIGKILL: \(recovery.map { "\($0)" } ?? "none")")
            let limit = try #require(recovery, "the ingest started after five SIGKILLs committed nothing within 60 s")
            // Real brokers hand a static member's partitions back at once. librdkafka 2.0's mock
            // cluster ignores group.instance.id and, when it elects a leader, marks every member
            // active, the dead one too: the group waits the join delay (session.timeout.ms - 1 s)
            // and then one more session timeout for the dead member, about 11 s with the 6 s
            // default (it was about two minutes with librdkafka's 45 s).
            #expect(limit <= .seconds(20), "the ingest started after five SIGKILLs took \(limit) to commit")

            #expect(try await harness.waitForOffsets(group: group, ends, seconds: 120))
            try await Task.sleep(for: .seconds(1))
            #expect(try await last.end(with: SIGTERM) == 0)
            #expect(try await harness.storedOffsets(group: group) == ends)
            #expect(try await harness.count("SELECT count(*)::int FROM \(AppliedKeys.table)") == script.uniqueEvents)
            let mismatches = try await Self.usersDifferingFromModel(harness, script, users: 300)
            #expect(mismatches.isEmpty, "\(mismatches.count) users differ, e.g. \(mismatches.prefix(5))")
        }
    }

    @Test("events sent with reddot publish come out of reddot ingest as badges")
    func publishThenIngest() async throws {
        let harness = try await IngestHarness(partitions: 2)
        try await tearingDown({ await harness.tearDown() }) {
            let brokers = ["--brokers", harness.cluster.bootstrapServers, "--topic", harness.topic]
            let rulesFile = FileManager.default.temporaryDirectory.appendingPathComponent("rules-\(UUID().uuidString).yaml")
            try """
                rules:
                  - type: chat.message
                    op: incr
                    path: root.chat.{conversation}
                """.write(to: rulesFile, atomically: true, encoding: .utf8)
            defer { try? FileManager.default.removeItem(at: rulesFile) }
            let publishes: [[String]] = [
                ["--user", "ana", "--op", "incr", "--path", "root.chat.c1", "--by", "2"],
                ["--user", "ana", "--user", "ben", "--type", "chat.message", "--attr", "conversation=c1"],
                ["--user", "ana", "--op", "set", "--path", "root.promotion.p9", "--icon", "new"],
            ]
            for arguments in publishes {
                let status = try await run(try ReddotBinary.url.get().path, ["publish"] + brokers + arguments)
                #expect(status == 0, "reddot publish \(arguments)")
            }
            let ingest = try Child(
                ["ingest"] + brokers + [
                    "--group", "g-roundtrip", "--database-url", harness.database.url, "--rules", rulesFile.path,
                    "--log-level", "error", "--batch-wait-ms", "20",
                ])
            let ends = try await harness.logEndOffsets(expectedRecords: 3)
            #expect(try await harness.waitForOffsets(group: "g-roundtrip", ends, seconds: 60))
            #expect(try await ingest.end(with: SIGTERM) == 0)
            try await harness.rollUp()
            let store = BadgeStore(pool: harness.pool)
            let ana = try #require(try await store.tree(for: try UserID(validating: "ana")).tree)
            #expect(ana.count == 3)
            #expect(ana.children.map(\.path.rawValue) == ["root.chat", "root.promotion"])
            #expect(ana.children.last?.children.first?.icon?.rawValue == "new")
            #expect(try await store.tree(for: try UserID(validating: "ben")).tree?.count == 1)
        }
    }
}
