public import ArgumentParser
import RdKafka

/// Every setting of `reddot rollup` (and of `reddot run`'s rollup and change feed), declared
/// once: its flag, its `REDDOT_*` variable where it has one, its default, its help and the values
/// it takes. The commands include this type as an option group; `RollupConfiguration.settings`
/// carries it to the workers, which read each value from here. A new setting is one `@Option`
/// here, with its range in ``problem``.
public struct RollupSettings: ParsableArguments, Sendable {
    /// Options in their definition state; read ``defaults`` (or a parsed value) instead.
    public init() {}

    /// Every flag left out, as `reddot rollup` with no flags parses them (no variable read).
    public static let defaults: RollupSettings = {
        do {
            return try RollupSettings.parse([])
        } catch {
            preconditionFailure("the rollup's defaults are out of their own ranges: \(error)")
        }
    }()

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
        name: .customLong("rollup-backlog-settle-seconds"),
        help: """
            While ingest is behind (--rollup-backlog-records), a user is claimed only once their oldest write waiting for \
            the rollup is this many seconds old: each version then covers more of the user's writes, and the rollup \
            leaves more of the machine to ingest, at the price of trees that lag by up to this much more during a \
            backlog. 0: claim at once.
            """)
    public var backlogSettleSeconds: Double = 0
    @Option(
        name: .customLong("rollup-queue-vacuum-seconds"),
        help: """
            When a worker finds no dirty user but its look took 2 ms or more (the queue's index still holds the marks \
            that rounds deleted, which autovacuum has not cleaned yet: every look steps over them), the sweeper vacuums \
            the queue (dirty_mark), at most once per this many seconds. Needs the role to own the table (else it is left \
            to autovacuum, said once in the log). 0: leave it to autovacuum.
            """)
    public var queueVacuumSeconds = 30

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

    public func validate() throws {
        if let problem { throw ValidationError(problem) }
    }

    /// The first flag outside its range, as a sentence naming the flag (the command's usage
    /// error); nil when every flag is usable. The feed's topic from `REDDOT_CHANGES_TOPIC` is
    /// checked where it is read (``feedTopic(environment:)``).
    public var problem: String? {
        guard (1...64).contains(workers) else { return "--rollup-workers takes 1…64" }
        guard (1...100_000).contains(batchSize) else { return "--rollup-batch-size takes 1…100000" }
        guard (1...3_600_000).contains(idleMilliseconds) else { return "--rollup-idle-ms takes 1…3600000" }
        guard (10...3_600_000).contains(expiryIntervalMilliseconds) else { return "--expiry-interval-ms takes 10…3600000" }
        // Bounded before `.seconds(hours * 3600)`, which traps beyond Int128 attoseconds.
        guard changeRetentionHours >= 0.001, changeRetentionHours <= 8_760 else {
            return "--change-retention-hours takes a number ≥ 0.001 and ≤ 8760"
        }
        guard (0...1_000_000_000_000).contains(backlogRecords) else { return "--rollup-backlog-records takes 0…1000000000000" }
        guard backlogSettleSeconds >= 0, backlogSettleSeconds <= 3_600 else { return "--rollup-backlog-settle-seconds takes 0…3600" }
        guard (0...86_400).contains(queueVacuumSeconds) else { return "--rollup-queue-vacuum-seconds takes 0 (off) or 1…86400" }
        guard (0...36_500).contains(withdrawnBroadcastRetentionDays) else {
            return "--withdrawn-broadcast-retention-days takes 0 (keep them) or 1…36500"
        }
        guard withdrawnBroadcastRetentionDays == 0 || Double(withdrawnBroadcastRetentionDays) * 24 >= changeRetentionHours else {
            return "--withdrawn-broadcast-retention-days must be at least --change-retention-hours (the log rebuilds versions that show them)"
        }
        guard changesCountCap >= 1 else { return "--changes-count-cap takes a number ≥ 1" }
        if let changesTopic, !changesTopic.isEmpty, let problem = KafkaConfiguration.nameProblem(changesTopic, kind: "topic") {
            return "--changes-topic: \(problem)"
        }
        // An empty list would quietly fall back to REDDOT_KAFKA_BROKERS, or turn the feed off.
        // (--no-change-feed beside a list wins: it is the off switch, as the benches use it.)
        if let changesBrokers, changesBrokers.allSatisfy(\.isWhitespace) {
            return "--changes-brokers is empty; give host:port[,host:port…], or --no-change-feed"
        }
        return nil
    }

    /// The change feed's topic: the flag, then `REDDOT_CHANGES_TOPIC`, then `reddot.changes`.
    public func feedTopic(environment: [String: String]) -> String {
        [changesTopic, environment["REDDOT_CHANGES_TOPIC"]].compactMap { $0 }.first { !$0.isEmpty } ?? "reddot.changes"
    }

    /// The change feed's brokers: the flag, then `fallback` (a command's own brokers), then
    /// `REDDOT_KAFKA_BROKERS`; nil (no feed) without any, or with `--no-change-feed`.
    public func feedBrokers(fallback: String?, environment: [String: String]) -> String? {
        guard !noChangeFeed else { return nil }
        return [changesBrokers, fallback, environment["REDDOT_KAFKA_BROKERS"]].compactMap { $0 }.first { !$0.isEmpty }
    }
}

extension RollupConfiguration {
    /// Concurrent workers in this process (`--rollup-workers`), each with its own connection.
    /// Any number of processes may run: workers claim users with per-user locks taken without
    /// waiting.
    public var workers: Int { max(1, settings.workers) }
    /// Users claimed and recomputed per transaction (`--rollup-batch-size`).
    public var batchSize: Int { max(1, settings.batchSize) }
    /// How long an idle worker waits before looking for dirty users again (`--rollup-idle-ms`).
    public var idleInterval: Duration { .milliseconds(max(0, settings.idleMilliseconds)) }
    /// How often expired badges and broadcasts are swept (`--expiry-interval-ms`).
    public var expiryInterval: Duration { .milliseconds(max(0, settings.expiryIntervalMilliseconds)) }
    /// How long the change log keeps a version, for delta polling and stream resume
    /// (`--change-retention-hours`, within its range whoever set it).
    public var changeRetention: Duration {
        // A value that is not a number (only a library user can set one) counts as the default.
        let hours = settings.changeRetentionHours.isNaN ? RollupSettings.defaults.changeRetentionHours : settings.changeRetentionHours
        return .seconds(min(max(hours, 0), 8_760) * 3_600)
    }
    /// How long a withdrawn broadcast (cleared for everyone, or expired) and the users'
    /// dismissals of it are kept before the sweeper deletes them, every `changePruneInterval`;
    /// nil keeps them (`--withdrawn-broadcast-retention-days 0`).
    public var withdrawnBroadcastRetention: Duration? {
        settings.withdrawnBroadcastRetentionDays > 0 ? .seconds(min(settings.withdrawnBroadcastRetentionDays, 36_500) * 86_400) : nil
    }
    /// While ingest reports more records than this waiting in Kafka (a backlog), only the first
    /// worker of the process claims users: a version made of a user then is superseded by the
    /// next batches, and a round with fewer rounds beside it covers more of each user's writes.
    /// 0: every worker always claims (`--rollup-backlog-records`).
    public var backlogRecords: Int64 { max(0, settings.backlogRecords) }
    /// While ingest is behind, how old a user's oldest dirty mark must be before a worker claims
    /// them, in seconds (`--rollup-backlog-settle-seconds`, within its range whoever set it).
    public var backlogSettleSeconds: Double {
        settings.backlogSettleSeconds.isNaN ? 0 : min(max(settings.backlogSettleSeconds, 0), 3_600)
    }
    /// The least time between two vacuums of the queue that the sweeper runs when a worker's
    /// empty look was slow (`--rollup-queue-vacuum-seconds`); nil: never (0).
    public var queueVacuumInterval: Duration? {
        settings.queueVacuumSeconds > 0 ? .seconds(min(settings.queueVacuumSeconds, 86_400)) : nil
    }
}
