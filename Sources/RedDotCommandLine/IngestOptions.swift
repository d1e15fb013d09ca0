public import ArgumentParser
public import BadgeIngest
public import Logging
import RdKafka
import ServiceLifecycle

/// The ingest settings, shared by `ingest` and `run`: `IngestSettings` (where each is declared)
/// and how they, the Kafka and the database options become an `IngestConfiguration`.
public struct IngestOptions: ParsableArguments {
    /// Options with their defaults (argument-parser fills them in).
    public init() {}

    /// Every ingest flag.
    @OptionGroup public var settings: IngestSettings

    public func validate() throws {
        if let problem = settings.environmentProblem(environment: KafkaOptions.environment) { throw ValidationError(problem) }
    }

    /// The ingest configuration from these options, the Kafka and the database options, with the
    /// variables' and the host's defaults filled in (`IngestSettings.resolved`).
    ///
    /// - Throws: `ExitCode` 64 (with a sentence) for a dead-letter topic Kafka would refuse, 65
    ///   for an unreadable or invalid rules file.
    public func configuration(kafka: KafkaOptions, database: DatabaseOptions) throws -> IngestConfiguration {
        var configuration = IngestConfiguration(kafka: try kafka.configuration(), database: database.configuration())
        configuration.topic = kafka.topic
        configuration.settings = settings.resolved(topic: kafka.topic, environment: KafkaOptions.environment)
        if let problem = configuration.settings.deadLetterTopicProblem { throw fail(problem, code: ExitCodes.usage) }
        configuration.rules = try loadRules(configuration.settings.rules)
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
