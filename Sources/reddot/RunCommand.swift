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
            Takes the options of ingest, rollup and serve. One service group: SIGTERM or SIGINT \
            stops the HTTP server's streams and requests, commits ingest's batch in hand and \
            leaves the consumer group, finishes the rollup transactions, and exits 0.
            """)

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var kafka: KafkaOptions
    @OptionGroup var ingest: IngestOptions
    @OptionGroup var rollup: RollupOptions
    @OptionGroup var serve: ServeOptions

    func run() async throws {
        let logger = try database.logger(label: "reddot.run")
        let registry = MetricsSetup.bootstrap()
        let configuration = try ingest.configuration(kafka: kafka, database: database)
        try ingest.logStart(configuration, kafka: kafka, logger: logger)
        let (application, services) = try await serve.makeServices(
            database: database, registry: registry, logger: logger, kafka: (kafka.brokers, kafka.topic))
        try await runServices(
            [IngestService(configuration: configuration, logger: logger)] + (try rollup.services(database: database, brokers: kafka.brokers, logger: logger))
                + [application] + services,
            logger: logger)
    }
}
