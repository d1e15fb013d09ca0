import BadgeRollup
import Testing

/// `reddot rollup`'s ranges; no database needed.
@Suite("Rollup flags")
struct RollupFlagTests {
    @Test("each number out of range is named in a sentence")
    func flagProblems() {
        func problem(workers: Int = 2, batchSize: Int = 500, idle: Int = 20, expiry: Int = 1_000, backlog: Int64 = 50_000) -> String? {
            RollupConfiguration.flagProblem(
                workers: workers, batchSize: batchSize, idleMilliseconds: idle, expiryIntervalMilliseconds: expiry, backlogRecords: backlog)
        }
        #expect(problem() == nil)
        #expect(problem(workers: 65) == "--rollup-workers takes 1…64")
        #expect(problem(batchSize: 0) == "--rollup-batch-size takes 1…100000")
        #expect(problem(idle: 0) == "--rollup-idle-ms takes 1…3600000")
        #expect(problem(expiry: 9) == "--expiry-interval-ms takes 10…3600000")
        #expect(problem(backlog: 0) == nil)
        #expect(problem(backlog: -1) == "--rollup-backlog-records takes 0…1000000000000")
        #expect(problem(backlog: Int64.max) == "--rollup-backlog-records takes 0…1000000000000")
    }

    @Test("withdrawn broadcasts: 0 keeps them, else at least the change log's retention, at most 100 years")
    func withdrawnRetention() {
        func problem(days: Int, changeHours: Double = 24) -> String? {
            RollupConfiguration.flagProblem(
                workers: 2, batchSize: 500, idleMilliseconds: 20, expiryIntervalMilliseconds: 1_000, changeRetentionHours: changeHours,
                withdrawnBroadcastRetentionDays: days)
        }
        #expect(problem(days: 30) == nil && problem(days: 0) == nil && problem(days: 1) == nil && problem(days: 36_500) == nil)
        #expect(problem(days: -1) == "--withdrawn-broadcast-retention-days takes 0 (keep them) or 1…36500")
        #expect(problem(days: 36_501) == "--withdrawn-broadcast-retention-days takes 0 (keep them) or 1…36500")
        #expect(problem(days: Int.max) == "--withdrawn-broadcast-retention-days takes 0 (keep them) or 1…36500")
        #expect(problem(days: 2, changeHours: 72)?.contains("at least --change-retention-hours") == true)
        #expect(problem(days: 0, changeHours: 72) == nil)
    }
}
