public import Metrics
import Synchronization

/// Samples of the rollup's `reddot_rollup_lag_seconds` timer, with the time each was recorded;
/// every other metric is dropped here (Prometheus gets them all). Bootstrap it with the others.
public final class RollupLagCapture: MetricsFactory, Sendable {
    static let label = "reddot_rollup_lag_seconds"
    /// An empty capture.
    public init() {}

    private let recorded = Mutex<[(at: UInt64, nanoseconds: Int64)]>([])

    final class LagTimer: TimerHandler, Sendable {
        let capture: RollupLagCapture
        init(_ capture: RollupLagCapture) { self.capture = capture }
        func recordNanoseconds(_ duration: Int64) {
            let now = BenchClock.now
            capture.recorded.withLock { $0.append((now, duration)) }
        }
    }

    /// The samples recorded in `[from, to)`, in nanoseconds.
    func samples(from start: UInt64, to end: UInt64) -> [Int64] {
        recorded.withLock { samples in samples.filter { $0.at >= start && $0.at < end }.map(\.nanoseconds) }
    }

    /// MetricsFactory: the rollup lag timer records here; everything else is dropped.
    public func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        label == Self.label ? LagTimer(self) : NOOPMetricsHandler.instance
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
