import ArgumentParser
import BadgeIngest
import Logging
import RdKafka
import ServiceLifecycle

/// `reddot ingest`: consume badge events from Kafka into PostgreSQL, exactly once.
struct IngestCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ingest",
        abstract: "Consume badge events from Kafka into PostgreSQL, exactly once.",
        discussion: """
            Joins the consumer group and, per batch of records, decodes and validates them, maps \
            content events with the rules file, and writes one PostgreSQL transaction: skips \
            event ids already applied, applies the badge operations, marks the users dirty for \
            the rollup, stores rejected records with their reason, and advances the stored \
            offsets with a compare-and-set (the offsets in PostgreSQL are the authoritative ones; \
            they are also committed to Kafka afterwards for lag tools). Rejected records are \
            published to the dead-letter topic with headers reddot.reason, reddot.message, \
            reddot.original.topic, reddot.original.partition and reddot.original.offset.

            Run as many instances as the topic has partitions. Each is a static member of the \
            group (--instance-id, default the host name): after a crash, the restarted ingest \
            takes its partitions back at once; a member that does not come back is dropped after \
            session.timeout.ms (6 s unless -X sets it) and its partitions move to the others. \
            SIGTERM or SIGINT: the batch in hand is committed, the consumer closes, and the \
            process exits 0 (a static member keeps its partitions for session.timeout.ms, so a \
            quick restart resumes without a rebalance; --instance-id none makes a dynamic member \
            that leaves the group at once). Database outages are waited out (retries with backoff).

            Exit codes: 0 stopped by a signal; 64 bad arguments or a refused Kafka property; \
            65 an invalid rules file; 1 a fatal Kafka or database error.
            """)

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var kafka: KafkaOptions
    @OptionGroup var ingest: IngestOptions
    @OptionGroup var operations: OperationsOptions

    func run() async throws {
        let logger = try database.logger(label: "reddot.ingest")
        let registry = MetricsSetup.bootstrap()
        let configuration = try ingest.configuration(kafka: kafka, database: database)
        try ingest.logStart(configuration, kafka: kafka, logger: logger)
        let service = IngestService(configuration: configuration, logger: logger)
        var services: [any Service] = [service]
        if let server = try operations.server(registry: registry, logger: logger) { services.append(server) }
        try await runServices(services, logger: logger)
    }
}

/// The ingest settings, shared by `ingest` and `run`.
struct IngestOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The consumer group. Default: REDDOT_KAFKA_GROUP, else reddot-ingest.", valueName: "id"))
    var group: String?
    @Option(
        name: .customLong("instance-id"),
        help: ArgumentHelp(
            "This consumer's stable name in the group (Kafka static membership, group.instance.id): an ingest that "
                + "restarts under the same name gets its partitions back at once, without waiting for the dead "
                + "one's session to time out. Each live ingest of a group needs its own (two with one name fence "
                + "each other), so with the default run one ingest per host. Default: REDDOT_INSTANCE_ID, "
                + "else the host name (in Kubernetes, the pod name); 'none' makes a dynamic member.",
            valueName: "name"))
    var instanceID: String?
    @Option(name: .customLong("dlq-topic"), help: ArgumentHelp("The dead-letter topic. Default: REDDOT_KAFKA_DLQ_TOPIC, else <topic>.dlq.", valueName: "name"))
    var deadLetterTopic: String?
    @Option(help: ArgumentHelp("The rules file mapping content event types to badge operations (YAML). Default: REDDOT_RULES_FILE; without one, only direct operations (op) are accepted.", valueName: "file"))
    var rules: String?
    @Option(name: .customLong("batch-size"), help: "The most records written in one transaction.")
    var batchSize: Int = 5_000
    @Option(name: .customLong("batch-wait-ms"), help: "How long a batch may wait to fill, in milliseconds.")
    var batchWaitMilliseconds: Int = 100
    @Option(help: "Writer threads (each with its own database connection) that commit a batch's partitions in parallel.")
    var writers: Int = 2
    @Option(name: .customLong("start-from"), help: "Where a partition with no stored offset starts: earliest or latest.")
    var startFrom: String = "earliest"
    @Option(name: .customLong("event-retention-days"), help: "How long event ids are kept to skip duplicates.")
    var eventRetentionDays: Double = 7

    /// The flags as the library's settings.
    var settings: IngestSettings {
        var settings = IngestSettings()
        (settings.group, settings.instanceID, settings.deadLetterTopic) = (group, instanceID, deadLetterTopic)
        (settings.batchSize, settings.batchWaitMilliseconds, settings.writers) = (batchSize, batchWaitMilliseconds, writers)
        (settings.startFrom, settings.eventRetentionDays) = (startFrom, eventRetentionDays)
        return settings
    }

    func validate() throws {
        if let problem = settings.flagProblem(environment: KafkaOptions.environment) { throw ValidationError(problem) }
    }

    /// The ingest configuration from these options, the Kafka and the database options.
    ///
    /// - Throws: `ExitCode` 65 (with a sentence) for an unreadable or invalid rules file.
    func configuration(kafka: KafkaOptions, database: DatabaseOptions) throws -> IngestConfiguration {
        let ruleSet = try loadRules(rules)
        var configuration = IngestConfiguration(kafka: try kafka.configuration(), database: database.configuration())
        configuration.topic = kafka.topic
        configuration.rules = ruleSet
        settings.apply(to: &configuration, environment: KafkaOptions.environment)
        return configuration
    }

    /// Logs the settings and refuses a librdkafka older than 2.0 (exit 1).
    func logStart(_ configuration: IngestConfiguration, kafka: KafkaOptions, logger: Logger) throws {
        configuration.logStart(brokers: kafka.brokers, logger: logger)
        do {
            try RdKafkaVersion.requireSupported()
        } catch {
            throw fail("\(error)", code: ExitCodes.failure)
        }
    }
}
