public import Metrics
import Synchronization

/// Samples of the rollup's `reddot_rollup_lag_seconds` and the change feed's
/// `reddot_feed_lag_seconds` timers, with the time each was recorded; every other metric is
/// dropped here (Prometheus gets them all). Bootstrap it with the others.
public final class RollupLagCapture: MetricsFactory, Sendable {
    static let label = "reddot_rollup_lag_seconds"
    static let feedLabel = "reddot_feed_lag_seconds"
    /// An empty capture.
    public init() {}

    private let recorded = Mutex<[(label: String, at: UInt64, nanoseconds: Int64)]>([])

    final class LagTimer: TimerHandler, Sendable {
        let capture: RollupLagCapture
        let label: String
        init(_ capture: RollupLagCapture, label: String) {
            self.capture = capture
            self.label = label
        }
        func recordNanoseconds(_ duration: Int64) {
            let now = BenchClock.now
            capture.recorded.withLock { $0.append((label, now, duration)) }
        }
    }

    /// The samples of the timer `label` recorded in `[from, to)`, in nanoseconds.
    func samples(_ label: String = RollupLagCapture.label, from start: UInt64, to end: UInt64) -> [Int64] {
        recorded.withLock { samples in samples.filter { $0.label == label && $0.at >= start && $0.at < end }.map(\.nanoseconds) }
    }

    /// MetricsFactory: the two lag timers record here; everything else is dropped.
    public func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        label == Self.label || label == Self.feedLabel ? LagTimer(self, label: label) : NOOPMetricsHandler.instance
    }
    /// MetricsFactory: the rollup lag timer records here; everything else is dropped.
    public func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler { NOOPMetricsHandler.instance }
    /// MetricsFactory: the rollup lag timer records here; everything else is dropped.
    public func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler { NOOPMetricsHandler.instance }
    /// MetricsFactory: the rollup lag timer records here; everything else is dropped.
    public func destroyCounter(_ handler: any CounterHandler) {}
    /// MetricsFactory: the rollup lag timer records here; everything else is dropped.
    public func destroyRecorder(_ handler: any RecorderHandler) {}
    /// MetricsFactory: the rollup lag timer records here; everything else is dropped.
    public func destroyTimer(_ handler: any TimerHandler) {}
}
