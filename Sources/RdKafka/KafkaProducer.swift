internal import CRdKafka
import Foundation
public import Logging
import Synchronization

/// A record to send.
public struct KafkaOutgoingRecord: Sendable, Hashable {
    /// The topic.
    public var topic: String
    /// A fixed partition, or nil to let the partitioner pick by key.
    public var partition: Int32?
    /// The key (the partitioner hashes it), or nil.
    public var key: [UInt8]?
    /// The value, or nil.
    public var payload: [UInt8]?
    /// Headers, in order.
    public var headers: [KafkaHeader]

    /// Creates a record.
    public init(topic: String, partition: Int32? = nil, key: [UInt8]?, payload: [UInt8]?, headers: [KafkaHeader] = []) {
        self.topic = topic
        self.partition = partition
        self.key = key
        self.payload = payload
        self.headers = headers
    }
}

/// Where a record was stored.
public struct KafkaDelivery: Sendable, Hashable {
    /// The partition.
    public var partition: Int32
    /// The offset.
    public var offset: Int64
}

/// A librdkafka producer with delivery reports.
///
/// A background thread serves delivery reports (`rd_kafka_poll`); each record's callback is
/// called exactly once, with where it was stored or why it failed. `close()` waits for records
/// in flight (up to a timeout) and destroys the client. Safe to use from any thread.
public final class KafkaProducer: Sendable {
    private let handle: Mutex<ProducerHandle>
    private let context: KafkaClientContext
    private let poller = Poller()
    private let logger: Logger

    /// The delivery-report thread's stop flag and its "stopped" signal.
    private final class Poller: Sendable {
        let running = Atomic<Bool>(true)
        let done = DispatchSemaphore(value: 0)
    }

    /// The client and who uses it. `flush` borrows the pointer and calls the blocking
    /// `rd_kafka_flush` outside the lock; `close` destroys the client only once no borrower is left.
    private struct ProducerHandle: @unchecked Sendable {
        var pointer: OpaquePointer?
        /// Set by `close`: no new record or flush starts.
        var closing = false
        /// Flushes running outside the lock.
        var borrowers = 0
    }

    /// A delivery callback, passed through librdkafka as the message's opaque pointer.
    private final class Delivery: @unchecked Sendable {
        let done: @Sendable (Result<KafkaDelivery, KafkaError>) -> Void
        init(_ done: @escaping @Sendable (Result<KafkaDelivery, KafkaError>) -> Void) { self.done = done }
    }

    /// Creates a producer (idempotent by default: `enable.idempotence=true`, so retries never
    /// duplicate or reorder).
    ///
    /// - Throws: `KafkaError` for a refused property or an unsupported librdkafka.
    public init(configuration: KafkaConfiguration, logger: Logger) throws(KafkaError) {
        try RdKafkaVersion.requireSupported()
        var configuration = configuration
        if configuration["enable.idempotence"] == nil { configuration.set("enable.idempotence", "true") }
        let conf = try configuration.makeNative()
        let context = KafkaClientContext(logger: logger, rebalance: nil, clientName: "producer")
        context.install(on: conf)
        rd_kafka_conf_set_dr_msg_cb(conf) { _, message, _ in
            guard let message, let opaque = message.pointee._private else { return }
            let delivery = Unmanaged<Delivery>.fromOpaque(opaque).takeRetainedValue()
            let item = message.pointee
            if item.err == RD_KAFKA_RESP_ERR_NO_ERROR {
                delivery.done(.success(KafkaDelivery(partition: item.partition, offset: item.offset)))
            } else {
                delivery.done(.failure(KafkaError(item.err, context: "delivery failed")))
            }
        }
        var buffer = [CChar](repeating: 0, count: 512)
        guard let pointer = rd_kafka_new(RD_KAFKA_PRODUCER, conf, &buffer, buffer.count) else {
            rd_kafka_conf_destroy(conf)
            throw KafkaError(code: .creation, message: "cannot create the Kafka producer: \(cBufferText(buffer))")
        }
        self.handle = Mutex(ProducerHandle(pointer: pointer))
        self.context = context
        self.logger = logger
        let polled = ProducerHandle(pointer: pointer)  // destroyed only after this thread stops
        let thread = Thread { [poller] in
            while poller.running.load(ordering: .acquiring) {
                rd_kafka_poll(polled.pointer, 100)
            }
            poller.done.signal()
        }
        thread.name = "reddot.kafka.producer"
        thread.start()
    }

    deinit { close() }

    /// Queues a record; `onDelivery` is called once, later, on the producer's thread.
    ///
    /// Waits (briefly, repeatedly) while librdkafka's local queue is full.
    /// - Throws: `KafkaError` when the record cannot be queued (unknown partition, too large,
    ///   closed); `onDelivery` is then not called.
    public func produce(
        _ record: KafkaOutgoingRecord, onDelivery: @escaping @Sendable (Result<KafkaDelivery, KafkaError>) -> Void
    ) throws(KafkaError) {
        while true {
            let error: rd_kafka_resp_err_t = try handle.withLock { (state) throws(KafkaError) -> rd_kafka_resp_err_t in
                guard let pointer = state.pointer, !state.closing else {
                    throw KafkaError(code: .closed, message: "the producer is closed")
                }
                return Self.enqueue(record, on: pointer, delivery: Delivery(onDelivery))
            }
            if error == RD_KAFKA_RESP_ERR_NO_ERROR { return }
            if error == RD_KAFKA_RESP_ERR__QUEUE_FULL {
                usleep(2_000)  // the poller thread drains delivery reports meanwhile
                continue
            }
            throw KafkaError(error, context: "cannot queue a record for \(record.topic)")
        }
    }

    private static func enqueue(_ record: KafkaOutgoingRecord, on pointer: OpaquePointer, delivery: Delivery) -> rd_kafka_resp_err_t {
        var headers: OpaquePointer?
        if !record.headers.isEmpty {
            headers = rd_kafka_headers_new(record.headers.count)
            for header in record.headers {
                if let value = header.value {
                    value.withUnsafeBytes { bytes in
                        _ = rd_kafka_header_add(headers, header.name, -1, bytes.baseAddress, bytes.count)
                    }
                } else {
                    _ = rd_kafka_header_add(headers, header.name, -1, nil, 0)
                }
            }
        }
        let opaque = Unmanaged.passRetained(delivery).toOpaque()
        let key = record.key ?? []
        let payload = record.payload ?? []
        let error = key.withUnsafeBytes { keyBytes in
            payload.withUnsafeBytes { payloadBytes in
                reddot_produce(
                    pointer, record.topic, record.partition ?? RD_KAFKA_PARTITION_UA,
                    record.key == nil ? nil : keyBytes.baseAddress, record.key == nil ? 0 : keyBytes.count,
                    record.payload == nil ? nil : payloadBytes.baseAddress, record.payload == nil ? 0 : payloadBytes.count,
                    headers, opaque)
            }
        }
        if error != RD_KAFKA_RESP_ERR_NO_ERROR {
            Unmanaged<Delivery>.fromOpaque(opaque).release()
            if let headers { rd_kafka_headers_destroy(headers) }
        }
        return error
    }

    /// Sends a record and waits for its delivery report.
    public func send(_ record: KafkaOutgoingRecord) async throws -> KafkaDelivery {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<KafkaDelivery, any Error>) in
            do {
                try produce(record) { result in continuation.resume(with: result) }
            } catch {
                continuation.resume(throwing: error)
            }
        }
    }

    /// Blocks until every queued record is delivered or failed, or the timeout passes. Call it
    /// on a thread of your own; other threads may produce meanwhile.
    ///
    /// - Throws: `KafkaError` (`_TIMED_OUT`) when records were still in flight.
    public func flush(timeoutMilliseconds: Int32) throws(KafkaError) {
        let borrowed = handle.withLock { state in
            guard state.pointer != nil, !state.closing else { return ProducerHandle(pointer: nil) }
            state.borrowers += 1
            return ProducerHandle(pointer: state.pointer)
        }
        guard let borrowed = borrowed.pointer else { return }
        let error = rd_kafka_flush(borrowed, timeoutMilliseconds)
        handle.withLock { $0.borrowers -= 1 }
        if error != RD_KAFKA_RESP_ERR_NO_ERROR { throw KafkaError(error, context: "flush") }
    }

    /// ``close(timeoutMilliseconds:)`` on a thread of its own, awaited: its flush and destroy
    /// block for up to the timeout, which must not hold a thread of Swift's cooperative pool.
    public func closeOffPool(timeoutMilliseconds: Int32 = 10_000) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let thread = Thread {
                self.close(timeoutMilliseconds: timeoutMilliseconds)
                continuation.resume()
            }
            thread.name = "reddot.kafka.close"
            thread.start()
        }
    }

    /// Runs `body`, then closes this producer off the cooperative pool (``closeOffPool(timeoutMilliseconds:)``),
    /// however `body` ends.
    public func closing<T: Sendable>(after body: () async throws -> T) async throws -> T {
        let result: T
        do {
            result = try await body()
        } catch {
            await closeOffPool()
            throw error
        }
        await closeOffPool()
        return result
    }

    /// Waits up to `timeoutMilliseconds` for records in flight, then destroys the client
    /// (records still queued then fail). Idempotent.
    public func close(timeoutMilliseconds: Int32 = 10_000) {
        guard poller.running.exchange(false, ordering: .acquiringAndReleasing) else { return }
        poller.done.wait()
        let taken = handle.withLock { state in
            state.closing = true
            return ProducerHandle(pointer: state.pointer)
        }
        guard let pointer = taken.pointer else { return }
        if rd_kafka_flush(pointer, timeoutMilliseconds) != RD_KAFKA_RESP_ERR_NO_ERROR {
            logger.info("closing the producer with records still in flight", metadata: ["kafka.in_flight": "\(rd_kafka_outq_len(pointer))"])
        }
        // A flush that borrowed the client returns within its own timeout.
        while handle.withLock({ $0.borrowers }) > 0 { usleep(1_000) }
        handle.withLock { $0.pointer = nil }
        rd_kafka_destroy(pointer)
        _ = context
    }
}
