internal import CRdKafka
public import Logging

/// librdkafka's in-process mock Kafka cluster: real brokers speaking the Kafka protocol on
/// loopback ports, memory only, keeping only recent messages. For development and tests; never
/// production.
public final class KafkaMockCluster: @unchecked Sendable {
    private var host: OpaquePointer?
    private var cluster: OpaquePointer?
    private let context: KafkaClientContext
    /// The brokers' addresses, for `bootstrap.servers`.
    public let bootstrapServers: String

    /// Starts a cluster of `brokers` brokers.
    ///
    /// - Throws: `KafkaError` when librdkafka cannot start it.
    public init(brokers: Int32 = 1, logger: Logger) throws(KafkaError) {
        try RdKafkaVersion.requireSupported()
        let conf = try KafkaConfiguration([("log_level", "3")]).makeNative()
        let context = KafkaClientContext(logger: logger, rebalance: nil, clientName: "mock-cluster")
        context.install(on: conf)
        var buffer = [CChar](repeating: 0, count: 512)
        guard let host = rd_kafka_new(RD_KAFKA_PRODUCER, conf, &buffer, buffer.count) else {
            rd_kafka_conf_destroy(conf)
            throw KafkaError(code: .mockCluster, message: "cannot create the mock cluster's host client: \(cBufferText(buffer))")
        }
        guard let cluster = rd_kafka_mock_cluster_new(host, Int32(brokers)) else {
            rd_kafka_destroy(host)
            throw KafkaError(code: .mockCluster, message: "librdkafka could not start a mock cluster")
        }
        self.host = host
        self.cluster = cluster
        self.context = context
        self.bootstrapServers = rd_kafka_mock_cluster_bootstraps(cluster).map { String(cString: $0) } ?? ""
    }

    deinit { close() }

    /// Creates a topic.
    public func createTopic(_ name: String, partitions: Int32, replicationFactor: Int32 = 1) throws(KafkaError) {
        guard let cluster else { throw KafkaError(code: .mockCluster, message: "the mock cluster is stopped") }
        let error = rd_kafka_mock_topic_create(cluster, name, partitions, replicationFactor)
        guard error == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(error, context: "cannot create topic \(name)") }
    }

    /// Stops the brokers. Idempotent.
    public func close() {
        if let cluster { rd_kafka_mock_cluster_destroy(cluster) }
        cluster = nil
        if let host { rd_kafka_destroy(host) }
        host = nil
        _ = context
    }
}
