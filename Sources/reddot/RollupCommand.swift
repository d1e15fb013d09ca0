import ArgumentParser
import BadgeRollup
import Logging
import ServiceLifecycle

/// `reddot rollup`: the rollup workers.
struct RollupCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rollup",
        abstract: "Recompute the aggregates of users whose badges changed (the rollup workers).",
        discussion: """
            Workers claim dirty users in batches (FOR UPDATE SKIP LOCKED: run as many workers and \
            processes as you like), recompute every parent's aggregate in one SQL statement, bump \
            the version of each user whose visible tree changed, and NOTIFY the query services. \
            A sweeper deletes expired badges and withdraws expired broadcasts every second.

            Metrics (with --metrics-port): reddot_rollup_lag_seconds (dirty mark → aggregates \
            committed), reddot_rollup_users_total, reddot_rollup_queue_depth_users, …

            SIGTERM or SIGINT: workers finish their transaction and the process exits 0. \
            Database outages are waited out (retries with backoff). Exit codes: 0 stopped by a \
            signal; 64 bad arguments; 1 another failure.
            """)

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var rollup: RollupOptions
    @OptionGroup var operations: OperationsOptions

    func run() async throws {
        let logger = try database.logger(label: "reddot.rollup")
        let registry = MetricsSetup.bootstrap()
        var services: [any Service] = [rollup.service(database: database, logger: logger)]
        if let server = try operations.server(registry: registry, logger: logger) { services.append(server) }
        try await runServices(services, logger: logger)
    }
}

/// The rollup settings, shared by `rollup` and `run`.
struct RollupOptions: ParsableArguments {
    @Option(name: .customLong("rollup-workers"), help: "Concurrent rollup workers in this process, each with a connection.")
    var workers = 2
    @Option(name: .customLong("rollup-batch-size"), help: "Users claimed and recomputed per transaction.")
    var batchSize = 500
    @Option(name: .customLong("rollup-idle-ms"), help: "How long an idle worker waits before looking again, in milliseconds.")
    var idleMilliseconds = 20
    @Option(name: .customLong("expiry-interval-ms"), help: "How often expired badges and broadcasts are swept, in milliseconds.")
    var expiryIntervalMilliseconds = 1_000

    func validate() throws {
        let problem = RollupConfiguration.flagProblem(
            workers: workers, batchSize: batchSize, idleMilliseconds: idleMilliseconds, expiryIntervalMilliseconds: expiryIntervalMilliseconds)
        if let problem { throw ValidationError(problem) }
    }

    /// The rollup workers on a pool of their own (one connection each, and one for the sweeper).
    func service(database: DatabaseOptions, logger: Logger) -> RollupService {
        let configuration = RollupConfiguration(
            workers: workers, batchSize: batchSize, idleInterval: .milliseconds(idleMilliseconds),
            expiryInterval: .milliseconds(expiryIntervalMilliseconds))
        return RollupService(database: database.configuration(), configuration: configuration, logger: logger)
    }
}
