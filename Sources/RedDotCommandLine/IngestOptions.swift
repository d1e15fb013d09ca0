public import ArgumentParser
public import BadgeIngest
public import Logging
import RdKafka
import ServiceLifecycle

/// The ingest settings, shared by `ingest` and `run`.
public struct IngestOptions: ParsableArguments {
    /// Options with their defaults (argument-parser fills them in).
    public init() {}

    @Option(help: ArgumentHelp("The consumer group. Default: REDDOT_KAFKA_GROUP, else reddot-ingest.", valueName: "id"))
    public var group: String?
    @Option(
        name: .customLong("instance-id"),
        help: ArgumentHelp(
            "This consumer's stable name in the group (Kafka static membership, group.instance.id): an ingest that "
                + "restarts under the same name gets its partitions back at once, without waiting for the dead "
                + "one's session to time out. Each live ingest of a group needs its own (two with one name fence "
                + "each other), so with the default run one ingest per host. Default: REDDOT_INSTANCE_ID, "
                + "else the host name (in Kubernetes, the pod name); 'none' makes a dynamic member.",
            valueName: "name"))
    public var instanceID: String?
    @Option(name: .customLong("dlq-topic"), help: ArgumentHelp("The dead-letter topic. Default: REDDOT_KAFKA_DLQ_TOPIC, else <topic>.dlq.", valueName: "name"))
    public var deadLetterTopic: String?
    @Option(help: ArgumentHelp("The rules file mapping content event types to badge operations (YAML). Default: REDDOT_RULES_FILE; without one, only direct operations (op) are accepted.", valueName: "file"))
    public var rules: String?
    @Option(name: .customLong("batch-size"), help: "The most records written in one transaction.")
    public var batchSize: Int = 5_000
    @Option(name: .customLong("batch-wait-ms"), help: "How long a batch may wait to fill, in milliseconds.")
    public var batchWaitMilliseconds: Int = 100
    @Option(help: "Writer threads (each with its own database connection) that commit a batch's partitions in parallel.")
    public var writers: Int = IngestConfiguration.defaultWriters
    @Option(name: .customLong("start-from"), help: "Where a partition with no stored offset starts: earliest or latest.")
    public var startFrom: String = "earliest"
    @Option(name: .customLong("event-retention-days"), help: "How long event ids are kept to skip duplicates (item tombstones, clear marks and erased users' marks too; increments stored longer fold into their counts).")
    public var eventRetentionDays: Double = 7
    @Option(
        name: .customLong("dead-letter-retention-days"),
        help: "How long dead letters (rejected records, whole events) are kept once published to the dead-letter topic; 0 keeps them until deleted by hand.")
    public var deadLetterRetentionDays: Double = 30
    @Flag(
        name: .customLong("rollup-in-ingest"), inversion: .prefixedNo,
        help: ArgumentHelp(
            "Bring a batch's users current in the batch's own transaction, as a rollup round would, when less than "
                + "--batch-size records wait after it (ingest has caught up): their new versions show when it commits. "
                + "Behind that, a batch's users, and a user a rollup round or an action holds at that moment, are "
                + "left to the rollup, which must still run (it also takes expiries). "
                + "--no-rollup-in-ingest leaves every user to the rollup."))
    public var rollUpInIngest = true

    /// The flags as the library's settings.
    public var settings: IngestSettings {
        var settings = IngestSettings()
        (settings.group, settings.instanceID, settings.deadLetterTopic) = (group, instanceID, deadLetterTopic)
        (settings.batchSize, settings.batchWaitMilliseconds, settings.writers) = (batchSize, batchWaitMilliseconds, writers)
        (settings.startFrom, settings.eventRetentionDays, settings.deadLetterRetentionDays) = (startFrom, eventRetentionDays, deadLetterRetentionDays)
        settings.rollUp = rollUpInIngest
        return settings
    }

    public func validate() throws {
        if let problem = settings.flagProblem(environment: KafkaOptions.environment) { throw ValidationError(problem) }
    }

    /// The ingest configuration from these options, the Kafka and the database options.
    ///
    /// - Throws: `ExitCode` 65 (with a sentence) for an unreadable or invalid rules file.
    public func configuration(kafka: KafkaOptions, database: DatabaseOptions) throws -> IngestConfiguration {
        let ruleSet = try loadRules(rules)
        var configuration = IngestConfiguration(kafka: try kafka.configuration(), database: database.configuration())
        configuration.topic = kafka.topic
        configuration.rules = ruleSet
        settings.apply(to: &configuration, environment: KafkaOptions.environment)
        return configuration
    }

    /// Logs the settings and refuses a librdkafka older than 2.0 (exit 1).
    public func logStart(_ configuration: IngestConfiguration, kafka: KafkaOptions, logger: Logger) throws {
        configuration.logStart(brokers: kafka.brokers, logger: logger)
        do {
            try RdKafkaVersion.requireSupported()
        } catch {
            throw fail("\(error)", code: ExitCodes.failure)
        }
    }
}
