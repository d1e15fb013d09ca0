/// How `reddot rollup` works: its flags (`settings`, declared in `RollupSettings`, which also
/// derives the values the workers read: ``workers``, ``batchSize``, ``idleInterval``, …) and the
/// intervals no flag sets.
public struct RollupConfiguration: Sendable {
    /// Every flag's value.
    public var settings: RollupSettings
    /// Expired rows deleted per sweep transaction.
    public var expiryBatchSize = 5_000
    /// How often the queue depth is measured, at most (see `queueDepthShare`).
    public var queueDepthInterval: Duration = .seconds(5)
    /// The share of the time the queue depth's count may take: a count that took longer than
    /// this share of `queueDepthInterval` puts the next one off until it is
    /// (`nextQueueDepth(after:)`). The count reads every mark: 0.3 s at a million, which every
    /// 5 s was 6% of a core of PostgreSQL while a backlog drained.
    public var queueDepthShare = 0.02
    /// The longest wait between two counts of the queue depth, however slow they are.
    public var queueDepthLongestInterval: Duration = .seconds(300)
    /// How often records older than `changeRetention` are pruned (in batches of
    /// `expiryBatchSize`), and the log's size measured.
    public var changePruneInterval: Duration = .seconds(60)
    /// How recent ingest's report must be to count (`consumer_offset.updated_at`): a stopped
    /// ingest's last report does not hold the workers back.
    public var backlogFreshness: Duration = .seconds(10)
    /// How often a worker that waits reads ingest's report again.
    public var backlogCheckInterval: Duration = .milliseconds(500)

    /// How long after a count of the queue depth that took `took` the next is due:
    /// `queueDepthInterval`, or as long as keeps the counts to `queueDepthShare` of the time, up
    /// to `queueDepthLongestInterval`.
    /// Within a day, whatever a library user set: the wait is added to the clock.
    public func nextQueueDepth(after took: Duration) -> Duration {
        let day = Duration.seconds(86_400)
        let shortest = min(max(queueDepthInterval, .zero), day)
        let longest = min(max(queueDepthLongestInterval, shortest), day)
        let (seconds, attoseconds) = took.components
        let wait = (Double(seconds) + Double(attoseconds) / 1e18) / queueDepthShare
        // A share set to 0, NaN or less waits the longest, never traps.
        guard wait.isFinite, wait >= 0, wait < Double(longest.components.seconds) else { return longest }
        return max(shortest, .milliseconds(Int64((wait * 1000).rounded())))
    }

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
