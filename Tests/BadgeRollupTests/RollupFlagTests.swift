import BadgeRollup
import Testing

/// `reddot rollup`'s flags: defaults and ranges, parsed as the command line gives them; no
/// database needed.
@Suite("Rollup flags")
struct RollupFlagTests {
    /// The sentence the parser refuses `arguments` with; nil when it takes them.
    private func refusal(_ arguments: [String]) -> String? {
        do {
            _ = try RollupSettings.parse(arguments)
            return nil
        } catch {
            return RollupSettings.message(for: error)
        }
    }

    @Test("the defaults are the documented ones")
    func defaults() throws {
        let configuration = try RollupConfiguration(arguments: [])
        #expect(configuration.workers == 2 && configuration.batchSize == 500)
        #expect(configuration.idleInterval == .milliseconds(20) && configuration.expiryInterval == .seconds(1))
        #expect(configuration.changeRetention == .seconds(86_400))
        #expect(configuration.withdrawnBroadcastRetention == .seconds(30 * 86_400))
        #expect(configuration.backlogRecords == 50_000)
        #expect(configuration.settings.changesCountCap == 99 && !configuration.settings.noChangeFeed)
        #expect(configuration.settings.feedTopic(environment: [:]) == "reddot.changes")
        #expect(configuration.settings.feedTopic(environment: ["REDDOT_CHANGES_TOPIC": "c"]) == "c")
        #expect(configuration.settings.feedBrokers(fallback: nil, environment: [:]) == nil)
        #expect(configuration.settings.feedBrokers(fallback: "a:1", environment: ["REDDOT_KAFKA_BROKERS": "b:1"]) == "a:1")
        #expect(try RollupSettings.parse(["--no-change-feed"]).feedBrokers(fallback: "a:1", environment: [:]) == nil)
        // A library user may set what the parser refuses: the durations stay in range, never trap.
        var unchecked = configuration
        for hours in [Double.nan, .infinity, -.infinity, 1e300] {
            unchecked.settings.changeRetentionHours = hours
            #expect(unchecked.changeRetention >= .zero && unchecked.changeRetention <= .seconds(8_760 * 3_600), "\(hours)")
        }
        unchecked.settings.withdrawnBroadcastRetentionDays = .max
        #expect(unchecked.withdrawnBroadcastRetention == .seconds(36_500 * 86_400))
        for share in [0, -1, Double.nan, .leastNonzeroMagnitude] {
            unchecked.queueDepthShare = share
            #expect(unchecked.nextQueueDepth(after: .milliseconds(300)) == .seconds(300), "\(share)")
        }
        unchecked.queueDepthShare = 1e-17
        unchecked.queueDepthLongestInterval = .seconds(Int64.max)
        #expect(unchecked.nextQueueDepth(after: .seconds(1)) == .seconds(86_400))
        unchecked.queueDepthInterval = .seconds(-5)
        unchecked.queueDepthLongestInterval = .seconds(-5)
        #expect(unchecked.nextQueueDepth(after: .zero) == .zero)
    }

    @Test("the queue depth is counted every 5 s, or less often when the count is slow")
    func queueDepthInterval() {
        let configuration = RollupConfiguration()
        #expect(configuration.nextQueueDepth(after: .zero) == .seconds(5))
        #expect(configuration.nextQueueDepth(after: .milliseconds(100)) == .seconds(5))
        // A million marks: 0.3 s a count, 2% of the time.
        #expect(configuration.nextQueueDepth(after: .milliseconds(300)) == .seconds(15))
        #expect(configuration.nextQueueDepth(after: .seconds(60)) == .seconds(300))
        #expect(configuration.nextQueueDepth(after: .seconds(Int64.max)) == .seconds(300))
    }

    @Test("each number out of range is named in a sentence")
    func flagProblems() {
        #expect(refusal([]) == nil)
        #expect(refusal(["--rollup-workers", "65"]) == "--rollup-workers takes 1…64")
        #expect(refusal(["--rollup-batch-size", "0"]) == "--rollup-batch-size takes 1…100000")
        #expect(refusal(["--rollup-idle-ms", "0"]) == "--rollup-idle-ms takes 1…3600000")
        #expect(refusal(["--expiry-interval-ms", "9"]) == "--expiry-interval-ms takes 10…3600000")
        #expect(refusal(["--rollup-backlog-records", "0"]) == nil)
        #expect(refusal(["--rollup-backlog-records=-1"]) == "--rollup-backlog-records takes 0…1000000000000")
        #expect(refusal(["--rollup-backlog-records", "\(Int64.max)"]) == "--rollup-backlog-records takes 0…1000000000000")
        #expect(refusal(["--change-retention-hours", "inf"]) == "--change-retention-hours takes a number ≥ 0.001 and ≤ 8760")
        #expect(refusal(["--changes-count-cap", "0"]) == "--changes-count-cap takes a number ≥ 1")
        #expect(refusal(["--changes-topic", "a b"])?.hasPrefix("--changes-topic: ") == true)
        #expect(refusal(["--changes-brokers", " "]) == "--changes-brokers is empty; give host:port[,host:port…], or --no-change-feed")
        #expect(refusal(["--changes-brokers", "k:9092", "--no-change-feed"]) == nil, "the off switch wins")
        #expect(refusal(["--changes-brokers", "k:9092"]) == nil)
    }

    @Test("withdrawn broadcasts: 0 keeps them, else at least the change log's retention, at most 100 years")
    func withdrawnRetention() {
        func problem(days: String, changeHours: Double = 24) -> String? {
            refusal(["--withdrawn-broadcast-retention-days=\(days)", "--change-retention-hours", "\(changeHours)"])
        }
        #expect(problem(days: "30") == nil && problem(days: "0") == nil && problem(days: "1") == nil && problem(days: "36500") == nil)
        #expect(problem(days: "-1") == "--withdrawn-broadcast-retention-days takes 0 (keep them) or 1…36500")
        #expect(problem(days: "36501") == "--withdrawn-broadcast-retention-days takes 0 (keep them) or 1…36500")
        #expect(problem(days: "\(Int.max)") == "--withdrawn-broadcast-retention-days takes 0 (keep them) or 1…36500")
        #expect(problem(days: "2", changeHours: 72)?.contains("at least --change-retention-hours") == true)
        #expect(problem(days: "0", changeHours: 72) == nil)
    }
}
