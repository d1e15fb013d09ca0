import ArgumentParser
import BadgeRollup
import Logging
import RedDotCommandLine
import ServiceLifecycle

/// `reddot rollup`: the rollup workers.
struct RollupCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rollup",
        abstract: "Recompute the aggregates of users whose badges changed (the rollup workers).",
        discussion: """
            Workers claim dirty users in batches, in user order from where the last batch \
            stopped, passing by users another worker holds (run as many workers and processes \
            as you like), add each user's new increments to their parents' aggregates or \
            recount them in one SQL statement, bump \
            the version of each user whose visible tree changed, and NOTIFY the query services. \
            While ingest reports more than --rollup-backlog-records records waiting in Kafka, \
            only the first worker claims users, so that each version covers more of a user's \
            writes. A sweeper deletes expired badges and withdraws expired broadcasts every second. Each \
            new version is logged in the change log (kept --change-retention-hours, for delta \
            polling and stream resume), and the change feed publishes the log to \
            --changes-topic (reddot.changes) when it has brokers: in order per user, at least \
            once, one process at a time.

            Metrics (with --metrics-port): reddot_rollup_lag_seconds (dirty mark → aggregates \
            committed), reddot_rollup_users_total, reddot_rollup_queue_depth_users, \
            reddot_feed_lag_seconds (version → Kafka acknowledged), reddot_feed_pending_records, …

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
        var services = try rollup.services(database: database, logger: logger)
        if let server = try operations.server(registry: registry, logger: logger) { services.append(server) }
        try await runServices(services, logger: logger)
    }
}
