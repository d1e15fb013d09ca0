public import ArgumentParser
public import BadgeRollup
import BadgeStore
import Foundation
import LibPQ
public import Logging
import RdKafka
public import ServiceLifecycle

/// The rollup settings, shared by `rollup` and `run`.
public struct RollupOptions: ParsableArguments {
    /// Options with their defaults (argument-parser fills them in).
    public init() {}

    @Option(name: .customLong("rollup-workers"), help: "Concurrent rollup workers in this process, each with a connection.")
    public var workers = 2
    @Option(name: .customLong("rollup-batch-size"), help: "Users claimed and rolled up per transaction (the next dirty users in user order, however many marks each has).")
    public var batchSize = 500
    @Option(name: .customLong("rollup-idle-ms"), help: "How long an idle worker waits before looking again, in milliseconds.")
    public var idleMilliseconds = 20
    @Option(name: .customLong("expiry-interval-ms"), help: "How often expired badges and broadcasts are swept, in milliseconds.")
    public var expiryIntervalMilliseconds = 1_000
    @Option(
        name: .customLong("change-retention-hours"),
        help: "How long the change log keeps each version, for delta polling (GET …/badges/changes) and stream resume.")
    public var changeRetentionHours: Double = 24
    @Option(
        name: .customLong("rollup-backlog-records"),
        help: """
            While ingest reports more records than this waiting in Kafka (a backlog; its reports of the last 10 s), only \
            the first worker of this process claims users, so that each version covers more of a user's writes. 0: every \
            worker always claims.
            """)
    public var backlogRecords: Int64 = 50_000

    @Option(
        name: .customLong("changes-brokers"),
        help: ArgumentHelp(
            "Kafka brokers for the change feed (every change-log record to --changes-topic). Default: REDDOT_KAFKA_BROKERS "
                + "(reddot run and dev: their --brokers); without either, no feed.",
            valueName: "list"))
    public var changesBrokers: String?
    @Option(
        name: .customLong("changes-topic"),
        help: ArgumentHelp("The change feed's topic. Default: REDDOT_CHANGES_TOPIC, else reddot.changes.", valueName: "name"))
    public var changesTopic: String?
    @Flag(name: .customLong("no-change-feed"), help: "Do not publish the change feed (the log is still kept, for delta polling and resume).")
    public var noChangeFeed = false
    @Option(
        name: .customLong("withdrawn-broadcast-retention-days"),
        help: "Days a withdrawn broadcast (cleared for everyone, or expired) and users' dismissals of it are kept; 0 keeps them.")
    public var withdrawnBroadcastRetentionDays = 30
    @Option(name: .customLong("changes-count-cap"), help: "Counts above this show as N+ in the feed's node texts (as serve's --count-cap).")
    public var changesCountCap: Int64 = 99

    /// The change feed's topic: the flag, then `REDDOT_CHANGES_TOPIC`, then `reddot.changes`.
    public var feedTopic: String {
        KafkaOptions.nonEmpty(changesTopic) ?? KafkaOptions.nonEmpty(KafkaOptions.environment["REDDOT_CHANGES_TOPIC"]) ?? "reddot.changes"
    }

    /// The change feed's brokers: the flag, then `fallback` (a command's own brokers), then
    /// `REDDOT_KAFKA_BROKERS`; nil (no feed) without any, or with `--no-change-feed`.
    public func feedBrokers(fallback: String? = nil) -> String? {
        guard !noChangeFeed else { return nil }
        return KafkaOptions.nonEmpty(changesBrokers) ?? KafkaOptions.nonEmpty(fallback)
            ?? KafkaOptions.nonEmpty(KafkaOptions.environment["REDDOT_KAFKA_BROKERS"])
    }

    public func validate() throws {
        if let problem = KafkaOptions.topicProblem(feedTopic) { throw ValidationError("--changes-topic: \(problem)") }
        guard changesCountCap >= 1 else { throw ValidationError("--changes-count-cap takes a number ≥ 1") }
        let problem = RollupConfiguration.flagProblem(
            workers: workers, batchSize: batchSize, idleMilliseconds: idleMilliseconds, expiryIntervalMilliseconds: expiryIntervalMilliseconds,
            changeRetentionHours: changeRetentionHours, backlogRecords: backlogRecords,
            withdrawnBroadcastRetentionDays: withdrawnBroadcastRetentionDays)
        if let problem { throw ValidationError(problem) }
    }

    /// The rollup workers and, when it has brokers (see ``feedBrokers(fallback:)``), the change
    /// feed, each on a pool of its own. The feed's producer takes the properties file of
    /// `REDDOT_KAFKA_CONFIG` (as ingest's `--kafka-config`), if set.
    ///
    /// - Throws: `ValidationError` when the properties file cannot be read or the producer cannot
    ///   be made.
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
            throw ValidationError("cannot create the change feed's Kafka producer: \(error.message)")
        }
        // The rollup's session settings (no JIT: it compiled the feed's read, hundreds of ms a round).
        var feedDatabase = database.configuration()
        feedDatabase.sessionSettings += BadgeStore.recommendedSessionSettings
        feedDatabase.applicationName = "reddot-changes"
        let pool = PGPool(configuration: feedDatabase, maximumConnections: 2, logger: logger)
        services.append(
            ChangeFeed(pool: pool, producer: producer, configuration: ChangeFeedConfiguration(topic: feedTopic, countCap: changesCountCap), logger: logger))
        return services
    }

    /// The rollup workers on a pool of their own (one connection each, and one for the sweeper).
    public func service(database: DatabaseOptions, logger: Logger) -> RollupService {
        let configuration = RollupConfiguration(
            workers: workers, batchSize: batchSize, idleInterval: .milliseconds(idleMilliseconds),
            expiryInterval: .milliseconds(expiryIntervalMilliseconds), changeRetention: .seconds(changeRetentionHours * 3_600),
            withdrawnBroadcastRetention: withdrawnBroadcastRetentionDays == 0 ? nil : .seconds(withdrawnBroadcastRetentionDays * 86_400),
            backlogRecords: backlogRecords)
        return RollupService(database: database.configuration(), configuration: configuration, logger: logger)
    }
}
