import BadgeCore
import BadgeIngest
import BadgeStore
import Dispatch
import Foundation
import LibPQ
import Logging
import RdKafka
import ServiceLifecycle
import Synchronization

/// The ingest benchmark behind `reddot bench ingest`: a synthetic workload published to Kafka
/// while one in-process ``IngestService`` consumes it into a scratch database, timed per event
/// from `produce()` to the commit that covers it; then, on the same database, the plain batched
/// upsert of the same rows (the machine's limit) and a breakdown of ingest's own costs.
struct IngestBenchmark: Sendable {
    struct Settings: Sendable {
        var events: Int
        var users: Int
        var paths: Int
        var partitions: Int32
        var batchSize: Int
        var batchWaitMilliseconds: Int
        var rate: Double?
        var seed: UInt64
        var runID: String
        /// Kafka properties for producer and consumer (bootstrap servers included).
        var kafka: KafkaConfiguration
        var topic: String
        /// Whether the topic lives on the in-process mock cluster (bounded memory: throttle to it).
        var isMockCluster: Bool
        /// The scratch database, migrated.
        var database: PGConfiguration
    }

    let settings: Settings
    let logger: Logger

    /// How long ingest may make no progress before the benchmark gives up.
    static let stallSeconds: Double = 60

    // MARK: - phase 1: Kafka → ingest → PostgreSQL

    /// Publishes the workload while ingest consumes it; returns the timings and the checks.
    func runIngest(_ workload: BenchWorkload) async throws -> IngestMeasurement {
        let recorder = BenchRecorder(topic: settings.topic, events: workload.count)
        var configuration = IngestConfiguration(kafka: settings.kafka, database: settings.database)
        configuration.topic = settings.topic
        configuration.group = "reddot-bench-\(settings.runID)"
        configuration.deadLetterTopic = settings.topic + ".dlq"
        configuration.batchSize = settings.batchSize
        configuration.batchWaitMilliseconds = settings.batchWaitMilliseconds
        configuration.onCommit = { offsets in recorder.committed(offsets) }
        let group = configuration.group
        let service = IngestService(configuration: configuration, logger: logger)
        let serviceGroup = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [service], gracefulShutdownSignals: [], cancellationSignals: [], logger: logger))

        let measured: IngestMeasurement = try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask {
                do {
                    try await serviceGroup.run()
                    recorder.ingestEnded(error: nil)
                } catch {
                    recorder.ingestEnded(error: "\(error)")
                }
            }
            let outcome: Result<IngestMeasurement, any Error>
            do {
                outcome = .success(try await publishAndWait(workload, recorder: recorder))
            } catch {
                outcome = .failure(error)
            }
            await serviceGroup.triggerGracefulShutdown()
            try await tasks.waitForAll()
            return try outcome.get()
        }
        if let error = recorder.ingestError {
            throw BenchFailure("ingest failed: \(error)")
        }
        return try await verify(measured, group: group, expectedEvents: workload.count)
    }

    private func publishAndWait(_ workload: BenchWorkload, recorder: BenchRecorder) async throws -> IngestMeasurement {
        let producer = try KafkaProducer(configuration: settings.kafka, logger: logger)
        defer { producer.close() }

        // Warm up: one event per partition, committed, so the group has joined and the
        // database connection is open before the clock starts.
        let warmups = try await benchWarmUp(
            producer, recorder: recorder, topic: settings.topic, mockPartitions: settings.isMockCluster ? settings.partitions : nil,
            runID: settings.runID, user: "bench_warmup", path: "root.bench.warmup", stallSeconds: Self.stallSeconds)

        let topic = settings.topic
        let rate = settings.rate
        let window = settings.isMockCluster ? workload.inFlightWindow(partitions: Int(settings.partitions), batchSize: settings.batchSize) : Int.max
        let baseline = recorder.committedTotal
        let publishTimes: [UInt64] = try await onThread(named: "reddot.bench.producer") {
            var times = [UInt64](repeating: 0, count: workload.count)
            let start = BenchClock.now
            var stalledSince: UInt64?
            for index in 0..<workload.count {
                if recorder.hasIngestEnded { throw BenchFailure("ingest stopped while the events were being published") }
                if let rate {
                    let due = start + UInt64(Double(index) / rate * 1e9)
                    let now = BenchClock.now
                    if due > now { usleep(UInt32(min(100_000, (due - now) / 1_000))) }
                }
                // The mock broker keeps only the newest ~5 MB of a partition: never run further
                // ahead of the commits than the window, or records are dropped unread.
                while index - Int(recorder.committedTotal - baseline) > window {
                    if recorder.hasIngestEnded { throw BenchFailure("ingest stopped while the events were being published") }
                    let now = BenchClock.now
                    let since = stalledSince ?? now
                    stalledSince = since
                    if Double(now - since) / 1e9 > Self.stallSeconds {
                        throw BenchFailure("ingest committed nothing for \(Int(Self.stallSeconds)) s")
                    }
                    usleep(1_000)
                }
                stalledSince = nil
                let record = KafkaOutgoingRecord(topic: topic, key: workload.keys[index], payload: workload.payloads[index])
                times[index] = BenchClock.now
                try producer.produce(record) { result in recorder.delivered(index: index, result) }
            }
            try producer.flush(timeoutMilliseconds: 120_000)
            return times
        }

        // Every delivery report in (flush returns when none is outstanding; the last callback may
        // still be running on the producer's thread).
        while !recorder.allReported { try await Task.sleep(for: .milliseconds(1)) }
        let deliveries = recorder.deliveries
        if deliveries.failures > 0 {
            throw BenchFailure("\(deliveries.failures) events were not delivered to Kafka: \(deliveries.firstFailure ?? "")")
        }

        // The log-end offset of every partition written, warm-ups included.
        var ends: [Int32: Int64] = [:]
        for (partition, offset) in warmups { ends[partition] = max(ends[partition] ?? 0, offset + 1) }
        for index in 0..<workload.count {
            let partition = deliveries.partitions[index]
            ends[partition] = max(ends[partition] ?? 0, deliveries.offsets[index] + 1)
        }
        let allCommitted = try await waitForCommits(ends, recorder: recorder)

        // Each event's commit: the first commit of its partition whose next offset is past it.
        let commits = recorder.commitHistory
        var latencies: [UInt64] = []
        latencies.reserveCapacity(workload.count)
        var lastCommit: UInt64 = 0
        var uncovered = 0
        for index in 0..<workload.count {
            let offset = deliveries.offsets[index]
            guard let history = commits[deliveries.partitions[index]],
                let committedAt = Self.firstCommit(after: offset, in: history)
            else {
                uncovered += 1
                continue
            }
            lastCommit = max(lastCommit, committedAt)
            latencies.append(committedAt >= publishTimes[index] ? committedAt - publishTimes[index] : 0)
        }
        latencies.sort()
        let firstPublish = publishTimes.first ?? 0
        let elapsed = lastCommit > firstPublish ? Double(lastCommit - firstPublish) / 1e9 : 0
        return IngestMeasurement(
            seconds: elapsed, latencies: LatencySummary(sortedNanoseconds: latencies),
            partitionsWritten: ends.count, logEndOffsets: ends, warmupEvents: warmups.count,
            uncoveredEvents: uncovered, allCommitted: allCommitted, storedOffsetsMatch: false,
            appliedEvents: 0, rejectedRecords: 0)
    }


    /// Waits until every partition's commits reach its log-end offset; false when ingest stalls
    /// (no commit for ``stallSeconds``) or stops first.
    private func waitForCommits(_ ends: [Int32: Int64], recorder: BenchRecorder) async throws -> Bool {
        var lastTotal = recorder.committedTotal
        var lastProgress = BenchClock.now
        while !ends.allSatisfy({ recorder.committedNext(partition: $0.key) >= $0.value }) {
            if recorder.hasIngestEnded { return false }
            let total = recorder.committedTotal
            if total != lastTotal {
                lastTotal = total
                lastProgress = BenchClock.now
            } else if Double(BenchClock.now - lastProgress) / 1e9 > Self.stallSeconds {
                logger.error("ingest made no progress for \(Int(Self.stallSeconds)) s; giving up waiting")
                return false
            }
            try await Task.sleep(for: .milliseconds(5))
        }
        return true
    }

    static func firstCommit(after offset: Int64, in history: [(next: Int64, at: UInt64)]) -> UInt64? {
        var low = 0
        var high = history.count
        while low < high {
            let middle = (low + high) / 2
            if history[middle].next > offset { high = middle } else { low = middle + 1 }
        }
        return low < history.count ? history[low].at : nil
    }

    /// Reads back what the database holds: stored offsets against the log-end offsets, applied
    /// event ids and rejected records.
    private func verify(_ measured: IngestMeasurement, group: String, expectedEvents: Int) async throws -> IngestMeasurement {
        var measured = measured
        let topic = settings.topic
        let partitions = measured.logEndOffsets.keys.sorted().map { TopicPartition(topic: topic, partition: $0) }
        let pool = PGPool(configuration: settings.database, maximumConnections: 1, logger: logger)
        defer { pool.close() }
        let (stored, applied, rejected) = try await pool.withConnection { connection in
            let stored = try IngestStore.storedOffsets(group: group, partitions: partitions, on: connection)
            let applied = try connection.query(PGStatement("bench.count_applied", "SELECT count(*) FROM applied_event", prepared: false))
                .singleRow().decode(0, as: Int.self)
            let rejected = try connection.query(PGStatement("bench.count_rejected", "SELECT count(*) FROM rejected_record", prepared: false))
                .singleRow().decode(0, as: Int.self)
            return (stored, applied, rejected)
        }
        measured.storedOffsetsMatch = partitions.allSatisfy { stored[$0] == measured.logEndOffsets[$0.partition] }
        measured.storedOffsets = Dictionary(uniqueKeysWithValues: stored.map { ($0.key.partition, $0.value) })
        measured.appliedEvents = applied - measured.warmupEvents
        measured.rejectedRecords = rejected
        return measured
    }

    // MARK: - phase 2: the plain batched upsert

    /// Upserts the workload's rows, batch by batch as ingest saw them, into a fresh table shaped
    /// like `badge_state`: one writer, one statement (one transaction) per batch.
    func runUpsert(_ workload: BenchWorkload) async throws -> UpsertMeasurement {
        let batches = workload.upsertBatches(size: settings.batchSize)
        let rows = batches.reduce(0) { $0 + $1.users.count }
        var database = settings.database
        database.sessionSettings += BadgeStore.recommendedSessionSettings
        let pool = PGPool(configuration: database, maximumConnections: 1, logger: logger)
        defer { pool.close() }
        let seconds = try await pool.withConnection { connection in
            try connection.execute(
                script: """
                    DROP TABLE IF EXISTS bench_upsert;
                    CREATE TABLE bench_upsert (LIKE badge_state INCLUDING ALL);
                    """,
                name: "bench.create_upsert_table")
            let statement = PGStatement(
                "bench.upsert",
                """
                INSERT INTO bench_upsert AS s (user_id, path, count)
                SELECT * FROM unnest($1::text[], $2::ltree[], $3::bigint[])
                ON CONFLICT (user_id, path) DO UPDATE SET count = excluded.count, updated_at = now()
                """)
            let start = BenchClock.now
            for batch in batches {
                _ = try connection.query(statement, [batch.users, batch.paths, batch.counts])
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
        let batchSize = settings.batchSize
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

// MARK: - workload

/// N synthetic direct-operation events, encoded as producers send them and keyed by user: 90%
/// `incr` by 1, 10% `set` with a count of 0–9, over `users` × `paths` (`root.bench.p0…`), drawn
/// from a seeded generator so that runs are comparable.
struct BenchWorkload: Sendable {
    let keys: [[UInt8]]
    let payloads: [[UInt8]]
    let userIndexes: [Int32]
    let pathIndexes: [Int32]
    /// `incr`: the amount; `set`: the count.
    let counts: [Int64]
    let userPrefix: String
    let incrementCount: Int
    let payloadBytes: Int

    var count: Int { payloads.count }

    init(events: Int, users: Int, paths: Int, seed: UInt64, idPrefix: String, userPrefix: String) throws {
        var generator = SplitMix64(seed: seed)
        let encoder = EventEncoder()
        let badgePaths = try (0..<paths).map { try BadgePath(validating: "root.bench.p\($0)") }
        var keys: [[UInt8]] = []
        var payloads: [[UInt8]] = []
        var userIndexes: [Int32] = []
        var pathIndexes: [Int32] = []
        var counts: [Int64] = []
        keys.reserveCapacity(events)
        payloads.reserveCapacity(events)
        var increments = 0
        var bytes = 0
        for index in 0..<events {
            let user = Int32(generator.next() % UInt64(users))
            let path = Int32(generator.next() % UInt64(paths))
            let isSet = generator.next() % 10 == 0
            let amount: Int64 = isSet ? Int64(generator.next() % 10) : 1
            let userText = "\(userPrefix)\(user)"
            let event = BadgeEvent(
                id: try EventID(validating: "\(idPrefix)-\(index)"),
                audience: .users([try UserID(validating: userText)]),
                body: .operation(path: badgePaths[Int(path)], operation: isSet ? .set(count: amount, icon: nil) : .increment(by: amount)))
            let payload = encoder.encode(event)
            bytes += payload.count
            if !isSet { increments += 1 }
            keys.append(Array(userText.utf8))
            payloads.append(payload)
            userIndexes.append(user)
            pathIndexes.append(path)
            counts.append(amount)
        }
        self.keys = keys
        self.payloads = payloads
        self.userIndexes = userIndexes
        self.pathIndexes = pathIndexes
        self.counts = counts
        self.userPrefix = userPrefix
        self.incrementCount = increments
        self.payloadBytes = bytes
    }

    /// How many events may be published but not yet committed on the mock cluster: about 2 MB
    /// of records per partition (it keeps ~5 MB), and at least four batches.
    func inFlightWindow(partitions: Int, batchSize: Int) -> Int {
        let average = count > 0 ? payloadBytes / count : 100
        let perRecord = average + 60
        let perPartition = 2_000_000 / perRecord
        return max(4 * batchSize, partitions * perPartition)
    }

    struct UpsertBatch: Sendable {
        var users: [String] = []
        var paths: [String] = []
        var counts: [Int64] = []
    }

    /// The rows in batches of `size` events, each batch's rows distinct by (user, path) as one
    /// `INSERT … ON CONFLICT DO UPDATE` requires (the last tuple of a pair wins).
    func upsertBatches(size: Int) -> [UpsertBatch] {
        var batches: [UpsertBatch] = []
        var start = 0
        while start < count {
            let end = min(count, start + size)
            var slot: [Int64: Int] = [:]
            var batch = UpsertBatch()
            for index in start..<end {
                let key = Int64(userIndexes[index]) << 32 | Int64(pathIndexes[index])
                if let existing = slot[key] {
                    batch.counts[existing] = counts[index]
                    continue
                }
                slot[key] = batch.users.count
                batch.users.append("\(userPrefix)\(userIndexes[index])")
                batch.paths.append("root.bench.p\(pathIndexes[index])")
                batch.counts.append(counts[index])
            }
            batches.append(batch)
            start = end
        }
        return batches
    }
}

/// Sebastiano Vigna's SplitMix64: a small, fast, seedable generator.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var mixed = state
        mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        return mixed ^ (mixed >> 31)
    }
}

// MARK: - recording

/// Monotonic nanoseconds.
enum BenchClock {
    static var now: UInt64 { DispatchTime.now().uptimeNanoseconds }
}

/// What the producer's delivery reports and ingest's commit hook tell the benchmark, from their
/// own threads.
final class BenchRecorder: Sendable {
    struct Deliveries: Sendable {
        var partitions: [Int32]
        var offsets: [Int64]
        var reported = 0
        var failures = 0
        var firstFailure: String?
    }

    private let topic: String
    private let events: Int
    private let deliveryState: Mutex<Deliveries>
    /// Per partition, each commit's next offset and time, in commit order.
    private let commits = Mutex<[Int32: [(next: Int64, at: UInt64)]]>([:])
    /// The sum of every partition's latest committed next offset.
    private let total = Atomic<Int64>(0)
    private let ended = Atomic<Bool>(false)
    private let endError = Mutex<String?>(nil)

    init(topic: String, events: Int) {
        self.topic = topic
        self.events = events
        deliveryState = Mutex(Deliveries(partitions: [Int32](repeating: -1, count: events), offsets: [Int64](repeating: -1, count: events)))
    }

    func delivered(index: Int, _ result: Result<KafkaDelivery, KafkaError>) {
        deliveryState.withLock { state in
            state.reported += 1
            switch result {
            case .success(let delivery):
                state.partitions[index] = delivery.partition
                state.offsets[index] = delivery.offset
            case .failure(let error):
                state.failures += 1
                if state.firstFailure == nil { state.firstFailure = "\(error)" }
            }
        }
    }

    /// ``IngestConfiguration/onCommit``: called on the consumer thread after each batch.
    func committed(_ offsets: [TopicPartition: Int64]) {
        let now = BenchClock.now
        var added: Int64 = 0
        commits.withLock { commits in
            for (partition, next) in offsets where partition.topic == topic {
                let previous = commits[partition.partition]?.last?.next ?? 0
                guard next > previous else { continue }
                added += next - previous
                commits[partition.partition, default: []].append((next, now))
            }
        }
        total.add(added, ordering: .releasing)
    }

    func ingestEnded(error: String?) {
        endError.withLock { $0 = error }
        ended.store(true, ordering: .releasing)
    }

    var hasIngestEnded: Bool { ended.load(ordering: .acquiring) }
    var ingestError: String? { endError.withLock { $0 } }
    var committedTotal: Int64 { total.load(ordering: .acquiring) }
    var allReported: Bool { deliveryState.withLock { $0.reported >= events } }
    var deliveries: Deliveries { deliveryState.withLock { $0 } }
    var commitHistory: [Int32: [(next: Int64, at: UInt64)]] { commits.withLock { $0 } }

    func committedNext(partition: Int32) -> Int64 {
        commits.withLock { $0[partition]?.last?.next ?? 0 }
    }
}

/// Runs a blocking body on a thread of its own (never Swift's cooperative pool).
func onThread<T: Sendable>(named name: String, _ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
        let thread = Thread { continuation.resume(with: Result { try body() }) }
        thread.name = name
        thread.start()
    }
}

/// A benchmark that could not measure what it set out to; the message says why.
struct BenchFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

// MARK: - results

struct LatencySummary: Sendable {
    var p50Milliseconds: Double = 0
    var p99Milliseconds: Double = 0
    var maxMilliseconds: Double = 0

    init(sortedNanoseconds values: [UInt64]) {
        guard !values.isEmpty else { return }
        p50Milliseconds = Self.milliseconds(values[Self.rank(0.50, count: values.count)])
        p99Milliseconds = Self.milliseconds(values[Self.rank(0.99, count: values.count)])
        maxMilliseconds = Self.milliseconds(values[values.count - 1])
    }

    /// Nearest rank: the smallest value with at least `quantile` of the values at or below it.
    static func rank(_ quantile: Double, count: Int) -> Int {
        let rank = Int((quantile * Double(count)).rounded(.up))
        return min(count - 1, max(0, rank - 1))
    }

    static func milliseconds(_ nanoseconds: UInt64) -> Double { Double(nanoseconds) / 1e6 }
}

struct IngestMeasurement: Sendable {
    var seconds: Double
    var latencies: LatencySummary
    var partitionsWritten: Int
    var logEndOffsets: [Int32: Int64]
    var warmupEvents: Int
    var uncoveredEvents: Int
    var allCommitted: Bool
    var storedOffsetsMatch: Bool
    var storedOffsets: [Int32: Int64] = [:]
    var appliedEvents: Int
    var rejectedRecords: Int
}

struct UpsertMeasurement: Sendable {
    var rows: Int
    var distinctRows: Int
    var seconds: Double
}

struct BreakdownMeasurement: Sendable {
    var events: Int
    var decodeSeconds: Double
    var transactionSeconds: Double
}

/// Sends one warm-up event to every partition of the mock cluster's topic (one to the topic on
/// real brokers) and waits until ingest has committed them all: the group has joined.
///
/// - Returns: each warm-up event's partition and offset.
/// - Throws: `BenchFailure` when ingest stops or commits nothing within twice `stallSeconds`.
func benchWarmUp(
    _ producer: KafkaProducer, recorder: BenchRecorder, topic: String, mockPartitions: Int32?, runID: String,
    user: String, path: String, stallSeconds: Double
) async throws -> [(Int32, Int64)] {
    let encoder = EventEncoder()
    let targets: [Int32?] = mockPartitions.map { count in (0..<count).map { $0 } } ?? [nil]
    var delivered: [(Int32, Int64)] = []
    for (index, partition) in targets.enumerated() {
        let event = BadgeEvent(
            id: try EventID(validating: "\(runID)-warmup-\(index)"),
            audience: .users([try UserID(validating: user)]),
            body: .operation(path: try BadgePath(validating: path), operation: .increment(by: 1)))
        let record = KafkaOutgoingRecord(topic: topic, partition: partition, key: Array(user.utf8), payload: encoder.encode(event))
        let delivery = try await producer.send(record)
        delivered.append((delivery.partition, delivery.offset))
    }
    let deadline = BenchClock.now + UInt64(stallSeconds * 2 * 1e9)
    while !delivered.allSatisfy({ recorder.committedNext(partition: $0.0) > $0.1 }) {
        if recorder.hasIngestEnded { throw BenchFailure("ingest stopped before it consumed anything: \(recorder.ingestError ?? "")") }
        if BenchClock.now > deadline {
            throw BenchFailure("ingest did not commit the warm-up events within \(Int(stallSeconds * 2)) s; is the consumer group joining?")
        }
        try await Task.sleep(for: .milliseconds(5))
    }
    return delivered
}
