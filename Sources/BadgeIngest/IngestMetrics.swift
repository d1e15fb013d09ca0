import BadgeCore
import Metrics
import Synchronization

/// The ingest metrics, created once (labels are low-cardinality: outcome, reason, topic).
final class IngestMetrics: Sendable {
    let consumed = Counter(label: "reddot_ingest_records_total", dimensions: [("outcome", "consumed")])
    let applied = Counter(label: "reddot_ingest_records_total", dimensions: [("outcome", "applied")])
    let duplicates = Counter(label: "reddot_ingest_records_total", dimensions: [("outcome", "duplicate")])
    /// Events dropped because every user they name was erased on request.
    let erased = Counter(label: "reddot_ingest_records_total", dimensions: [("outcome", "erased")])
    let batchSize = Recorder(label: "reddot_ingest_batch_records")
    let batchLatency = Metrics.Timer(label: "reddot_ingest_batch_seconds")
    let commitRetries = Counter(label: "reddot_ingest_commit_retries_total")
    let rewrites = Counter(label: "reddot_ingest_rewritten_batches_total")
    let fenced = Counter(label: "reddot_ingest_fenced_batches_total")
    let deadLettersPublished = Counter(label: "reddot_ingest_dead_letters_published_total")
    /// Users whose badge state a batch wrote: brought current in the batch's own transaction
    /// (`rolled_up`), or left to the rollup (`left`: another transaction held them, or
    /// `--no-rollup-in-ingest`).
    let usersRolledUp = Counter(label: "reddot_ingest_users_total", dimensions: [("rollup", "rolled_up")])
    let usersLeft = Counter(label: "reddot_ingest_users_total", dimensions: [("rollup", "left")])
    /// How long ago the current dedupe generation started, read at each prune: past twice the
    /// retention, rotations are failing and users' event ids are no longer being dropped.
    let dedupeGenerationAge = Gauge(label: "reddot_ingest_dedupe_generation_age_seconds")
    private let rejectedByReason: [RejectionReason: Counter]
    private let batchesByTrigger: [BatchTrigger: Counter]

    /// What sent a batch the consumer formed to the writers.
    enum BatchTrigger: String, CaseIterable {
        /// It reached `--batch-size`.
        case full
        /// It waited `--batch-wait-ms`.
        case waited
        /// The writers were free and nothing more was ready (`--batch-when-idle`).
        case idle
        /// Ingest was stopping.
        case stop
    }

    init() {
        var counters: [RejectionReason: Counter] = [:]
        for reason in RejectionReason.allCases {
            counters[reason] = Counter(label: "reddot_ingest_rejected_total", dimensions: [("reason", reason.rawValue)])
        }
        rejectedByReason = counters
        var batches: [BatchTrigger: Counter] = [:]
        for trigger in BatchTrigger.allCases {
            batches[trigger] = Counter(label: "reddot_ingest_batches_total", dimensions: [("trigger", trigger.rawValue)])
        }
        batchesByTrigger = batches
    }

    func batchFormed(_ trigger: BatchTrigger) {
        batchesByTrigger[trigger]?.increment()
    }

    func rejected(_ reason: RejectionReason, count: Int) {
        rejectedByReason[reason]?.increment(by: count)
    }
}
