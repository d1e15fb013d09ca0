/// How `reddot rollup` works; every field has a flag and a `REDDOT_ROLLUP_*` variable.
public struct RollupConfiguration: Sendable {
    /// Concurrent workers in this process, each with its own connection. Any number of
    /// processes may run: workers claim users with `FOR UPDATE SKIP LOCKED`.
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

    /// Defaults: 2 workers, 500 users per batch, 20 ms idle wait, expiry every second.
    public init(
        workers: Int = 2, batchSize: Int = 500, idleInterval: Duration = .milliseconds(20),
        expiryInterval: Duration = .seconds(1), expiryBatchSize: Int = 5_000, queueDepthInterval: Duration = .seconds(5)
    ) {
        self.workers = max(1, workers)
        self.batchSize = max(1, batchSize)
        self.idleInterval = idleInterval
        self.expiryInterval = expiryInterval
        self.expiryBatchSize = max(1, expiryBatchSize)
        self.queueDepthInterval = queueDepthInterval
    }
}
