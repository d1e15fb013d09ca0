internal import CRdKafka
import Foundation
import Logging
import Metrics
import Synchronization

/// What a consumer does when the group gives it partitions or takes them away. Called on the
/// thread that polls the consumer, inside `poll`; the handler may block (read offsets from a
/// database) but must not call the consumer.
public struct KafkaRebalanceHandler: Sendable {
    /// Given newly assigned partitions, returns the offset to start each at. A partition left
    /// out starts at the group's committed offset (or `auto.offset.reset`).
    public var assigned: @Sendable ([TopicPartition]) -> [TopicPartition: Int64]
    /// Partitions revoked (or lost): stop working on them; their work in flight will be fenced.
    public var revoked: @Sendable ([TopicPartition]) -> Void

    /// Creates a handler.
    public init(
        assigned: @escaping @Sendable ([TopicPartition]) -> [TopicPartition: Int64],
        revoked: @escaping @Sendable ([TopicPartition]) -> Void
    ) {
        self.assigned = assigned
        self.revoked = revoked
    }
}

/// The state librdkafka's C callbacks reach through the client's opaque pointer. The client
/// keeps it alive until after `rd_kafka_destroy`.
final class KafkaClientContext: @unchecked Sendable {
    let logger: Logger
    let rebalance: KafkaRebalanceHandler?
    let fatalError = Mutex<KafkaError?>(nil)
    let clientName: String

    init(logger: Logger, rebalance: KafkaRebalanceHandler?, clientName: String) {
        self.logger = logger
        self.rebalance = rebalance
        self.clientName = clientName
    }

    static func from(_ opaque: UnsafeMutableRawPointer?) -> KafkaClientContext? {
        guard let opaque else { return nil }
        return Unmanaged<KafkaClientContext>.fromOpaque(opaque).takeUnretainedValue()
    }

    /// Sets the callbacks and the opaque on a native configuration.
    func install(on conf: OpaquePointer) {
        rd_kafka_conf_set_opaque(conf, Unmanaged.passUnretained(self).toOpaque())
        rd_kafka_conf_set_log_cb(conf) { client, level, facility, message in
            guard let client, let context = KafkaClientContext.from(rd_kafka_opaque(client)) else { return }
            context.log(level: level, facility: facility.map { String(cString: $0) } ?? "", message: message.map { String(cString: $0) } ?? "")
        }
        rd_kafka_conf_set_error_cb(conf) { client, error, reason, opaque in
            guard let context = KafkaClientContext.from(opaque) else { return }
            let text = reason.map { String(cString: $0) } ?? ""
            let code = rd_kafka_resp_err_t(rawValue: error)
            if code == RD_KAFKA_RESP_ERR__FATAL, let client {
                var buffer = [CChar](repeating: 0, count: 512)
                let fatal = rd_kafka_fatal_error(client, &buffer, buffer.count)
                let detail = KafkaError(fatal, context: "fatal client error: \(cBufferText(buffer))")
                context.fatalError.withLock { $0 = detail }
                // Error, not info: the client is unusable for good, and the process cannot go on with it.
                context.logger.error("Kafka client failed for good", metadata: [LogKey.error: "\(detail)"])
            } else {
                context.logger.info("Kafka client error", metadata: [LogKey.error: "\(KafkaError(code, context: text))"])
            }
        }
        rd_kafka_conf_set_stats_cb(conf) { _, json, length, opaque in
            guard let context = KafkaClientContext.from(opaque), let json else { return 0 }
            context.recordStatistics(Data(bytes: json, count: length))
            return 0  // librdkafka frees the JSON
        }
    }

    func log(level: Int32, facility: String, message: String) {
        let swiftLevel: Logger.Level
        switch level {
        case ...2: swiftLevel = .critical
        case 3: swiftLevel = .error
        case 4: swiftLevel = .warning
        case 5: swiftLevel = .notice
        case 6: swiftLevel = .info
        default: swiftLevel = .debug
        }
        logger.log(level: swiftLevel, "\(message)", metadata: [LogKey.facility: "\(facility)", LogKey.client: "\(clientName)"])
    }

    /// Routes the parts of librdkafka's statistics that matter into swift-metrics: the consumer
    /// lag of every assigned partition, and the queue of messages waiting to be sent.
    func recordStatistics(_ json: Data) {
        guard let root = try? JSONSerialization.jsonObject(with: json) as? [String: Any] else { return }
        if let queued = root["msg_cnt"] as? Int {
            Gauge(label: "reddot_kafka_queued_messages", dimensions: [("client", clientName)]).record(queued)
        }
        guard let topics = root["topics"] as? [String: Any] else { return }
        for (topic, value) in topics {
            guard let partitions = (value as? [String: Any])?["partitions"] as? [String: Any] else { continue }
            for (partition, details) in partitions where partition != "-1" {
                guard let details = details as? [String: Any], let lag = details["consumer_lag"] as? Int, lag >= 0 else { continue }
                Gauge(
                    label: "reddot_kafka_consumer_lag_records",
                    dimensions: [("topic", topic), ("partition", partition)]
                ).record(lag)
            }
        }
    }
}

/// Metadata keys of RdKafka's log lines.
public enum LogKey {
    /// An error.
    public static let error = "kafka.error"
    /// librdkafka's log facility.
    public static let facility = "kafka.facility"
    /// Which client logged.
    public static let client = "kafka.client"
    /// A topic.
    public static let topic = "kafka.topic"
    /// A partition.
    public static let partition = "kafka.partition"
    /// An offset.
    public static let offset = "kafka.offset"
}

/// Copies a topic-partition list into Swift values (with offsets).
func partitions(of list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?) -> [(TopicPartition, Int64)] {
    guard let list, list.pointee.cnt > 0, let elements = list.pointee.elems else { return [] }
    return (0..<Int(list.pointee.cnt)).map { index in
        let element = elements[index]
        return (TopicPartition(topic: element.topic.map { String(cString: $0) } ?? "", partition: element.partition), element.offset)
    }
}

/// A new native list of partitions with offsets; the caller destroys it.
func makeList(_ entries: [(TopicPartition, Int64)]) -> UnsafeMutablePointer<rd_kafka_topic_partition_list_t>? {
    let list = rd_kafka_topic_partition_list_new(Int32(entries.count))
    for (topicPartition, offset) in entries {
        if let element = rd_kafka_topic_partition_list_add(list, topicPartition.topic, topicPartition.partition) {
            element.pointee.offset = offset
        }
    }
    return list
}
