public import ArgumentParser
public import BadgeRollup
import BadgeStore
import Foundation
import LibPQ
public import Logging
import RdKafka
public import ServiceLifecycle

/// The rollup settings, shared by `rollup` and `run`: `RollupSettings` (where each is declared)
/// and how they become the rollup workers and the change feed.
public struct RollupOptions: ParsableArguments {
    /// Options with their defaults (argument-parser fills them in).
    public init() {}

    /// Every rollup and change-feed flag.
    @OptionGroup public var settings: RollupSettings

    /// The change feed's topic: the flag, then `REDDOT_CHANGES_TOPIC`, then `reddot.changes`.
    public var feedTopic: String { settings.feedTopic(environment: KafkaOptions.environment) }

    /// The change feed's brokers: the flag, then `fallback` (a command's own brokers), then
    /// `REDDOT_KAFKA_BROKERS`; nil (no feed) without any, or with `--no-change-feed`.
    public func feedBrokers(fallback: String? = nil) -> String? {
        settings.feedBrokers(fallback: fallback, environment: KafkaOptions.environment)
    }

    public func validate() throws {
        if let problem = KafkaOptions.topicProblem(feedTopic) { throw ValidationError("--changes-topic (else REDDOT_CHANGES_TOPIC): \(problem)") }
    }

    /// The rollup workers and, when it has brokers (see ``feedBrokers(fallback:)``), the change
    /// feed, each on a pool of its own. The feed's producer takes the properties file of
    /// `REDDOT_KAFKA_CONFIG` (as ingest's `--kafka-config`), if set.
    ///
    /// - Throws: `ExitCode` 64, with a sentence, when the properties file cannot be read or the
    ///   producer cannot be made.
    public func services(database: DatabaseOptions, brokers fallback: String? = nil, logger: Logger) throws -> [any Service] {
        var services: [any Service] = [service(database: database, logger: logger)]
        guard let brokers = feedBrokers(fallback: fallback) else {
            logger.info("change feed off (no --changes-brokers nor REDDOT_KAFKA_BROKERS, or --no-change-feed)")
            return services
        }
        var kafka = KafkaConfiguration(bootstrapServers: brokers)
        if let path = KafkaOptions.nonEmpty(KafkaOptions.environment["REDDOT_KAFKA_CONFIG"]) {
            for (key, value) in try KafkaOptions.readProperties(path: path) { kafka.set(key, value) }
        }
        let producer: KafkaProducer
        do {
            producer = try KafkaProducer(configuration: ChangeFeed.producerConfiguration(kafka), logger: logger)
        } catch {
            throw fail("cannot create the change feed's Kafka producer: \(error.message)", code: ExitCodes.usage)
        }
        var feedDatabase = database.configuration()
        feedDatabase.applicationName = "reddot-changes"
        let pool = PGPool(configuration: feedDatabase, maximumConnections: 2, logger: logger)
        services.append(
            ChangeFeed(pool: pool, producer: producer, configuration: ChangeFeedConfiguration(topic: feedTopic, countCap: settings.changesCountCap), logger: logger))
        return services
    }

    /// The rollup workers on a pool of their own (one connection each, and one for the sweeper).
    public func service(database: DatabaseOptions, logger: Logger) -> RollupService {
        RollupService(database: database.configuration(), configuration: RollupConfiguration(settings: settings), logger: logger)
    }
}
