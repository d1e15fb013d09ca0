public import Metrics
import Synchronization

/// Samples of the rollup's `reddot_rollup_lag_seconds` and the change feed's
/// `reddot_feed_lag_seconds` timers, and the increments of ingest's `reddot_ingest_users_total`
/// (by its `rollup` label) and `reddot_ingest_batches_total` (by its `trigger` label), with the
/// time each was recorded; every other metric is dropped here (Prometheus gets them all).
/// Bootstrap it with the others.
public final class RollupLagCapture: MetricsFactory, Sendable {
    static let label = "reddot_rollup_lag_seconds"
    static let feedLabel = "reddot_feed_lag_seconds"
    /// The counters captured, each with the dimension that tells its series apart.
    static let countersCaptured = ["reddot_ingest_users_total": "rollup", "reddot_ingest_batches_total": "trigger"]
    /// An empty capture.
    public init() {}

    /// Timer samples (nanoseconds) and counter increments (amounts), by label.
    private let recorded = Mutex<[(label: String, at: UInt64, nanoseconds: Int64)]>([])

    /// One captured timer (each sample its nanoseconds) or counter (each increment its amount).
    final class Capturing: TimerHandler, CounterHandler, Sendable {
        let capture: RollupLagCapture
        let label: String
        init(_ capture: RollupLagCapture, label: String) {
            self.capture = capture
            self.label = label
        }
        func recordNanoseconds(_ duration: Int64) { record(duration) }
        func increment(by amount: Int64) { record(amount) }
        func reset() {}
        private func record(_ value: Int64) {
            let now = BenchClock.now
            capture.recorded.withLock { $0.append((label, now, value)) }
        }
    }

    /// The sum of the counter `label`'s increments with its dimension `value` in `[from, to)`
    /// (`reddot_ingest_users_total` by `rolled_up` or `left`, `reddot_ingest_batches_total` by
    /// trigger).
    func counted(_ label: String, _ value: String, from start: UInt64, to end: UInt64) -> Int {
        let label = "\(label)/\(value)"
        return recorded.withLock { samples in
            Int(clamping: samples.filter { $0.label == label && $0.at >= start && $0.at < end }.reduce(Int64(0)) { $0 &+ $1.nanoseconds })
        }
    }

    /// The samples of the timer `label` recorded in `[from, to)`, in nanoseconds.
    func samples(_ label: String = RollupLagCapture.label, from start: UInt64, to end: UInt64) -> [Int64] {
        recorded.withLock { samples in samples.filter { $0.label == label && $0.at >= start && $0.at < end }.map(\.nanoseconds) }
    }

    /// MetricsFactory: the two lag timers record here; everything else is dropped.
    public func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        label == Self.label || label == Self.feedLabel ? Capturing(self, label: label) : NOOPMetricsHandler.instance
    }
    /// MetricsFactory: ingest's users and batches counters record here; every other counter is
    /// dropped.
    public func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        guard let dimension = Self.countersCaptured[label], let value = dimensions.first(where: { $0.0 == dimension })?.1 else {
            return NOOPMetricsHandler.instance
        }
        return Capturing(self, label: "\(label)/\(value)")
    }
    /// MetricsFactory: dropped.
    public func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler { NOOPMetricsHandler.instance }
    /// MetricsFactory: nothing to release.
    public func destroyCounter(_ handler: any CounterHandler) {}
    /// MetricsFactory: nothing to release.
    public func destroyRecorder(_ handler: any RecorderHandler) {}
    /// MetricsFactory: nothing to release.
    public func destroyTimer(_ handler: any TimerHandler) {}
}
