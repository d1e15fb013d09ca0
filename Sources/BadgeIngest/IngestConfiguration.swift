public import BadgeCore
public import LibPQ
public import Logging
public import RdKafka

/// Everything `reddot ingest` needs to know.
public struct IngestConfiguration: Sendable {
    /// Brokers and any librdkafka properties (`-X`); `group.id` is set from `group`.
    public var kafka: KafkaConfiguration
    /// The events topic.
    public var topic: String = "reddot.events"
    /// The database.
    public var database: PGConfiguration
    /// Maps content events to badge operations.
    public var rules: RuleSet = .empty
    /// Every flag's value (`reddot ingest`'s options, declared in `IngestSettings`): the group,
    /// the member name, the dead-letter topic, batching, writers, retention and rollup in ingest.
    /// The derived values (``group``, ``instanceID``, ``deadLetterTopic``, ``eventRetention``, …)
    /// are read from it.
    public var settings: IngestSettings = .defaults

    /// Called on the writer thread after each batch commits, with the next offset of every
    /// partition in it (everything below is committed): for benchmarks and tests. Keep it short.
    public var onCommit: (@Sendable ([TopicPartition: Int64]) -> Void)?

    /// Creates a configuration.
    public init(kafka: KafkaConfiguration, database: PGConfiguration) {
        self.kafka = kafka
        self.database = database
    }
}

extension IngestConfiguration {
    /// Logs, at info, what an ingest starts with: `brokers` (the bootstrap list), the topics,
    /// the group and member name, librdkafka's version and how many event types the rules map.
    /// No property value is logged (they may hold passwords).
    public func logStart(brokers: String, logger: Logger) {
        logger.info(
            "starting ingest",
            metadata: [
                "kafka.brokers": "\(brokers)", "kafka.topic": "\(topic)", "kafka.group": "\(group)",
                "kafka.dlq_topic": "\(deadLetterTopic)", "librdkafka.version": "\(RdKafkaVersion.text)",
                "kafka.group_instance_id": "\(instanceID ?? "none")", "rules.types": "\(rules.types.count)",
            ])
    }
}
