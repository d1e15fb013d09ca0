import BadgeBench
import Testing

/// The latency recorder's percentiles: nearest rank over a known list.
@Suite("Latency percentiles")
struct RecorderTests {
    @Test("1…100 ms: p50 is 50 ms, p99 is 99 ms, max 100 ms")
    func hundredValues() {
        let summary = LatencySummary(sortedNanoseconds: (1...100).map { UInt64($0) * 1_000_000 })
        #expect(summary.p50Milliseconds == 50)
        #expect(summary.p99Milliseconds == 99)
        #expect(summary.maxMilliseconds == 100)
    }

    @Test("1…1000 µs: p50 is 0.5 ms, p99 is 0.99 ms, max 1 ms")
    func thousandValues() {
        let summary = LatencySummary(sortedNanoseconds: (1...1_000).map { UInt64($0) * 1_000 })
        #expect(summary.p50Milliseconds == 0.5)
        #expect(summary.p99Milliseconds == 0.99)
        #expect(summary.maxMilliseconds == 1)
    }

    @Test("few values: the nearest rank rounds up (p50 of 3 is the 2nd, p99 of 3 the 3rd)")
    func fewValues() {
        let summary = LatencySummary(sortedNanoseconds: [2_000_000, 7_000_000, 40_000_000])
        #expect(summary.p50Milliseconds == 7)
        #expect(summary.p99Milliseconds == 40)
        #expect(summary.maxMilliseconds == 40)
        let one = LatencySummary(sortedNanoseconds: [3_500_000])
        #expect(one == LatencySummary(sortedNanoseconds: [3_500_000, 3_500_000]))
        #expect(one.p50Milliseconds == 3.5 && one.p99Milliseconds == 3.5 && one.maxMilliseconds == 3.5)
    }

    @Test("no values: all zero")
    func empty() {
        let summary = LatencySummary(sortedNanoseconds: [])
        #expect(summary.p50Milliseconds == 0 && summary.p99Milliseconds == 0 && summary.maxMilliseconds == 0)
    }

    @Test("rank: the index of the smallest value with at least the quantile at or below it")
    func rank() {
        #expect(LatencySummary.rank(0.5, count: 100) == 49)
        #expect(LatencySummary.rank(0.99, count: 100) == 98)
        #expect(LatencySummary.rank(0.99, count: 1_000) == 989)
        #expect(LatencySummary.rank(0.5, count: 1) == 0)
        #expect(LatencySummary.rank(0.0, count: 10) == 0)
        #expect(LatencySummary.rank(1.0, count: 10) == 9)
    }
}
