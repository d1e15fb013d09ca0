import BadgeIngest
import BadgeStore
import LibPQ
import RdKafka

extension IngestBenchmark {
    // MARK: - phase 2: the plain batched upsert

    /// Upserts the workload's rows, batch by batch as ingest saw them, into a fresh table shaped
    /// like `badge_state`: one writer, one statement (one transaction) per batch.
    func runUpsert(_ workload: BenchWorkload) async throws -> UpsertMeasurement {
        let batches = workload.upsertBatches(size: settings.ingest.batchSize)
        let rows = batches.reduce(0) { $0 + $1.users.count }
        var database = settings.database
        database.sessionSettings += BadgeStore.recommendedSessionSettings
        let pool = PGPool(configuration: database, maximumConnections: 1, logger: logger)
        defer { pool.close() }
        let seconds = try await pool.withConnection { connection in
            try connection.createUpsertBaselineTable()
            let start = BenchClock.now
            for batch in batches {
                try connection.upsertBaseline(users: batch.users, paths: batch.paths, counts: batch.counts)
            }
            return Double(BenchClock.now - start) / 1e9
        }
        return UpsertMeasurement(rows: workload.count, distinctRows: rows, seconds: seconds)
    }

    // MARK: - phase 3: where ingest's time goes

    /// Decodes a fresh copy of the workload (other users, other ids) into batches on one thread
    /// (timed), then writes those batches with ingest's own transaction (offsets, dedupe, badge
    /// writes, dirty marks), one writer, no Kafka (timed).
    func runBreakdown(_ workload: BenchWorkload) async throws -> BreakdownMeasurement {
        let topic = "reddot.bench.sql"
        let partitions = Int64(settings.partitions)
        var records: [KafkaRecord] = []
        records.reserveCapacity(workload.count)
        for index in 0..<workload.count {
            let partition = Int32(Int64(index) % partitions)
            let offset = Int64(index) / partitions
            records.append(
                KafkaRecord(
                    topic: topic, partition: partition, offset: offset, key: workload.keys[index],
                    payload: workload.payloads[index]))
        }
        let batchSize = settings.ingest.batchSize
        let decodeStart = BenchClock.now
        var batches: [PreparedBatch] = []
        var index = 0
        while index < records.count {
            let end = min(records.count, index + batchSize)
            batches.append(PreparedBatch(records: Array(records[index..<end]), rules: .empty))
            index = end
        }
        let decodeSeconds = Double(BenchClock.now - decodeStart) / 1e9

        var database = settings.database
        database.sessionSettings += BadgeStore.recommendedSessionSettings
        let pool = PGPool(configuration: database, maximumConnections: 1, logger: logger)
        defer { pool.close() }
        let group = "reddot-bench-sql-\(settings.runID)"
        let preparedBatches = batches
        let transactionSeconds = try await pool.withConnection { connection in
            var expected: [TopicPartition: Int64] = [:]
            let start = BenchClock.now
            for batch in preparedBatches {
                let expectedNow = expected.filter { batch.nextOffsets[$0.key] != nil }
                _ = try connection.withTransaction { connection in
                    try IngestStore.commit(batch, group: group, expectedOffsets: expectedNow, on: connection)
                }
                for (partition, next) in batch.nextOffsets { expected[partition] = next }
            }
            return Double(BenchClock.now - start) / 1e9
        }
        return BreakdownMeasurement(events: workload.count, decodeSeconds: decodeSeconds, transactionSeconds: transactionSeconds)
    }
}

/// What phase 2 measured: the plain batched upsert.
struct UpsertMeasurement: Sendable {
    var rows: Int
    var distinctRows: Int
    var seconds: Double
}

/// What phase 3 measured: decoding alone, ingest's transactions alone.
struct BreakdownMeasurement: Sendable {
    var events: Int
    var decodeSeconds: Double
    var transactionSeconds: Double
}
