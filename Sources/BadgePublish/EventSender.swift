import Foundation
public import RdKafka
import Synchronization

/// Sends checked events on one producer and collects their delivery reports.
///
/// `sendAll` queues the events as its sequence yields them (stdin streams) with
/// `KafkaProducer.sendAll`, which tallies each outcome exactly once, waits for every report (a
/// little longer than the delivery timeout), then closes the producer.
public final class EventSender: Sendable {
    /// Where one event was stored.
    public struct Report: Sendable {
        /// Its position in the input.
        public var index: Int
        /// `line 3: ` or nothing.
        public var label: String
        /// The event id.
        public var id: String
        /// Where the broker stored it.
        public var delivery: KafkaDelivery
    }

    /// Why one event was not stored.
    public struct Failure: Sendable {
        /// Its position in the input.
        public var index: Int
        /// `line 3: ` or nothing.
        public var label: String
        /// The event id.
        public var id: String
        /// The delivery error.
        public var error: KafkaError
    }

    /// Every delivery report, in input order (failures: the first few kept).
    public struct Outcome: Sendable {
        /// The deliveries kept (all with `keepReports`, else none), in input order.
        public var delivered: [Report]
        /// Events delivered.
        public var deliveredCount: Int
        /// The first failures, in input order.
        public var failures: [Failure]
        /// Events not delivered.
        public var failedCount: Int
    }

    private struct State: Sendable {
        /// The label and id of each event sent and still without a report, by index.
        var inFlight: [Int: (label: String, id: String)] = [:]
        var delivered: [Report] = []
        var deliveredCount = 0
        var failures: [Failure] = []
        var failedCount = 0
    }

    /// Failures kept for the report; the rest are only counted.
    public static let keptFailures = 10

    /// The producer (closed by `sendAll` and `close`).
    public let producer: KafkaProducer
    /// The topic.
    public let topic: String
    /// The bootstrap brokers, for messages.
    public let brokers: String
    /// librdkafka's delivery timeout as configured; nil or 0 when it retries forever.
    public let timeoutMilliseconds: Int?
    /// Whether every delivery is kept (for `--verbose`), or only counted.
    public let keepReports: Bool
    private let state = Mutex(State())

    /// A sender on `producer`; `configuration` is the producer's (for its delivery timeout).
    public init(producer: KafkaProducer, topic: String, brokers: String, configuration: KafkaConfiguration, keepReports: Bool) {
        self.producer = producer
        self.topic = topic
        self.brokers = brokers
        self.keepReports = keepReports
        let timeout = configuration.properties.last { $0.key == "message.timeout.ms" || $0.key == "delivery.timeout.ms" }
        self.timeoutMilliseconds = timeout.flatMap { Int($0.value) }
    }

    /// `10000 ms`, or a note that there is none.
    public var timeoutDescription: String {
        guard let timeoutMilliseconds, timeoutMilliseconds > 0 else { return "no timeout" }
        return "\(timeoutMilliseconds) ms"
    }

    /// Sends every event, keyed by ``PublishItem/key``, waits for every delivery report, closes
    /// the producer and returns the tally. Events still without a report well after the
    /// delivery timeout count as failed.
    public func sendAll(_ items: some Sequence<PublishItem>) -> Outcome {
        var index = 0
        let records = items.lazy.map { item in
            self.state.withLock { $0.inFlight[index] = (item.label, item.event.id.rawValue) }
            index += 1
            return KafkaOutgoingRecord(topic: self.topic, key: Array(item.key.utf8), payload: item.payload)
        }
        // librdkafka takes at most Int32.max ms; clamped so that the sum cannot overflow.
        let timeout = timeoutMilliseconds.flatMap { $0 > 0 ? Duration.milliseconds(min($0, Int(Int32.max)) + 30_000) : nil }
        producer.sendAll(records, timeout: timeout) { index, result in
            guard let (label, id) = self.state.withLock({ $0.inFlight.removeValue(forKey: index) }) else { return }
            switch result {
            case .success(let delivery): self.delivered(Report(index: index, label: label, id: id, delivery: delivery))
            case .failure(let error): self.failed(Failure(index: index, label: label, id: id, error: error))
            }
        }
        producer.close(timeoutMilliseconds: 5_000)
        return state.withLock { state in
            Outcome(
                delivered: state.delivered.sorted { $0.index < $1.index },
                deliveredCount: state.deliveredCount,
                failures: state.failures.sorted { $0.index < $1.index },
                failedCount: state.failedCount)
        }
    }

    private func delivered(_ report: Report) {
        state.withLock { state in
            state.deliveredCount += 1
            if keepReports { state.delivered.append(report) }
        }
    }

    private func failed(_ failure: Failure) {
        state.withLock { state in
            state.failedCount += 1
            if state.failures.count < Self.keptFailures { state.failures.append(failure) }
        }
    }

    /// Closes the producer without sending anything more.
    public func close() {
        producer.close(timeoutMilliseconds: 1_000)
    }

    /// Whether an error means the brokers could not be reached (rather than a refusal).
    public static func isUnreachable(_ error: KafkaError) -> Bool {
        [.messageTimedOut, .timedOut, .transport, .allBrokersDown, .resolve].contains(error.code)
    }
}
