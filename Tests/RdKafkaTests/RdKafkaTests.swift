import Foundation
import Logging
import RdKafka
import Synchronization
import Testing

/// Runs blocking librdkafka calls on a thread of their own, never on Swift's cooperative pool.
func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try body() }) }
        thread.start()
    }
}

let testLogger: Logger = {
    var logger = Logger(label: "reddot.test.kafka")
    logger.logLevel = .warning
    return logger
}()

/// Polls `consumer` until `count` records arrived or `seconds` passed.
func consume(_ consumer: KafkaConsumer, count: Int, seconds: Double = 20) throws -> [KafkaRecord] {
    var records: [KafkaRecord] = []
    let deadline = Date().addingTimeInterval(seconds)
    while records.count < count, Date() < deadline {
        if let record = try consumer.poll(timeoutMilliseconds: 100) { records.append(record) }
    }
    return records
}

@Suite("librdkafka wrapper on the in-process mock cluster")
struct RdKafkaTests {
    @Test("the linked librdkafka is 2.0 or newer")
    func version() throws {
        try RdKafkaVersion.requireSupported()
        #expect(RdKafkaVersion.text.hasPrefix("2."))
    }

    @Test("a refused property is named in the error")
    func badProperty() throws {
        let error = #expect(throws: KafkaError.self) {
            try KafkaProducer(configuration: KafkaConfiguration([("no.such.property", "1")]), logger: testLogger)
        }
        #expect(error?.message.contains("no.such.property") == true)
        #expect(throws: KafkaError.self) { try KafkaConfiguration.parse(assignment: "novalue") }
        let parsed = try KafkaConfiguration.parse(assignment: "a=b=c")
        #expect(parsed.key == "a")
        #expect(parsed.value == "b=c")
    }

    @Test("records round-trip with keys, headers, null keys and null payloads")
    func roundTrip() async throws {
        let cluster = try KafkaMockCluster(logger: testLogger)
        try cluster.createTopic("round", partitions: 3)
        let producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: cluster.bootstrapServers), logger: testLogger)
        var sent: [KafkaOutgoingRecord] = []
        for index in 0..<300 {
            sent.append(
                KafkaOutgoingRecord(
                    topic: "round", key: index % 10 == 0 ? nil : Array("user\(index % 7)".utf8),
                    payload: index % 25 == 0 ? nil : Array("{\"n\":\(index)}".utf8),
                    headers: [KafkaHeader(name: "reddot.reason", text: "r\(index)"), KafkaHeader(name: "empty", value: nil)]))
        }
        var deliveries: [KafkaDelivery] = []
        for record in sent { deliveries.append(try await producer.send(record)) }
        #expect(Set(deliveries.map(\.partition)).count > 1)
        try await onThread { producer.close() }

        var configuration = KafkaConfiguration(bootstrapServers: cluster.bootstrapServers)
        configuration.set("group.id", "round-\(UUID().uuidString)")
        let consumer = try KafkaConsumer(
            configuration: configuration, rebalance: KafkaRebalanceHandler(assigned: { _ in [:] }, revoked: { _ in }), logger: testLogger)
        try consumer.subscribe(["round"])
        let received = try await onThread { try consume(consumer, count: 300) }
        try await onThread { consumer.close() }
        #expect(received.count == 300)
        let byPayload = Dictionary(grouping: received, by: { $0.headers.first?.value ?? [] })
        for (index, record) in sent.enumerated() {
            let match = byPayload[Array("r\(index)".utf8)]?.first
            #expect(match?.key == record.key, "record \(index)")
            #expect(match?.payload == record.payload, "record \(index)")
            #expect(match?.headers == record.headers, "record \(index)")
        }
        try await onThread { cluster.close() }
    }

    @Test("partitions start at the offsets the rebalance handler returns", arguments: ["range", "cooperative-sticky"])
    func assignedOffsets(strategy: String) async throws {
        let cluster = try KafkaMockCluster(logger: testLogger)
        try cluster.createTopic("offsets", partitions: 2)
        let producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: cluster.bootstrapServers), logger: testLogger)
        for partition in Int32(0)..<2 {
            for index in 0..<20 {
                _ = try await producer.send(KafkaOutgoingRecord(topic: "offsets", partition: partition, key: nil, payload: Array("\(index)".utf8)))
            }
        }
        try await onThread { producer.close() }
        var configuration = KafkaConfiguration(bootstrapServers: cluster.bootstrapServers)
        configuration.set("group.id", "offsets-\(UUID().uuidString)")
        configuration.set("partition.assignment.strategy", strategy)
        let assignedSeen = Mutex<[TopicPartition]>([])
        let consumer = try KafkaConsumer(
            configuration: configuration,
            rebalance: KafkaRebalanceHandler(
                assigned: { partitions in
                    assignedSeen.withLock { $0 += partitions }
                    return Dictionary(uniqueKeysWithValues: partitions.map { ($0, $0.partition == 0 ? 15 : 7) })
                }, revoked: { _ in }),
            logger: testLogger)
        try consumer.subscribe(["offsets"])
        let received = try await onThread { try consume(consumer, count: 5 + 13) }
        #expect(consumer.rebalanceProtocol == (strategy == "range" ? "EAGER" : "COOPERATIVE"))
        try await onThread { consumer.close() }
        #expect(assignedSeen.withLock { Set($0) } == [TopicPartition(topic: "offsets", partition: 0), TopicPartition(topic: "offsets", partition: 1)])
        #expect(received.filter { $0.partition == 0 }.map(\.offset) == Array(15..<20))
        #expect(received.filter { $0.partition == 1 }.map(\.offset) == Array(7..<20))
        try await onThread { cluster.close() }
    }

    @Test("a second consumer takes half the partitions; closing it gives them back at once", arguments: ["range", "cooperative-sticky"])
    func rebalanceBetweenConsumers(strategy: String) async throws {
        let cluster = try KafkaMockCluster(logger: testLogger)
        try cluster.createTopic("shared", partitions: 4)
        let group = "shared-\(UUID().uuidString)"
        final class Owned: Sendable {
            let partitions = Mutex<Set<TopicPartition>>([])
        }
        func makeConsumer(_ owned: Owned) throws -> KafkaConsumer {
            var configuration = KafkaConfiguration(bootstrapServers: cluster.bootstrapServers)
            configuration.set("group.id", group)
            configuration.set("partition.assignment.strategy", strategy)
            // Short group timers, so the mock's rebalances finish in seconds.
            configuration.set("session.timeout.ms", "6000")
            configuration.set("heartbeat.interval.ms", "500")
            configuration.set("max.poll.interval.ms", "10000")
            let consumer = try KafkaConsumer(
                configuration: configuration,
                rebalance: KafkaRebalanceHandler(
                    assigned: { partitions in
                        owned.partitions.withLock { $0.formUnion(partitions) }
                        return [:]
                    },
                    revoked: { partitions in owned.partitions.withLock { $0.subtract(partitions) } }),
                logger: testLogger)
            try consumer.subscribe(["shared"])
            return consumer
        }
        let firstOwned = Owned()
        let secondOwned = Owned()
        let first = try makeConsumer(firstOwned)
        let second = try makeConsumer(secondOwned)
        // Poll both on their threads until the group has settled on 2 + 2.
        let settled = try await onThread { () -> Bool in
            let deadline = Date().addingTimeInterval(30)
            while Date() < deadline {
                _ = try first.poll(timeoutMilliseconds: 50)
                _ = try second.poll(timeoutMilliseconds: 50)
                if firstOwned.partitions.withLock({ $0.count }) == 2, secondOwned.partitions.withLock({ $0.count }) == 2 { return true }
            }
            return false
        }
        #expect(settled)
        #expect(firstOwned.partitions.withLock { $0 }.isDisjoint(with: secondOwned.partitions.withLock { $0 }))
        // The first keeps polling (as another process would) while the second leaves.
        async let tookOver = onThread { () -> Bool in
            let deadline = Date().addingTimeInterval(30)
            while Date() < deadline {
                _ = try first.poll(timeoutMilliseconds: 50)
                if firstOwned.partitions.withLock({ $0.count }) == 4 { return true }
            }
            return false
        }
        try await onThread { second.close() }
        #expect(secondOwned.partitions.withLock { $0.isEmpty })  // close revoked its partitions
        let moved = try await tookOver
        #expect(moved)
        try await onThread { first.close() }
        try await onThread { cluster.close() }
    }
}
