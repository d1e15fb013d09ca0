import ArgumentParser
import BadgeIngest
import Logging
import RdKafka
import RedDotCommandLine
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
            reddot.original.topic, reddot.original.partition and reddot.original.offset. At \
            start it stores the rules file's aggregation modes (its modes list, if it has one) \
            for the rollup.

            Run as many instances as the topic has partitions. Each is a static member of the \
            group (--instance-id, default the host name): after a crash, the restarted ingest \
            takes its partitions back at once; a member that does not come back is dropped after \
            session.timeout.ms (6 s unless -X sets it) and its partitions move to the others. \
            SIGTERM or SIGINT: the batch in hand is committed, the consumer closes, and the \
            process exits 0 (a static member keeps its partitions for session.timeout.ms, so a \
            quick restart resumes without a rebalance; --instance-id none makes a dynamic member \
            that leaves the group at once). Database outages are waited out (retries with backoff).

            \(IngestSettings.kafkaDefaultsText)

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
