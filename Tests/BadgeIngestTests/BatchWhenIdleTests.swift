import BadgeIngest
import Foundation
import RdKafka
import Synchronization
import TestSupport
import Testing

/// `--batch-when-idle` (the default): a batch goes to the writers as soon as they are free, no
/// record is ready and it has waited `--batch-min-wait-ms`, however long `--batch-wait-ms` is;
/// `--no-batch-when-idle` waits for a full batch or `--batch-wait-ms`.
@Suite("Ingest hands a batch over when its writers are free", .serialized)
struct BatchWhenIdleTests {
    /// `count` increments of `root.chat` over 20 users, ids `prefix-N`.
    static func increments(_ prefix: String, count: Int) -> [(key: String, value: [UInt8])] {
        (0..<count).map { index in
            let user = "w\(index % 20)"
            return (user, Array(#"{"id":"\#(prefix)-\#(index)","op":"incr","user":"\#(user)","path":"root.chat"}"#.utf8))
        }
    }

    @Test(
        "with a batch wait of ten minutes, records commit as soon as the writers are free, in batches that gather what is ready; with --no-batch-when-idle they wait, and a stop commits them; --batch-min-wait-ms holds them that long",
        .timeLimit(.minutes(5)))
    func batchesGoWhenTheWritersAreFree() async throws {
        let harness = try await IngestHarness(partitions: 2)
        try await tearingDown({ await harness.tearDown() }) {
            // 1. The default: 2,000 records in Kafka before ingest starts, then one more while
            //    it runs, each committed long before the batch wait.
            let ready = try await harness.publish(Self.increments("a", count: 2_000))
            var configuration = harness.configuration(group: "g-idle", batchSize: 5_000)
            configuration.settings.batchWaitMilliseconds = 600_000
            let commits = Mutex(0)
            configuration.onCommit = { _ in commits.withLock { $0 += 1 } }
            let started = ContinuousClock.now
            let running = RunningIngest.start(IngestService(configuration: configuration, logger: harness.logger), logger: harness.logger)
            #expect(try await harness.waitForOffsets(group: "g-idle", ready, seconds: 30), "the records ready at the start were not committed")
            // Batches gathered the records that were ready, not one each (a fetch brings many).
            let batches = commits.withLock { $0 }
            #expect(batches >= 1 && batches <= 100, "\(batches) transactions for 2,000 records")
            let one = try await harness.publish(Self.increments("b", count: 1))
            #expect(try await harness.waitForOffsets(group: "g-idle", ready.merging(one) { max($0, $1) }, seconds: 30))
            #expect(ContinuousClock.now - started < .seconds(300), "the records waited for the batch wait")
            try await running.stop()
            try await harness.rollUp()
            #expect(try await harness.count("SELECT coalesce(sum(count), 0)::int FROM badge_aggregate WHERE path = 'root'") == 2_001)

            // 2. --no-batch-when-idle: one record waits for a full batch or the batch wait, so
            //    ten seconds later it is still not committed; stopping commits it.
            configuration.settings.batchWhenIdle = false
            let waiting = try await harness.publish(Self.increments("c", count: 1))
            let all = ready.merging(one) { max($0, $1) }.merging(waiting) { max($0, $1) }
            let patient = RunningIngest.start(IngestService(configuration: configuration, logger: harness.logger), logger: harness.logger)
            try await Task.sleep(for: .seconds(10))
            let stored = try await harness.storedOffsets(group: "g-idle")
            #expect(waiting.contains { stored[$0.key] != $0.value }, "the record did not wait for its batch to fill")
            try await patient.stop()
            try await harness.rollUp()
            #expect(try await harness.storedOffsets(group: "g-idle").filter { all[$0.key] != nil } == all)
            #expect(try await harness.count("SELECT coalesce(sum(count), 0)::int FROM badge_aggregate WHERE path = 'root'") == 2_002)

            // 3. --batch-min-wait-ms: with free writers, a record still waits that long.
            configuration.settings.batchWhenIdle = true
            configuration.settings.batchMinWaitMilliseconds = 4_000
            let lingering = RunningIngest.start(IngestService(configuration: configuration, logger: harness.logger), logger: harness.logger)
            var sent = all
            for round in 0..<2 {  // the first also waits for the group to settle
                let published = ContinuousClock.now
                sent.merge(try await harness.publish(Self.increments("d\(round)", count: 1))) { max($0, $1) }
                #expect(try await harness.waitForOffsets(group: "g-idle", sent, seconds: 30))
                let took = ContinuousClock.now - published
                #expect(took >= .seconds(4), "committed \(took) after it was published, before the minimum wait")
            }
            try await lingering.stop()
        }
    }
}
