import BadgeCore
import BadgeIngest
import BadgeStore
import Foundation
import LibPQ
import Logging
import RdKafka
import ServiceLifecycle
import TestSupport

/// A mock Kafka cluster with one events topic, a migrated database, and ingest services to
/// start and stop at will: the end-to-end setting of the exactly-once tests.
final class IngestHarness: Sendable {
    let cluster: KafkaMockCluster
    let topic: String
    let partitions: Int32
    let database: TestDatabase
    let pool: PGPool
    let logger: Logger

    init(partitions: Int32, server: String? = nil) async throws {
        var logger = TestServer.logger
        logger.logLevel = ProcessInfo.processInfo.environment["REDDOT_TEST_LOG"].flatMap(Logger.Level.init(rawValue:)) ?? .error
        self.logger = logger
        let topic = "events-\(UInt32.random(in: 0...UInt32.max))"
        self.topic = topic
        self.partitions = partitions
        cluster = try await mockCluster(topics: [(topic, partitions), (topic + ".dlq", 1)], logger: logger)
        let migrated = try await MigratedDatabase.create(prefix: "e2e", server: server, connections: 2, logger: logger)
        database = migrated.database
        pool = migrated.pool
    }

    func tearDown() async {
        pool.close()
        await database.drop()
        let cluster = cluster
        _ = try? await onThread { cluster.close() }
    }

    var kafka: KafkaConfiguration {
        var configuration = KafkaConfiguration(bootstrapServers: cluster.bootstrapServers)
        // Short group timers, so the mock's rebalances take seconds, not minutes.
        configuration.set("session.timeout.ms", "6000")
        configuration.set("heartbeat.interval.ms", "500")
        configuration.set("max.poll.interval.ms", "20000")
        return configuration
    }

    func configuration(group: String, batchSize: Int = 1_000) -> IngestConfiguration {
        var configuration = IngestConfiguration(kafka: kafka, database: PGConfiguration(connectionString: database.url))
        configuration.topic = topic
        configuration.settings.group = group
        configuration.settings.deadLetterTopic = topic + ".dlq"
        configuration.settings.batchSize = batchSize
        configuration.settings.batchWaitMilliseconds = 50
        configuration.settings.deadLetterIntervalMilliseconds = 500
        return configuration
    }

    /// Starts an ingest service in a service group of its own.
    func start(group: String, batchSize: Int = 1_000) -> RunningIngest {
        let service = IngestService(configuration: configuration(group: group, batchSize: batchSize), logger: logger)
        let serviceGroup = ServiceGroup(
            configuration: ServiceGroupConfiguration(services: [service], gracefulShutdownSignals: [], cancellationSignals: [], logger: logger))
        let task = Task { try await serviceGroup.run() }
        return RunningIngest(serviceGroup: serviceGroup, task: task)
    }

    /// Publishes records (key, value) and returns the log-end offset of every partition written.
    func publish(_ records: [(key: String, value: [UInt8])]) async throws -> [TopicPartition: Int64] {
        let producer = try KafkaProducer(configuration: kafka, logger: logger)
        defer { producer.close() }
        let results = await producer.sendAll(
            records.map { KafkaOutgoingRecord(topic: topic, key: Array($0.key.utf8), payload: $0.value) }, timeout: .seconds(60))
        var ends: [TopicPartition: Int64] = [:]
        var failures = 0
        for result in results {
            switch result {
            case .success(let delivery):
                let partition = TopicPartition(topic: topic, partition: delivery.partition)
                ends[partition] = max(ends[partition] ?? 0, delivery.offset + 1)
            case .failure:
                failures += 1
            }
        }
        guard failures == 0 else { throw TestSetupError("\(failures) records were not delivered") }
        return ends
    }

    func storedOffsets(group: String) async throws -> [TopicPartition: Int64] {
        let partitions = (0..<self.partitions).map { TopicPartition(topic: topic, partition: $0) }
        return try await pool.withConnection { connection in
            try IngestStore.storedOffsets(group: group, partitions: partitions, on: connection)
        }
    }

    /// The log-end offset of every partition that holds records, once `expectedRecords` are in
    /// the topic (read with a throwaway consumer's view of the high watermarks).
    func logEndOffsets(expectedRecords: Int) async throws -> [TopicPartition: Int64] {
        var configuration = kafka
        configuration.set("group.id", "watermarks-\(UUID().uuidString)")
        let consumer = try KafkaConsumer(
            configuration: configuration, rebalance: KafkaRebalanceHandler(assigned: { _ in [:] }, revoked: { _ in }), logger: logger)
        try consumer.subscribe([topic])
        return try await onThread { () throws -> [TopicPartition: Int64] in
            defer { consumer.close() }
            var ends: [TopicPartition: Int64] = [:]
            let deadline = Date().addingTimeInterval(30)
            while ends.values.reduce(0, +) < Int64(expectedRecords), Date() < deadline {
                if let record = try consumer.poll(timeoutMilliseconds: 100) {
                    ends[record.topicPartition] = max(ends[record.topicPartition] ?? 0, record.offset + 1)
                }
            }
            return ends
        }
    }

    /// Waits until the stored offsets reach `ends`; returns whether they did. Gives up when they
    /// have not moved for `seconds` (a stall: what these tests look for), or after ten times
    /// that in all: a machine running every suite at once consumes slowly, but steadily (a
    /// fixed 120 s once ran out with the offsets still advancing).
    func waitForOffsets(group: String, _ ends: [TopicPartition: Int64], seconds: Double) async throws -> Bool {
        let started = ContinuousClock.now
        var lastMove = started
        var last: [TopicPartition: Int64] = [:]
        while ContinuousClock.now - lastMove < .seconds(seconds), ContinuousClock.now - started < .seconds(seconds * 10) {
            if let stored = try? await storedOffsets(group: group) {
                if ends.allSatisfy({ stored[$0.key] == $0.value }) { return true }
                if stored != last {
                    last = stored
                    lastMove = .now
                }
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        return false
    }

    /// Recomputes every dirty user, as the rollup does.
    func rollUp() async throws {
        while try await BadgeStore(pool: pool).recomputeDirtyUsers(limit: 500) > 0 {}
    }

    func count(_ sql: String) async throws -> Int {
        try await pool.withConnection { connection in
            try connection.query(PGStatement("test.count", sql, prepared: false)).singleRow().decode(0, as: Int.self)
        }
    }
}

/// An ingest service running in its own service group.
struct RunningIngest: Sendable {
    let serviceGroup: ServiceGroup
    let task: Task<Void, any Error>

    /// SIGTERM-like: finish the batch, commit, close.
    func stop() async throws {
        await serviceGroup.triggerGracefulShutdown()
        try await task.value
    }

    /// Cancels the service at once (the batch in flight is left uncommitted or committed, never half).
    func cancel() async {
        task.cancel()
        _ = try? await task.value
    }
}

/// A stream of events for many users, with its in-memory model.
struct EventScript {
    var records: [(key: String, value: [UInt8])] = []
    var models: [UserID: BadgeTree] = [:]
    var uniqueEvents = 0
    var broadcasts = 0
    var duplicates = 0

    /// `count` records over `users` users: random direct operations (set, incr, clear, forced
    /// clear), a broadcast every `broadcastEvery`, and a re-send of an earlier event every
    /// `duplicateEvery` (same id and bytes, later offset).
    init(count: Int, users userCount: Int, seed: UInt64, broadcastEvery: Int = 250, duplicateEvery: Int = 97) {
        let users = (0..<userCount).map { index in
            (try? UserID(validating: "u\(index)")) ?? UserID(rawValue: "u0")!
        }
        var generator = RandomBadgeOperations(users: users, seed: seed)
        let encoder = EventEncoder()
        let now = Date()
        var sentByUser: [UserID: [[UInt8]]] = [:]
        for index in 0..<count {
            if index % broadcastEvery == broadcastEvery - 1 {
                let event = BadgeEvent(
                    id: EventID(rawValue: "b\(seed)-\(index)")!, audience: .everyone,
                    body: .operation(path: (try? BadgePath(validating: "root.news.f\(index)")) ?? .root, operation: .set(count: 0, icon: nil)))
                records.append((key: "*", value: encoder.encode(event)))
                broadcasts += 1
                uniqueEvents += 1
                continue
            }
            let mutation = generator.next()
            if index % duplicateEvery == duplicateEvery - 1, let earlier = sentByUser[mutation.user]?.last {
                records.append((key: mutation.user.rawValue, value: earlier))
                duplicates += 1
                continue
            }
            let event = BadgeEvent(
                id: EventID(rawValue: "e\(seed)-\(index)")!, audience: .users([mutation.user]),
                occurredAt: mutation.occurredAt, body: .operation(path: mutation.path, operation: mutation.operation))
            let bytes = encoder.encode(event)
            records.append((key: mutation.user.rawValue, value: bytes))
            sentByUser[mutation.user, default: []].append(bytes)
            models[mutation.user, default: BadgeTree()].apply(mutation, now: now)
            uniqueEvents += 1
        }
    }
}

extension IngestHarness {
    /// A user's tree from their own aggregates only, without the broadcasts every user sees:
    /// what these tests model (the API tests cover broadcasts merged into trees).
    func ownTree(for user: UserID) async throws -> BadgeNode? {
        let rows = try await pool.withConnection { connection in
            try connection.query(
                PGStatement(
                    "test.own_aggregates", "SELECT path::text, count, icon, unseen FROM badge_aggregate WHERE user_id = $1", prepared: false),
                [user.rawValue]
            ).rows.map {
                (try $0.decode(0, as: String.self), try $0.decode(1, as: Int64.self), try $0.decode(2, as: String?.self), try $0.decode(3, as: Int64.self))
            }
        }
        var aggregates: [BadgePath: BadgeAggregate] = [:]
        for (path, count, icon, unseen) in rows {
            aggregates[try BadgePath(validating: path)] = BadgeAggregate(
                count: count, icon: try icon.map { try BadgeIcon(validating: $0) }, unseen: unseen)
        }
        return BadgeNode.build(aggregates: aggregates, at: .root, depth: nil, display: BadgeDisplay())
    }
}
