import BadgeCore
import BadgeIngest
import BadgeStore
import Foundation
import LibPQ
import Logging
import RdKafka
import ServiceLifecycle
import Synchronization
import TestSupport
import Testing

@Suite("Ingest end to end: mock Kafka cluster, real PostgreSQL", .serialized)
struct IngestServiceTests {
    @Test("exactly once while consumers stop, start, crash and rebalance")
    func exactlyOnceUnderRestarts() async throws {
        let harness = try await IngestHarness(partitions: 8)
        try await tearingDown({ await harness.tearDown() }) {
            let script = try await onThread { EventScript(count: 100_000, users: 1_000, seed: 42) }  // CPU-heavy: off the cooperative pool
            let group = "g-restarts"

            // Publish in the background, in slices, while consumers come and go.
            let slices = stride(from: 0, to: script.records.count, by: 10_000).map { Array(script.records[$0..<min($0 + 10_000, script.records.count)]) }
            let publisher = Task {
                var ends: [TopicPartition: Int64] = [:]
                for slice in slices {
                    ends.merge(try await harness.publish(slice)) { max($0, $1) }
                    try await Task.sleep(for: .milliseconds(300))
                }
                return ends
            }

            var random = SystemRandomNumberGenerator()
            var first: RunningIngest? = harness.start(group: group)
            var second: RunningIngest?
            var actions: [String] = []
            for _ in 0..<12 {
                try await Task.sleep(for: .milliseconds(Int.random(in: 300...1_500, using: &random)))
                switch Int.random(in: 0..<6, using: &random) {
                case 0, 1:  // the second consumer joins or leaves: partitions rebalance between them
                    if let running = second {
                        try await running.stop()
                        second = nil
                        actions.append("second stopped")
                    } else {
                        second = harness.start(group: group, batchSize: 300)
                        actions.append("second started")
                    }
                case 2:  // graceful restart of the first
                    try await first?.stop()
                    first = harness.start(group: group)
                    actions.append("first restarted")
                case 3:  // abrupt: cancelled mid-batch
                    await first?.cancel()
                    first = harness.start(group: group)
                    actions.append("first cancelled and restarted")
                case 4:  // both down for a moment
                    try await first?.stop()
                    try await second?.stop()
                    second = nil
                    try await Task.sleep(for: .milliseconds(200))
                    first = harness.start(group: group)
                    actions.append("both stopped, first restarted")
                default:
                    actions.append("nothing")
                }
            }
            let ends = try await publisher.value
            let caughtUp = try await harness.waitForOffsets(group: group, ends, seconds: 120)
            #expect(caughtUp, "stored offsets never reached the log end; actions: \(actions)")
            try await first?.stop()
            try await second?.stop()

            // Stored offsets equal the log-end offsets; every unique event applied once.
            #expect(try await harness.storedOffsets(group: group) == ends)
            #expect(try await harness.count("SELECT count(*)::int FROM \(AppliedKeys.table)") == script.uniqueEvents)
            #expect(try await harness.count("SELECT count(*)::int FROM broadcast") == script.broadcasts)
            #expect(try await harness.count("SELECT count(*)::int FROM rejected_record") == 0)
            try await harness.rollUp()
            var mismatches: [String] = []
            let now = Date()
            for index in 0..<1_000 {
                let user = try UserID(validating: "u\(index)")
                let stored = try await harness.ownTree(for: user)
                let expected = (script.models[user] ?? BadgeTree()).node(at: .root, now: now)
                if stored != expected { mismatches.append(user.rawValue) }
            }
            #expect(mismatches.isEmpty, "\(mismatches.count) users differ from the model, e.g. \(mismatches.prefix(5)); actions: \(actions)")
        }
    }

    @Test("Kafka's committed offsets are ignored: a crash between the database commit and the Kafka commit counts nothing twice")
    func kafkaOffsetsBehindDatabase() async throws {
        let harness = try await IngestHarness(partitions: 3)
        try await tearingDown({ await harness.tearDown() }) {
            let script = try await onThread { EventScript(count: 6_000, users: 100, seed: 5) }  // CPU-heavy: off the cooperative pool
            let group = "g-kafka-behind"
            let half = script.records.count / 2
            var ends = try await harness.publish(Array(script.records[..<half]))
            let first = harness.start(group: group)
            #expect(try await harness.waitForOffsets(group: group, ends, seconds: 60))
            try await first.stop()

            // As if every Kafka commit had been lost: the group's committed offsets go back to 0.
            var configuration = harness.kafka
            configuration.set("group.id", group)
            let rewinder = try KafkaConsumer(
                configuration: configuration, rebalance: KafkaRebalanceHandler(assigned: { _ in [:] }, revoked: { _ in }), logger: harness.logger)
            let partitions = (0..<harness.partitions).map { TopicPartition(topic: harness.topic, partition: $0) }
            try await onThread {
                try rewinder.subscribe([harness.topic])
                let deadline = Date().addingTimeInterval(20)
                while rewinder.assignment().count < partitions.count, Date() < deadline {
                    _ = try rewinder.poll(timeoutMilliseconds: 100)
                }
                try rewinder.commitSynchronously(Dictionary(uniqueKeysWithValues: partitions.map { ($0, Int64(0)) }))
                rewinder.close()
            }

            let firstEnds = ends
            ends.merge(try await harness.publish(Array(script.records[half...]))) { max($0, $1) }
            // The restarted consumer starts where PostgreSQL says: it never re-reads a record of the
            // first half (its first commit of each partition lies past the first half's end).
            let commits = Mutex<[[TopicPartition: Int64]]>([])
            var secondConfiguration = harness.configuration(group: group)
            secondConfiguration.onCommit = { offsets in commits.withLock { $0.append(offsets) } }
            let second = RunningIngest.start(IngestService(configuration: secondConfiguration, logger: harness.logger), logger: harness.logger)
            #expect(try await harness.waitForOffsets(group: group, ends, seconds: 60))
            try await second.stop()
            let reread = commits.withLock { batches in
                batches.flatMap { $0 }.filter { partition, next in next <= (firstEnds[partition] ?? 0) }
            }
            #expect(reread.isEmpty, "batches at or below the first half's end: \(reread)")
            // With its offsets, each partition's last batch stored what waited after it (the rollup's
            // backlog signal): nothing, once ingest has read to the end.
            #expect(
                try await harness.count("SELECT count(*)::int FROM consumer_offset WHERE consumer_group = 'g-kafka-behind' AND waiting = 0")
                    == Int(harness.partitions))
            #expect(try await harness.count("SELECT count(*)::int FROM \(AppliedKeys.table)") == script.uniqueEvents)
            try await harness.rollUp()
            let now = Date()
            for index in 0..<100 {
                let user = try UserID(validating: "u\(index)")
                let stored = try await harness.ownTree(for: user)
                let expected = (script.models[user] ?? BadgeTree()).node(at: .root, now: now)
                #expect(stored == expected, "user \(user): stored \(String(describing: stored)), model \(String(describing: expected))")
            }
        }
    }

    @Test("a database restart mid-stream: ingest recovers by itself, exactly once")
    func databaseRestart() async throws {
        let server = try TestServer.restartable()
        let harness = try await IngestHarness(partitions: 4, server: server.adminURL)
        try await tearingDown({ await harness.tearDown() }) {
            let script = try await onThread { EventScript(count: 20_000, users: 300, seed: 7) }  // CPU-heavy: off the cooperative pool
            let group = "g-db-restart"
            let running = harness.start(group: group, batchSize: 200)
            let half = script.records.count / 2
            var ends = try await harness.publish(Array(script.records[..<half]))
            try await Task.sleep(for: .milliseconds(300))
            async let restarted = run(server.pgCtl, ["restart", "-m", "fast", "-w"])
            ends.merge(try await harness.publish(Array(script.records[half...]))) { max($0, $1) }
            #expect(try await restarted == 0)
            let caughtUp = try await harness.waitForOffsets(group: group, ends, seconds: 120)
            #expect(caughtUp)
            try await running.stop()
            #expect(try await harness.count("SELECT count(*)::int FROM \(AppliedKeys.table)") == script.uniqueEvents)
            try await harness.rollUp()
            let now = Date()
            for index in 0..<300 {
                let user = try UserID(validating: "u\(index)")
                let stored = try await harness.ownTree(for: user)
                let expected = (script.models[user] ?? BadgeTree()).node(at: .root, now: now)
                #expect(stored == expected, "user \(user): stored \(String(describing: stored)), model \(String(describing: expected))")
            }
        }
    }

    @Test("bad records land in the dead-letter table and topic with their reason; good ones beside them apply once")
    func deadLetters() async throws {
        let harness = try await IngestHarness(partitions: 1)
        try await tearingDown({ await harness.tearDown() }) {
            let rules = try RuleSet(
                yaml: """
                    rules:
                      - type: chat.message
                        op: incr
                        path: root.chat.{conversation}
                    """)
            func good(_ index: Int) -> (key: String, value: [UInt8]) {
                (key: "alice", value: Array(#"{"id":"good-\#(index)","op":"incr","user":"alice","path":"root.inbox","by":1}"#.utf8))
            }
            let tooMany = (0...1_000).map { "\"u\($0)\"" }.joined(separator: ",")
            var bad: [(reason: String, value: [UInt8])] = [
                ("malformed_json", Array(#"{"id": "x1", "op": "incr""#.utf8)),
                ("invalid_encoding", [0x7B, 0x22, 0xFF, 0xFE, 0x22, 0x7D]),
                ("too_large", Array(("{\"id\":\"x3\",\"pad\":\"" + String(repeating: "a", count: 70_000) + "\"}").utf8)),
                ("unknown_type", Array(#"{"id":"x4","type":"no.such.type","user":"alice","attrs":{}}"#.utf8)),
                ("unknown_op", Array(#"{"id":"x5","op":"explode","user":"alice","path":"root.a"}"#.utf8)),
                ("missing_attribute", Array(#"{"id":"x6","type":"chat.message","user":"alice","attrs":{"other":"c1"}}"#.utf8)),
                ("invalid_field", Array(#"{"id":"x7","op":"set","user":"alice","path":"root.a","count":-3}"#.utf8)),
                ("too_many_users", Array(#"{"id":"x8","op":"set","users":[\#(tooMany)],"path":"root.a"}"#.utf8)),
            ]
            for (index, character) in ["*", "|", "!", "@", "%", "{", "}"].enumerated() {
                bad.append(("invalid_path", Array(#"{"id":"p\#(index)","op":"set","user":"alice","path":"root.a\#(character)b"}"#.utf8)))
            }
            let badRecords = bad
            let expectedLetters = bad.count
            let invalidBytes = "\\x" + bad[1].value.map { String(format: "%02x", $0) }.joined()
            var records: [(key: String, value: [UInt8])] = []
            for (index, item) in badRecords.enumerated() {
                records.append(good(index))
                records.append((key: "alice", value: item.value))
            }
            records.append(good(bad.count))
            var configuration = harness.configuration(group: "g-dlq", batchSize: 7)
            configuration.rules = rules
            let service = IngestService(configuration: configuration, logger: harness.logger)
            let running = RunningIngest.start(service, logger: harness.logger)
            let ends = try await harness.publish(records)
            #expect(try await harness.waitForOffsets(group: "g-dlq", ends, seconds: 60))

            // The table: one row per bad record, with its reason, origin and exact bytes.
            let rows = try await harness.pool.withConnection { connection in
                try connection.query(
                    PGStatement("test.rejected", "SELECT reason, record_offset, payload = $1::bytea FROM rejected_record ORDER BY record_offset", prepared: false),
                    [invalidBytes]
                ).rows.map { (try $0.decode(0, as: String.self), try $0.decode(1, as: Int64.self), try $0.decode(2, as: Bool.self)) }
            }
            #expect(rows.map(\.0) == bad.map(\.reason))
            #expect(rows.map(\.1) == bad.indices.map { Int64($0 * 2 + 1) })
            #expect(rows.filter(\.2).map(\.0) == ["invalid_encoding"])  // the exact bytes were kept
            // The good records around them: applied exactly once.
            try await harness.rollUp()
            let inbox = try await BadgeStore(pool: harness.pool).tree(for: try UserID(validating: "alice"), at: try BadgePath(validating: "root.inbox"))
            #expect(inbox.tree?.count == Int64(bad.count + 1))

            // The topic: the same records, with headers naming the reason and the origin.
            var consumerConfiguration = harness.kafka
            consumerConfiguration.set("group.id", "dlq-reader")
            let consumer = try KafkaConsumer(
                configuration: consumerConfiguration, rebalance: KafkaRebalanceHandler(assigned: { _ in [:] }, revoked: { _ in }), logger: harness.logger)
            try consumer.subscribe([harness.topic + ".dlq"])
            let letters = try await onThread { () -> [KafkaRecord] in
                var letters: [KafkaRecord] = []
                let deadline = Date().addingTimeInterval(30)
                while letters.count < expectedLetters, Date() < deadline {
                    if let record = try consumer.poll(timeoutMilliseconds: 100) { letters.append(record) }
                }
                consumer.close()
                return letters
            }
            try await running.stop()
            #expect(letters.count == bad.count)
            func header(_ record: KafkaRecord, _ name: String) -> String? {
                record.headers.first { $0.name == name }?.value.map { String(decoding: $0, as: UTF8.self) }
            }
            #expect(letters.compactMap { header($0, "reddot.reason") } == bad.map(\.reason))
            #expect(letters.allSatisfy { header($0, "reddot.original.topic") == harness.topic })
            #expect(letters.compactMap { header($0, "reddot.original.offset") } == bad.indices.map { String($0 * 2 + 1) })
            #expect(letters.map(\.payload) == bad.map { Optional($0.value) })
            #expect(try await harness.count("SELECT count(*)::int FROM rejected_record WHERE published_at IS NULL") == 0)
        }
    }
}

extension RunningIngest {
    static func start(_ service: IngestService, logger: Logging.Logger) -> RunningIngest {
        let serviceGroup = ServiceGroup(
            configuration: ServiceGroupConfiguration(services: [service], gracefulShutdownSignals: [], cancellationSignals: [], logger: logger))
        return RunningIngest(serviceGroup: serviceGroup, task: Task { try await serviceGroup.run() })
    }
}

/// Runs a program to its end, on a thread of its own, and returns its exit status.
///
/// Not Foundation's `Process`: it learns of the end through a descriptor the child inherits, and a
/// server the program starts in the background (as `pg_ctl restart` does) keeps that open.
func run(_ path: String, _ arguments: [String]) async throws -> Int32 {
    try await onThread {
        var pid: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let spawned = posix_spawn(&pid, path, nil, nil, argv, environ)
        guard spawned == 0 else { throw TestSetupError("cannot start \(path): error \(spawned)") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        return (status >> 8) & 0xff
    }
}
