public import Logging
public import RdKafka

/// The Kafka of a bench run: real brokers, or an in-process librdkafka mock cluster with a fresh
/// topic (and its dead-letter topic `<topic>.dlq`). Close it when the run ends.
public struct BenchKafka: Sendable {
    /// The mock cluster, nil on real brokers.
    public let cluster: KafkaMockCluster?
    /// The client properties, with the mock cluster's bootstrap servers when there is one.
    public let configuration: KafkaConfiguration
    /// The events' topic.
    public let topic: String
    /// The brokers' list, nil for the mock cluster.
    public let brokers: String?

    /// Real `brokers` with `configuration`, or with `brokers` nil a mock cluster with `topic` of
    /// `partitions` partitions.
    ///
    /// - Throws: `KafkaError` when the cluster or a topic cannot be created.
    public init(brokers: String?, configuration: KafkaConfiguration, topic: String, partitions: Int32, logger: Logger) throws {
        var configuration = configuration
        let cluster = brokers == nil ? try KafkaMockCluster(logger: logger) : nil
        do {
            if let cluster {
                try cluster.createTopic(topic, partitions: partitions)
                try cluster.createTopic(topic + ".dlq", partitions: 1)
                try cluster.createTopic(topic + ".changes", partitions: partitions)
                configuration.set("bootstrap.servers", cluster.bootstrapServers)
            }
        } catch {
            cluster?.close()
            throw error
        }
        (self.cluster, self.configuration, self.topic, self.brokers) = (cluster, configuration, topic, brokers)
    }

    /// Closes the mock cluster, if there is one.
    public func close() { cluster?.close() }

    /// What the reports call this Kafka.
    public var reportName: String { Self.reportName(brokers: brokers) }

    /// What the reports call the Kafka of `brokers` (nil: the mock cluster).
    static func reportName(brokers: String?) -> String { brokers.map { "brokers \($0)" } ?? "mock cluster (in-process)" }
}
