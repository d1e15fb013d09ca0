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
    /// The consumer group.
    public var group: String = "reddot-ingest"
    /// This consumer's stable name in the group (`group.instance.id`, Kafka static membership,
    /// KIP-345), or nil for a dynamic member. A static member that restarts under the same name
    /// within `session.timeout.ms` gets its partitions back without a rebalance, and a member
    /// that died is replaced at once instead of being waited for; two live consumers of one
    /// group must never share a name (the broker fences the older one).
    public var instanceID: String?
    /// Where rejected records are published.
    public var deadLetterTopic: String = "reddot.events.dlq"
    /// The database.
    public var database: PGConfiguration
    /// Maps content events to badge operations.
    public var rules: RuleSet = .empty
    /// The most records in one batch (one transaction).
    public var batchSize: Int = 5_000
    /// How long a batch may wait to fill before it is written, in milliseconds.
    public var batchWaitMilliseconds: Int = 100
    /// How many writer threads (each with its own connection) commit batches in parallel; a
    /// batch's partitions are split between them.
    public var writers: Int = IngestConfiguration.defaultWriters
    /// The default of `writers` (and of `--writers`).
    public static let defaultWriters = 2
    /// What `--writers` is refused outside of, as the sentence that names the flag; nil in range.
    public static func writersProblem(_ writers: Int) -> String? {
        (1...16).contains(writers) ? nil : "--writers takes 1…16"
    }
    /// Where a partition with no stored offset starts: the beginning (default) or the end.
    public var startFromEnd: Bool = false
    /// Whether a batch's transaction also brings its users current, as a rollup round would,
    /// for every user whose rollup lock it takes without waiting (the rest wait for the
    /// rollup): their new versions commit, and notify, with the batch. Only when less than a
    /// batch of records waits after it in its partitions (ingest is caught up, and the time to
    /// visible counts); behind, a batch leaves its users to the rollup, whose rounds bring
    /// many batches of a user current at once. Default true; false leaves every user to
    /// `reddot rollup`.
    public var rollUp: Bool = true
    /// How long applied event ids are kept for deduplication.
    public var eventRetention: Duration = .seconds(7 * 24 * 3600)
    /// How long dead letters are kept once published to the dead-letter topic (nil: until
    /// deleted by hand). They hold whole events, user ids among them.
    public var deadLetterRetention: Duration? = .seconds(30 * 24 * 3600)
    /// How often rejected records not yet on the dead-letter topic are published.
    public var deadLetterInterval: Duration = .seconds(5)

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
