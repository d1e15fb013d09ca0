public import ArgumentParser
public import BadgeRollup
public import Logging
import ServiceLifecycle

/// The rollup settings, shared by `rollup` and `run`.
public struct RollupOptions: ParsableArguments {
    /// Options with their defaults (argument-parser fills them in).
    public init() {}

    @Option(name: .customLong("rollup-workers"), help: "Concurrent rollup workers in this process, each with a connection.")
    public var workers = 2
    @Option(name: .customLong("rollup-batch-size"), help: "Users claimed and recomputed per transaction.")
    public var batchSize = 500
    @Option(name: .customLong("rollup-idle-ms"), help: "How long an idle worker waits before looking again, in milliseconds.")
    public var idleMilliseconds = 20
    @Option(name: .customLong("expiry-interval-ms"), help: "How often expired badges and broadcasts are swept, in milliseconds.")
    public var expiryIntervalMilliseconds = 1_000
    @Option(
        name: .customLong("change-retention-hours"),
        help: "How long the change log keeps each version, for delta polling (GET …/badges/changes) and stream resume.")
    public var changeRetentionHours: Double = 24

    public func validate() throws {
        let problem = RollupConfiguration.flagProblem(
            workers: workers, batchSize: batchSize, idleMilliseconds: idleMilliseconds, expiryIntervalMilliseconds: expiryIntervalMilliseconds,
            changeRetentionHours: changeRetentionHours)
        if let problem { throw ValidationError(problem) }
    }

    /// The rollup workers on a pool of their own (one connection each, and one for the sweeper).
    public func service(database: DatabaseOptions, logger: Logger) -> RollupService {
        let configuration = RollupConfiguration(
            workers: workers, batchSize: batchSize, idleInterval: .milliseconds(idleMilliseconds),
            expiryInterval: .milliseconds(expiryIntervalMilliseconds), changeRetention: .seconds(changeRetentionHours * 3_600))
        return RollupService(database: database.configuration(), configuration: configuration, logger: logger)
    }
}
