internal import CRdKafka
import Foundation
import Synchronization
public import Logging

/// A librdkafka consumer in a group, whose partitions start at offsets the application chooses.
///
/// Offsets are never committed automatically (`enable.auto.commit=false`): the application
/// stores them where it stores its results, and passes them back through the rebalance
/// handler's `assigned`, which runs inside the rebalance callback for both the eager and the
/// cooperative protocols. `commit` also records them in Kafka (best effort) for lag tools.
///
/// Threading: every method but `commit` must be called from one thread, the poll thread (the
/// rebalance handler runs there too, inside `poll`). `commit` may run on any thread: it uses the
/// client under the lock that `close` takes to retire it, so a commit after (or during) `close`
/// throws `.closed` rather than touching a destroyed client. The client's main queue
/// (statistics, client errors) is served by a thread of the consumer's own, so they keep coming
/// while `poll` waits. Owns its `rd_kafka_t` and destroys it in `close()` (or deinit), after
/// `rd_kafka_consumer_close`: a dynamic member leaves the group, so its partitions move at once;
/// a static one (`group.instance.id`) keeps them until it rejoins with the same id or its
/// session times out.
public final class KafkaConsumer: Sendable {
    /// The client, nil once `close` took it. Guarded so that `commit` on another thread never
    /// sees a destroyed client.
    private let state = Mutex(ConsumerHandle(pointer: nil))
    private let context: KafkaClientContext
    private let mainQueue: MainQueueServer
    private let logger: Logger

    /// Creates a consumer; `group.id` must be among the properties.
    ///
    /// - Throws: `KafkaError` for a refused property, a missing group id, an unsupported
    ///   librdkafka, or a client that cannot be created.
    public init(configuration: KafkaConfiguration, rebalance: KafkaRebalanceHandler, logger: Logger) throws(KafkaError) {
        try RdKafkaVersion.requireSupported()
        guard configuration["group.id"] != nil else {
            throw KafkaError.configuration("a consumer needs group.id")
        }
        var configuration = configuration
        configuration.set("enable.auto.commit", "false")
        configuration.set("enable.auto.offset.store", "false")
        if configuration["auto.offset.reset"] == nil { configuration.set("auto.offset.reset", "earliest") }
        let conf = try configuration.makeNative()
        let context = KafkaClientContext(logger: logger, rebalance: rebalance, clientName: "consumer")
        context.install(on: conf)
        rd_kafka_conf_set_rebalance_cb(conf) { client, error, list, opaque in
            guard let client, let context = KafkaClientContext.from(opaque) else { return }
            KafkaConsumer.rebalance(client: client, error: error, list: list, context: context)
        }
        var buffer = [CChar](repeating: 0, count: 512)
        guard let handle = rd_kafka_new(RD_KAFKA_CONSUMER, conf, &buffer, buffer.count) else {
            rd_kafka_conf_destroy(conf)  // not taken over on failure
            throw KafkaError(code: .creation, message: "cannot create the Kafka consumer: \(cBufferText(buffer))")
        }
        // The main queue (statistics, client errors) is served on a thread of its own rather than
        // forwarded to `poll`: the lag gauges and fatal errors keep coming while the poll thread
        // waits, for a database or a rebalance.
        self.mainQueue = MainQueueServer(handle: handle)
        self.context = context
        self.logger = logger
        let opened = ConsumerHandle(pointer: handle)
        state.withLock { $0 = opened }
    }

    deinit { close() }

    /// The offset meaning "the partition's first record still kept".
    public static let offsetBeginning: Int64 = -2
    /// The offset meaning "after the partition's last record".
    public static let offsetEnd: Int64 = -1

    /// Subscribes to `topics` (the group then assigns partitions during `poll`).
    public func subscribe(_ topics: [String]) throws(KafkaError) {
        let handle = try openHandle()
        let list = rd_kafka_topic_partition_list_new(Int32(topics.count))
        defer { rd_kafka_topic_partition_list_destroy(list) }
        for topic in topics { rd_kafka_topic_partition_list_add(list, topic, RD_KAFKA_PARTITION_UA) }
        let error = rd_kafka_subscribe(handle, list)
        guard error == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(error, context: "cannot subscribe to \(topics)") }
    }

    /// Waits up to `timeoutMilliseconds` for the next record; serves rebalances meanwhile.
    ///
    /// - Returns: the record, or nil when none came (or a partition reached its end).
    /// - Throws: `KafkaError` for a fatal client error; other consumer errors are logged.
    public func poll(timeoutMilliseconds: Int32) throws(KafkaError) -> KafkaRecord? {
        let handle = try openHandle()
        if let fatal = context.fatalError.withLock({ $0 }) { throw fatal }
        guard let message = rd_kafka_consumer_poll(handle, timeoutMilliseconds) else { return nil }
        defer { rd_kafka_message_destroy(message) }
        let item = message.pointee
        let topic = item.rkt.flatMap { rd_kafka_topic_name($0) }.map { String(cString: $0) } ?? ""
        if item.err != RD_KAFKA_RESP_ERR_NO_ERROR {
            if item.err == RD_KAFKA_RESP_ERR__PARTITION_EOF { return nil }
            let error = KafkaError(item.err, context: "consumer error on \(topic)[\(item.partition)]")
            logger.info("Kafka consumer error", metadata: [LogKey.error: "\(error)"])
            if KafkaError.Code(item.err) == .fatal {
                var buffer = [CChar](repeating: 0, count: 512)
                let fatal = rd_kafka_fatal_error(handle, &buffer, buffer.count)
                throw KafkaError(fatal, context: "fatal client error: \(cBufferText(buffer))")
            }
            return nil
        }
        let key = item.key.map { Array(UnsafeRawBufferPointer(start: $0, count: item.key_len)) }
        let payload = item.payload.map { Array(UnsafeRawBufferPointer(start: $0, count: item.len)) }
        return KafkaRecord(
            topic: topic, partition: item.partition, offset: item.offset, key: key, payload: payload,
            headers: Self.headers(of: message))
    }

    private static func headers(of message: UnsafeMutablePointer<rd_kafka_message_t>) -> [KafkaHeader] {
        var headers: OpaquePointer?
        guard rd_kafka_message_headers(message, &headers) == RD_KAFKA_RESP_ERR_NO_ERROR, let headers else { return [] }
        var result: [KafkaHeader] = []
        var index = 0
        while true {
            var name: UnsafePointer<CChar>?
            var value: UnsafeRawPointer?
            var size = 0
            guard rd_kafka_header_get_all(headers, index, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR else { break }
            result.append(
                KafkaHeader(
                    name: name.map { String(cString: $0) } ?? "",
                    value: value.map { Array(UnsafeRawBufferPointer(start: $0, count: size)) }))
            index += 1
        }
        return result
    }

    /// Records `nextOffsets` (the next offset to read, per partition) as the group's committed
    /// offsets in Kafka, asynchronously and best effort (for lag tools; not authoritative): a
    /// refused commit is logged, not thrown. Unlike the other methods, it may be called from any
    /// thread, also while another closes the consumer.
    ///
    /// - Throws: `KafkaError` `.closed` when the consumer is closed (or closing).
    public func commit(_ nextOffsets: [TopicPartition: Int64]) throws(KafkaError) {
        let error: rd_kafka_resp_err_t = try state.withLock { (state) throws(KafkaError) -> rd_kafka_resp_err_t in
            guard let handle = state.pointer else { throw Self.closedError }
            guard !nextOffsets.isEmpty else { return RD_KAFKA_RESP_ERR_NO_ERROR }
            let list = makeList(nextOffsets.map { ($0.key, $0.value) })
            defer { rd_kafka_topic_partition_list_destroy(list) }
            return rd_kafka_commit(handle, list, 1)  // asynchronous: does not block under the lock
        }
        if error != RD_KAFKA_RESP_ERR_NO_ERROR, KafkaError.Code(error) != .noOffset {
            logger.debug("Kafka offset commit failed (best effort)", metadata: [LogKey.error: "\(KafkaError(error, context: "commit"))"])
        }
    }

    /// Moves assigned partitions to the given offsets (the next record read is at that offset).
    ///
    /// - Throws: `KafkaError` when a partition is not assigned or the seek fails.
    public func seek(_ offsets: [TopicPartition: Int64], timeoutMilliseconds: Int32 = 5_000) throws(KafkaError) {
        let handle = try openHandle()
        guard !offsets.isEmpty else { return }
        let list = makeList(offsets.map { ($0.key, $0.value) })
        defer { rd_kafka_topic_partition_list_destroy(list) }
        if let failure = rd_kafka_seek_partitions(handle, list, timeoutMilliseconds) {
            defer { rd_kafka_error_destroy(failure) }
            throw KafkaError(object: failure, context: "seek failed")
        }
        if let list, let elements = list.pointee.elems {
            for index in 0..<Int(list.pointee.cnt) where elements[index].err != RD_KAFKA_RESP_ERR_NO_ERROR {
                let topic = elements[index].topic.map { String(cString: $0) } ?? ""
                throw KafkaError(elements[index].err, context: "seek of \(topic)[\(elements[index].partition)] failed")
            }
        }
    }

    /// Commits `nextOffsets` to Kafka and waits for the broker's answer (tools and tests; ingest
    /// itself uses the asynchronous `commit`).
    ///
    /// - Throws: `KafkaError` when the commit fails.
    public func commitSynchronously(_ nextOffsets: [TopicPartition: Int64]) throws(KafkaError) {
        let handle = try openHandle()
        let list = makeList(nextOffsets.map { ($0.key, $0.value) })
        defer { rd_kafka_topic_partition_list_destroy(list) }
        let error = rd_kafka_commit(handle, list, 0)
        guard error == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(error, context: "commit") }
    }

    /// The partitions assigned now.
    public func assignment() -> [TopicPartition] {
        guard let handle = try? openHandle() else { return [] }
        var list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?
        guard rd_kafka_assignment(handle, &list) == RD_KAFKA_RESP_ERR_NO_ERROR, let list else { return [] }
        defer { rd_kafka_topic_partition_list_destroy(list) }
        return partitions(of: list).map(\.0)
    }

    /// The partition's high watermark (the offset after its last record) as the last fetch
    /// response told it, without asking the broker; nil before a fetch has told it.
    public func cachedHighWatermark(_ partition: TopicPartition) -> Int64? {
        guard let handle = try? openHandle() else { return nil }
        var low: Int64 = -1, high: Int64 = -1
        guard rd_kafka_get_watermark_offsets(handle, partition.topic, partition.partition, &low, &high) == RD_KAFKA_RESP_ERR_NO_ERROR,
            high >= 0
        else { return nil }
        return high
    }

    /// The group's rebalance protocol: `EAGER`, `COOPERATIVE`, or `NONE` before joining.
    public var rebalanceProtocol: String {
        guard let handle = try? openHandle(), let name = rd_kafka_rebalance_protocol(handle) else { return "NONE" }
        return String(cString: name)
    }

    /// Closes the consumer (revoking partitions through the handler; a dynamic member leaves the
    /// group so they move at once, a static one keeps them for its session) and destroys the
    /// client. Idempotent. Call it from the poll thread, or after it stopped.
    public func close() {
        // Taken under the lock: a `commit` running now finishes first, and later ones throw.
        let taken = state.withLock { state in
            defer { state.pointer = nil }
            return ConsumerHandle(pointer: state.pointer)
        }
        guard let handle = taken.pointer else { return }
        let error = rd_kafka_consumer_close(handle)
        if error != RD_KAFKA_RESP_ERR_NO_ERROR {
            logger.debug("consumer close reported an error", metadata: [LogKey.error: "\(KafkaError(error, context: "close"))"])
        }
        mainQueue.stop()
        rd_kafka_destroy(handle)
        _ = context  // kept alive until after rd_kafka_destroy
    }

    private static let closedError = KafkaError(code: .closed, message: "the consumer is closed")

    private struct ConsumerHandle: @unchecked Sendable {
        var pointer: OpaquePointer?
    }

    /// The client, for the poll thread's methods (the only thread that closes it).
    private func openHandle() throws(KafkaError) -> OpaquePointer {
        guard let handle = state.withLock({ ConsumerHandle(pointer: $0.pointer) }).pointer else { throw Self.closedError }
        return handle
    }

    /// librdkafka's rebalance callback: assign at the handler's offsets, or revoke.
    private static func rebalance(
        client: OpaquePointer, error: rd_kafka_resp_err_t,
        list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?, context: KafkaClientContext
    ) {
        let cooperative = rd_kafka_rebalance_protocol(client).map { String(cString: $0) } == "COOPERATIVE"
        let changed = partitions(of: list).map(\.0)
        switch error {
        case RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS:
            let offsets = context.rebalance?.assigned(changed) ?? [:]
            if let list, let elements = list.pointee.elems {
                for index in 0..<Int(list.pointee.cnt) {
                    let topicPartition = TopicPartition(
                        topic: elements[index].topic.map { String(cString: $0) } ?? "", partition: elements[index].partition)
                    if let offset = offsets[topicPartition] { elements[index].offset = offset }
                }
            }
            context.logger.info(
                "partitions assigned",
                metadata: ["kafka.partitions": "\(changed.map(\.description).joined(separator: ","))", "kafka.protocol": "\(cooperative ? "cooperative" : "eager")"])
            if cooperative {
                if let failure = rd_kafka_incremental_assign(client, list) {
                    context.logger.info("incremental assign failed", metadata: [LogKey.error: "\(errorText(failure))"])
                    rd_kafka_error_destroy(failure)
                }
            } else {
                let result = rd_kafka_assign(client, list)
                if result != RD_KAFKA_RESP_ERR_NO_ERROR {
                    context.logger.info("assign failed", metadata: [LogKey.error: "\(KafkaError(result, context: "assign"))"])
                }
            }
        case RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS:
            context.rebalance?.revoked(changed)
            let lost = rd_kafka_assignment_lost(client) == 1
            context.logger.info(
                lost ? "partitions lost" : "partitions revoked",
                metadata: ["kafka.partitions": "\(changed.map(\.description).joined(separator: ","))"])
            if cooperative {
                if let failure = rd_kafka_incremental_unassign(client, list) {
                    context.logger.info("incremental unassign failed", metadata: [LogKey.error: "\(errorText(failure))"])
                    rd_kafka_error_destroy(failure)
                }
            } else {
                _ = rd_kafka_assign(client, nil)
            }
        default:
            context.logger.info("rebalance error", metadata: [LogKey.error: "\(KafkaError(error, context: "rebalance"))"])
            context.rebalance?.revoked(changed)
            _ = rd_kafka_assign(client, nil)
        }
    }

    private static func errorText(_ error: OpaquePointer) -> String {
        rd_kafka_error_string(error).map { String(cString: $0) } ?? "unknown"
    }
}

/// Serves a client's main queue (`rd_kafka_poll`: statistics and error callbacks) on a thread
/// of its own until `stop()`, which must come before `rd_kafka_destroy`.
private final class MainQueueServer: @unchecked Sendable {
    private let handle: OpaquePointer
    private let stopping = Atomic<Bool>(false)
    private let stopped = DispatchSemaphore(value: 0)
    private var running = true

    init(handle: OpaquePointer) {
        self.handle = handle
        let thread = Thread { [self] in
            while !stopping.load(ordering: .acquiring) { rd_kafka_poll(self.handle, 100) }
            stopped.signal()
        }
        thread.name = "reddot.kafka.main-queue"
        thread.start()
    }

    /// Stops serving and waits until the thread has returned from its last poll. Idempotent;
    /// call it from one thread.
    func stop() {
        guard running else { return }
        running = false
        stopping.store(true, ordering: .releasing)
        stopped.wait()
    }
}
