import Foundation
import RdKafka
import Synchronization
import Testing

@Suite("KafkaError codes, sendAll's per-record reports, and the thread rules of close")
struct KafkaErrorAndSendAllTests {
    @Test("codes keep librdkafka's names and say what is retriable or fatal")
    func codes() {
        #expect(KafkaError.Code.messageTimedOut.description == "_MSG_TIMED_OUT")
        #expect(KafkaError.Code.fencedInstanceID.description == "FENCED_INSTANCE_ID")
        #expect(KafkaError.Code.configuration.description == "configuration")
        #expect(KafkaError.Code.configuration.librdkafkaValue == nil)
        #expect(KafkaError.Code(librdkafka: -192) == .messageTimedOut)
        let timedOut = KafkaError(code: .messageTimedOut, message: "late")
        #expect(timedOut.isRetriable && !timedOut.isFatal)
        #expect(timedOut.description == "late [_MSG_TIMED_OUT]")
        let fenced = KafkaError(code: .fencedInstanceID, message: "fenced")
        #expect(fenced.isFatal && fenced.isFencedInstance && !fenced.isRetriable)
        #expect(!KafkaError(code: .configuration, message: "bad").isRetriable)
    }

    @Test("sendAll reports every record in order: stored ones where they landed, a refused one with its error")
    func sendAllReports() async throws {
        let (cluster, producer) = try clusterAndProducer(topic: "all", partitions: 2)
        defer { cluster.close() }
        defer { producer.close() }
        var records = (0..<50).map { KafkaOutgoingRecord(topic: "all", partition: 0, key: nil, payload: Array("\($0)".utf8)) }
        records[7].partition = 99  // no such partition: refused (at once or in its report)
        let results = await producer.sendAll(records, timeout: .seconds(30))
        #expect(results.count == 50)
        #expect(results.enumerated().filter { (try? $0.element.get()) == nil }.map(\.offset) == [7])
        let offsets = results.compactMap { try? $0.get().offset }
        #expect(offsets == offsets.sorted())
        #expect(Set(offsets).count == 49)
    }

    @Test("the async sendAll gives up at its timeout: records no broker took fail as _MSG_TIMED_OUT")
    func sendAllTimesOut() async throws {
        var configuration = KafkaConfiguration(bootstrapServers: "127.0.0.1:1")  // nothing listens there
        configuration.set("message.timeout.ms", "120000")
        let producer = try KafkaProducer(configuration: configuration, logger: testLogger)
        defer { producer.close(timeoutMilliseconds: 100) }
        let started = ContinuousClock.now
        let records = (0..<3).map { KafkaOutgoingRecord(topic: "nowhere", key: nil, payload: [UInt8($0)]) }
        let results = await producer.sendAll(records, timeout: .seconds(1))
        let waited = ContinuousClock.now - started
        #expect(results.count == 3)
        for result in results {
            if case .failure(let error) = result { #expect(error.code == .messageTimedOut) } else { Issue.record("delivered with no broker") }
        }
        #expect(waited >= .seconds(1) && waited < .seconds(20), "waited \(waited)")
        #expect(await producer.sendAll([], timeout: .seconds(1)).isEmpty)
    }

    @Test("the blocking sendAll streams a lazy sequence and reports each record once")
    func sendAllStreams() async throws {
        let (cluster, producer) = try clusterAndProducer(topic: "stream", partitions: 3)
        defer { cluster.close() }
        defer { producer.close() }
        let reports = Mutex<[Int]>([])
        let count = try await onThread {
            producer.sendAll((0..<500).lazy.map { KafkaOutgoingRecord(topic: "stream", key: Array("k\($0 % 9)".utf8), payload: []) }, timeout: nil) {
                index, result in
                if case .success = result { reports.withLock { $0.append(index) } }
            }
        }
        #expect(count == 500)
        #expect(reports.withLock { $0.sorted() } == Array(0..<500))
    }

    @Test("a commit after close throws .closed; sending after close fails with .closed; flush runs beside produce")
    func afterClose() async throws {
        let (cluster, producer) = try clusterAndProducer(topic: "closing", partitions: 1)
        defer { cluster.close() }
        async let flushed: Void = onThread { try producer.flush(timeoutMilliseconds: 10_000) }
        _ = try await producer.send(KafkaOutgoingRecord(topic: "closing", key: nil, payload: [1]))
        try await flushed
        try await onThread { producer.close() }
        let refused = await producer.sendAll([KafkaOutgoingRecord(topic: "closing", key: nil, payload: [2])])
        #expect(refused.count == 1)
        if case .failure(let error) = refused[0] { #expect(error.code == .closed) } else { Issue.record("sent after close") }

        var configuration = KafkaConfiguration(bootstrapServers: cluster.bootstrapServers)
        configuration.set("group.id", "closing-\(UUID().uuidString)")
        let consumer = try KafkaConsumer(
            configuration: configuration, rebalance: KafkaRebalanceHandler(assigned: { _ in [:] }, revoked: { _ in }), logger: testLogger)
        let partition = TopicPartition(topic: "closing", partition: 0)
        try consumer.commit([partition: 1])  // open: best effort, no throw
        try await onThread { consumer.close() }
        let error = #expect(throws: KafkaError.self) { try consumer.commit([partition: 1]) }
        #expect(error?.code == .closed)
    }

    /// A mock cluster with one topic, and a producer on it.
    private func clusterAndProducer(topic: String, partitions: Int32) throws -> (KafkaMockCluster, KafkaProducer) {
        let cluster = try KafkaMockCluster(logger: testLogger)
        try cluster.createTopic(topic, partitions: partitions)
        let producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: cluster.bootstrapServers), logger: testLogger)
        return (cluster, producer)
    }
}
