import ArgumentParser
import BadgeIngest
import RedDotCommandLine
import ServiceLifecycle

/// `reddot run`: ingest, rollup and serve in one process.
struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run ingest, rollup and the query service in one process (small deployments).",
        discussion: """
            Takes the options of ingest, rollup and serve. With a push provider's credentials \
            (--apns-key-file, --apns-key-id and --apns-team-id, or --fcm-service-account-file, or their \
            variables) it also runs reddot push; with --webhooks, reddot webhooks; both follow the change \
            feed this process publishes, with their commands' defaults. One service group: SIGTERM or SIGINT \
            stops the HTTP server's streams and requests, commits ingest's batch in hand and \
            leaves the consumer group, finishes the rollup transactions, and exits 0.
            """)

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var kafka: KafkaOptions
    @OptionGroup var ingest: IngestOptions
    @OptionGroup var rollup: RollupOptions
    @OptionGroup var serve: ServeOptions
    @OptionGroup var senders: InProcessSenderOptions

    func run() async throws {
        let logger = try database.logger(label: "reddot.run")
        let registry = MetricsSetup.bootstrap()
        // The senders' settings are checked first: a refusal comes before anything starts.
        let feed = rollup.feedBrokers(fallback: kafka.brokers).map { (brokers: $0, topic: rollup.feedTopic) }
        let senders = try await senders.services(database: database, feed: feed, logger: logger)
        let configuration = try ingest.configuration(kafka: kafka, database: database)
        try ingest.logStart(configuration, kafka: kafka, logger: logger)
        let (application, services) = try await serve.makeServices(
            database: database, registry: registry, logger: logger, kafka: (kafka.brokers, kafka.topic))
        try await runServices(
            [IngestService(configuration: configuration, logger: logger)] + (try rollup.services(database: database, brokers: kafka.brokers, logger: logger))
                + [application] + services + senders,
            logger: logger)
    }
}
