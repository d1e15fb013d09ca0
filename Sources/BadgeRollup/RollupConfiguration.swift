/// How `reddot rollup` works; every field has a flag and a `REDDOT_ROLLUP_*` variable.
public struct RollupConfiguration: Sendable {
    /// Concurrent workers in this process, each with its own connection. Any number of
    /// processes may run: workers claim users with per-user locks taken without waiting.
    public var workers: Int
    /// Users claimed and recomputed per transaction.
    public var batchSize: Int
    /// How long an idle worker waits before looking for dirty users again.
    public var idleInterval: Duration
    /// How often expired badges and broadcasts are swept.
    public var expiryInterval: Duration
    /// Expired rows deleted per sweep transaction.
    public var expiryBatchSize: Int
    /// How often the queue depth is measured.
    public var queueDepthInterval: Duration
    /// How long the change log keeps a version (for delta polling and stream resume).
    public var changeRetention: Duration
    /// How often records older than `changeRetention` are pruned (in batches of
    /// `expiryBatchSize`), and the log's size measured.
    public var changePruneInterval: Duration
    /// How long a withdrawn broadcast (cleared for everyone, or expired) and the users'
    /// dismissals of it are kept before the sweeper deletes them, every `changePruneInterval`;
    /// nil keeps them. At least `changeRetention` (the command checks it).
    public var withdrawnBroadcastRetention: Duration?
    /// While ingest reports more records than this waiting in Kafka (a backlog), only the first
    /// worker of the process claims users: a version made of a user then is superseded by the
    /// next batches, and a round with fewer rounds beside it covers more of each user's writes.
    /// 0: every worker always claims.
    public var backlogRecords: Int64
    /// How recent ingest's report must be to count (`consumer_offset.updated_at`): a stopped
    /// ingest's last report does not hold the workers back.
    public var backlogFreshness: Duration
    /// How often a worker that waits reads ingest's report again.
    public var backlogCheckInterval: Duration

    /// Defaults: 2 workers, 500 users per batch, 20 ms idle wait, expiry every second, the change
    /// log kept 24 hours and pruned every minute, withdrawn broadcasts kept 30 days, one worker
    /// while more than 50,000 records wait for ingest (by its reports of the last 10 s, read every
    /// 500 ms).
    public init(
        workers: Int = 2, batchSize: Int = 500, idleInterval: Duration = .milliseconds(20),
        expiryInterval: Duration = .seconds(1), expiryBatchSize: Int = 5_000, queueDepthInterval: Duration = .seconds(5),
        changeRetention: Duration = .seconds(86_400), changePruneInterval: Duration = .seconds(60),
        withdrawnBroadcastRetention: Duration? = .seconds(30 * 86_400), backlogRecords: Int64 = 50_000, backlogFreshness: Duration = .seconds(10), backlogCheckInterval: Duration = .milliseconds(500)
    ) {
        self.workers = max(1, workers)
        self.batchSize = max(1, batchSize)
        self.idleInterval = idleInterval
        self.expiryInterval = expiryInterval
        self.expiryBatchSize = max(1, expiryBatchSize)
        self.queueDepthInterval = queueDepthInterval
        self.changeRetention = changeRetention
        self.changePruneInterval = changePruneInterval
        self.withdrawnBroadcastRetention = withdrawnBroadcastRetention
        self.backlogRecords = max(0, backlogRecords)
        self.backlogFreshness = backlogFreshness
        self.backlogCheckInterval = backlogCheckInterval
    }
}

extension RollupConfiguration {
    /// The first of `reddot rollup`'s numbers outside its range, as a sentence naming the flag
    /// (the command's usage error); nil when all are in range.
    public static func flagProblem(
        workers: Int, batchSize: Int, idleMilliseconds: Int, expiryIntervalMilliseconds: Int, changeRetentionHours: Double = 24,
        backlogRecords: Int64 = 50_000, withdrawnBroadcastRetentionDays: Int = 30
    ) -> String? {
        guard (1...64).contains(workers) else { return "--rollup-workers takes 1…64" }
        guard (1...100_000).contains(batchSize) else { return "--rollup-batch-size takes 1…100000" }
        guard (1...3_600_000).contains(idleMilliseconds) else { return "--rollup-idle-ms takes 1…3600000" }
        guard (10...3_600_000).contains(expiryIntervalMilliseconds) else { return "--expiry-interval-ms takes 10…3600000" }
        guard changeRetentionHours >= 0.001, changeRetentionHours <= 8_760 else {
            return "--change-retention-hours takes a number ≥ 0.001 and ≤ 8760"
        }
        guard (0...1_000_000_000_000).contains(backlogRecords) else { return "--rollup-backlog-records takes 0…1000000000000" }
        guard (0...36_500).contains(withdrawnBroadcastRetentionDays) else {
            return "--withdrawn-broadcast-retention-days takes 0 (keep them) or 1…36500"
        }
        guard withdrawnBroadcastRetentionDays == 0 || Double(withdrawnBroadcastRetentionDays) * 24 >= changeRetentionHours else {
            return "--withdrawn-broadcast-retention-days must be at least --change-retention-hours (the log rebuilds versions that show them)"
        }
        return nil
    }
}
