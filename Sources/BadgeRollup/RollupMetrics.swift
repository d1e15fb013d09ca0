import Metrics

/// The rollup metrics, created once.
final class RollupMetrics: Sendable {
    /// Seconds from a user's first unprocessed change (its dirty mark) to the commit that makes
    /// the new aggregates visible.
    let lag = Metrics.Timer(label: "reddot_rollup_lag_seconds")
    /// Users recomputed.
    let users = Counter(label: "reddot_rollup_users_total")
    /// Users whose increments were added to their aggregates (the rest were recounted).
    let addedUsers = Counter(label: "reddot_rollup_delta_users_total")
    /// Users whose visible tree changed (version bumped).
    let changed = Counter(label: "reddot_rollup_changed_users_total")
    /// Seconds per rollup transaction.
    let batchLatency = Metrics.Timer(label: "reddot_rollup_batch_seconds")
    /// Users waiting for a rollup.
    let queueDepth = Gauge(label: "reddot_rollup_queue_depth_users")
    /// Change-log records pruned after the retention.
    let prunedChanges = Counter(label: "reddot_rollup_change_log_pruned_total")
    let prunedBroadcasts = Counter(label: "reddot_rollup_withdrawn_broadcasts_pruned_total")
    let prunedDismissals = Counter(label: "reddot_rollup_withdrawn_dismissals_pruned_total")
    /// Of them, records the change feed had not published (they never reach the topic).
    let prunedUnpublished = Counter(label: "reddot_rollup_change_log_pruned_unpublished_total")
    /// Records in the change log (PostgreSQL's estimate).
    let changeLogSize = Gauge(label: "reddot_rollup_change_log_records")
    /// Expired own-state rows' users marked dirty, and broadcasts expired.
    let expiredUsers = Counter(label: "reddot_rollup_expired_users_total")
    let expiredBroadcasts = Counter(label: "reddot_rollup_expired_broadcasts_total")
    /// Snoozes that ended and were woken (their users recounted).
    let wokenSnoozes = Counter(label: "reddot_rollup_woken_snoozes_total")
    /// Vacuums of the queue the sweeper ran after slow empty looks (`--rollup-queue-vacuum-seconds`).
    let queueVacuums = Counter(label: "reddot_rollup_queue_vacuums_total")
    /// Idle workers' looks that found the queue empty with one statement (no round run).
    let idleLooks = Counter(label: "reddot_rollup_idle_looks_total")
    /// Failed rollup or sweep transactions (retried).
    let errors = Counter(label: "reddot_rollup_errors_total")
    /// Records waiting for ingest, as its latest batches reported them (0: none reported).
    let ingestWaiting = Gauge(label: "reddot_rollup_ingest_waiting_records")
    /// Workers of this process that claim users: all of them, or one while ingest is behind.
    let claimingWorkers = Gauge(label: "reddot_rollup_claiming_workers")
}
