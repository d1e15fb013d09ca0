/// The percentiles of a list of latencies: p50, p99 and max, in milliseconds, by nearest rank.
public struct LatencySummary: Sendable, Equatable {
    /// The median (nearest rank), in milliseconds.
    public var p50Milliseconds: Double = 0
    /// The 99th percentile (nearest rank), in milliseconds.
    public var p99Milliseconds: Double = 0
    /// The largest value, in milliseconds.
    public var maxMilliseconds: Double = 0

    /// The summary of `values`, nanoseconds sorted ascending; all zero when there are none.
    public init(sortedNanoseconds values: [UInt64]) {
        guard !values.isEmpty else { return }
        p50Milliseconds = Self.milliseconds(values[Self.rank(0.50, count: values.count)])
        p99Milliseconds = Self.milliseconds(values[Self.rank(0.99, count: values.count)])
        maxMilliseconds = Self.milliseconds(values[values.count - 1])
    }

    /// Nearest rank: the index of the smallest of `count` sorted values with at least `quantile`
    /// of the values at or below it.
    public static func rank(_ quantile: Double, count: Int) -> Int {
        let rank = Int((quantile * Double(count)).rounded(.up))
        return min(count - 1, max(0, rank - 1))
    }

    static func milliseconds(_ nanoseconds: UInt64) -> Double { Double(nanoseconds) / 1e6 }
}
