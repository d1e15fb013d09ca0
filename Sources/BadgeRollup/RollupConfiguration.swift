/// How `reddot rollup` works: its flags (`settings`, declared in `RollupSettings`, which also
/// derives the values the workers read: ``workers``, ``batchSize``, ``idleInterval``, …) and the
/// intervals no flag sets.
public struct RollupConfiguration: Sendable {
    /// Every flag's value.
    public var settings: RollupSettings
    /// Expired rows deleted per sweep transaction.
    public var expiryBatchSize = 5_000
    /// How often the queue depth is measured.
    public var queueDepthInterval: Duration = .seconds(5)
    /// How often records older than `changeRetention` are pruned (in batches of
    /// `expiryBatchSize`), and the log's size measured.
    public var changePruneInterval: Duration = .seconds(60)
    /// How recent ingest's report must be to count (`consumer_offset.updated_at`): a stopped
    /// ingest's last report does not hold the workers back.
    public var backlogFreshness: Duration = .seconds(10)
    /// How often a worker that waits reads ingest's report again.
    public var backlogCheckInterval: Duration = .milliseconds(500)

    /// A configuration of `settings` (default: every flag left out).
    public init(settings: RollupSettings = .defaults) {
        self.settings = settings
    }

    /// A configuration of the rollup's flags as the command line gives them (`--rollup-workers
    /// 1`, …).
    ///
    /// - Throws: argument-parser's error for an unknown flag or a value out of its range.
    public init(arguments: [String]) throws {
        self.init(settings: try RollupSettings.parse(arguments))
    }
}
