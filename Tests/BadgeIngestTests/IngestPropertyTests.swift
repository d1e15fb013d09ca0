import BadgeCore
import BadgeIngest
import BadgeStore
import Foundation
import LibPQ
import TestSupport
import Testing

@Suite("Ingest equals the in-memory model, with duplicates and poison records")
struct IngestPropertyTests {
    /// Seeds: fixed by default, or `REDDOT_TEST_SEED` to reproduce or explore.
    static let seeds: [UInt64] = {
        if let text = ProcessInfo.processInfo.environment["REDDOT_TEST_SEED"], let seed = UInt64(text) { return [seed] }
        return [21, 22]
    }()

    /// Each seed with ingest bringing its users current itself (`reddot ingest`'s default) and
    /// leaving them all to the rollup (`--no-rollup-in-ingest`).
    @Test(
        "random events in random batches over 3 partitions give every user the model's tree, whether ingest or the rollup rolls up",
        arguments: seeds, [true, false])
    func randomBatches(seed: UInt64, rollUp: Bool) async throws {
        try await IngestFixture.with { fixture in
            let partitionCount: Int32 = 3
            let users = (0..<90).map { user("r\(seed)_u\($0)") }
            var generator = RandomBadgeOperations(users: users, seed: seed)
            var random = SeededRandom(seed: seed &* 7919)
            let poisons = poisonRecords().map(\.record)
            let now = Date()

            // The three partitions' records; a user's events stay in one partition (key = user).
            var logs: [[IngestRecord]] = Array(repeating: [], count: Int(partitionCount))
            var sent: [[IngestRecord]] = Array(repeating: [], count: Int(partitionCount))
            var models: [UserID: BadgeTree] = [:]
            var uniqueEvents = 0, resends = 0, poisonCount = 0
            for index in 0..<3_000 {
                let mutation = generator.next()
                let partition = Int32(users.firstIndex(of: mutation.user) ?? 0) % partitionCount
                let slot = Int(partition)
                let offset = Int64(logs[slot].count)
                let draw = generator.integer(in: 0...99)
                if draw < 6, let earlier = sent[slot].randomElement(using: &random) {
                    // A producer retry: the same event again, at a new offset.
                    var again = earlier
                    again.offset = offset
                    logs[slot].append(again)
                    resends += 1
                } else if draw < 10 {
                    var poison = poisons[generator.integer(in: 0...(poisons.count - 1))]
                    poison.partition = partition
                    poison.offset = offset
                    logs[slot].append(poison)
                    poisonCount += 1
                } else {
                    let event = mutationRecord(mutation, id: "s\(seed)-\(index)", offset: offset, partition: partition)
                    logs[slot].append(event)
                    sent[slot].append(event)
                    uniqueEvents += 1
                    models[mutation.user, default: BadgeTree()].apply(mutation, now: now)
                }
            }

            // Consume in random-size batches that mix the partitions, keeping each one's order.
            var positions = Array(repeating: 0, count: Int(partitionCount))
            var stored: [TopicPartition: Int64] = [:]
            var applied = 0, duplicates = 0, rejected = 0, fences = 0
            var previous: (batch: PreparedBatch, expected: [TopicPartition: Int64])?
            while positions.enumerated().contains(where: { $0.element < logs[$0.offset].count }) {
                var queues: [[IngestRecord]] = []
                for slot in 0..<Int(partitionCount) {
                    let take = min(generator.integer(in: 0...60), logs[slot].count - positions[slot])
                    queues.append(Array(logs[slot][positions[slot]..<(positions[slot] + take)]))
                    positions[slot] += take
                }
                var records: [IngestRecord] = []
                while let slot = queues.indices.filter({ !queues[$0].isEmpty }).randomElement(using: &random) {
                    records.append(queues[slot].removeFirst())
                }
                guard !records.isEmpty else { continue }
                let batch = PreparedBatch(records: records, rules: testRules)
                let expected = stored
                let outcome = try await fixture.commit(batch, expected: expected, rollUp: rollUp)
                applied += outcome.applied
                duplicates += outcome.duplicates
                rejected += outcome.rejectedCount
                stored.merge(batch.nextOffsets) { _, new in new }

                // Now and then, a consumer that lost its partitions commits its last batch again.
                if let previous, generator.integer(in: 0...2) == 0 {
                    do {
                        _ = try await fixture.commit(previous.batch, expected: previous.expected, rollUp: rollUp)
                        Issue.record("a stale batch was committed")
                    } catch let error as IngestError {
                        fences += 1
                        if case .fenced = error.code {} else { Issue.record("unexpected \(error)") }
                    }
                }
                previous = (batch, expected)
                if generator.integer(in: 0...3) == 0 { try await fixture.drainDirtyUsers() }
            }
            try await fixture.drainDirtyUsers()

            #expect(applied == uniqueEvents)
            #expect(duplicates == resends)
            #expect(rejected == poisonCount)
            let partitions = (0..<partitionCount).map { TopicPartition(topic: topic, partition: $0) }
            let expectedOffsets = Dictionary(uniqueKeysWithValues: partitions.map { ($0, Int64(logs[Int($0.partition)].count)) })
            #expect(try await fixture.storedOffsets(partitions) == expectedOffsets)
            #expect(try await fixture.scalar("SELECT count(*)::int FROM rejected_record", as: Int.self) == poisonCount)
            #expect(try await fixture.scalar("SELECT count(*)::int FROM \(AppliedKeys.table)", as: Int.self) == uniqueEvents)
            #expect(try await fixture.scalar("SELECT count(DISTINCT user_id)::int FROM dirty_mark", as: Int.self) == 0)
            for id in users {
                let tree = try await fixture.store.tree(for: id)
                #expect(tree.tree == models[id, default: BadgeTree()].node(at: .root, now: now), "user \(id) (seed \(seed))")
            }
            print("seed \(seed), rollUp \(rollUp): \(uniqueEvents) events, \(resends) re-sends, \(poisonCount) poisons, \(fences) fenced re-commits")
        }
    }
}
