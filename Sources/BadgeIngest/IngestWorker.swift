import BadgeCore
import BadgeStore
import Foundation
import LibPQ
import Logging
import RdKafka
import Synchronization

/// The consumer loop: poll, batch, write each batch in one transaction, repeat. It runs on a
/// thread of its own; the rebalance handler runs on the same thread (inside `poll`), so the
/// loop's state needs no lock: between two batches, partitions come and go.
final class IngestWorker: @unchecked Sendable {
    private let configuration: IngestConfiguration
    private let logger: Logger
    private let metrics: IngestMetrics
    private let stopRequested = Atomic<Bool>(false)
    private let onRejections: @Sendable () -> Void

    // Confined to the worker thread.
    private var connection: PGConnection?
    /// The stored offset of each owned partition, as this consumer last wrote or read it.
    private var expected: [TopicPartition: Int64] = [:]
    private var owned: Set<TopicPartition> = []
    private var pending: [KafkaRecord] = []

    init(configuration: IngestConfiguration, logger: Logger, metrics: IngestMetrics, onRejections: @escaping @Sendable () -> Void) {
        self.configuration = configuration
        self.logger = logger
        self.metrics = metrics
        self.onRejections = onRejections
    }

    /// Asks the loop to finish its batch, commit, close the consumer and return.
    func stop() { stopRequested.store(true, ordering: .releasing) }

    private var isStopping: Bool { stopRequested.load(ordering: .acquiring) }

    /// Runs the loop on a new thread until `stop()`; throws what ended it otherwise.
    func runOnThread() async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let thread = Thread { [self] in
                continuation.resume(with: Result { try run() })
            }
            thread.name = "reddot.ingest.consumer"
            thread.start()
        }
    }

    private func run() throws {
        defer {
            connection?.close()
            connection = nil
        }
        var kafka = configuration.kafka
        kafka.set("group.id", configuration.group)
        if kafka["statistics.interval.ms"] == nil { kafka.set("statistics.interval.ms", "5000") }
        let consumer = try KafkaConsumer(
            configuration: kafka,
            rebalance: KafkaRebalanceHandler(
                assigned: { [unowned self] partitions in assigned(partitions) },
                revoked: { [unowned self] partitions in revoked(partitions) }),
            logger: logger)
        defer { consumer.close() }
        try consumer.subscribe([configuration.topic])
        logger.info(
            "ingest started",
            metadata: [
                LogKey.topic: "\(configuration.topic)", "kafka.group": "\(configuration.group)",
                "librdkafka.version": "\(RdKafkaVersion.text)",
            ])

        let wait = Duration.milliseconds(configuration.batchWaitMilliseconds)
        var batchStarted = ContinuousClock.now
        while !isStopping {
            let remaining = pending.isEmpty ? Duration.milliseconds(200) : wait - (ContinuousClock.now - batchStarted)
            let timeout = Int32(max(0, min(200, remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000)))
            if let record = try consumer.poll(timeoutMilliseconds: timeout) {
                metrics.consumed.increment()
                if owned.contains(record.topicPartition) {
                    if pending.isEmpty { batchStarted = .now }
                    pending.append(record)
                }
            }
            if pending.count >= configuration.batchSize || (!pending.isEmpty && ContinuousClock.now - batchStarted >= wait) {
                try flush(consumer)
            }
        }
        if !pending.isEmpty { try flush(consumer) }
        logger.info("ingest stopping: batch committed, closing the consumer")
    }

    // MARK: - rebalance (called inside poll, on this thread)

    private func assigned(_ partitions: [TopicPartition]) -> [TopicPartition: Int64] {
        owned.formUnion(partitions)
        guard let stored = readStoredOffsets(partitions) else { return [:] }
        var start: [TopicPartition: Int64] = [:]
        for partition in partitions {
            if let offset = stored[partition] {
                expected[partition] = offset
                start[partition] = offset
            } else {
                expected[partition] = nil
                start[partition] = configuration.startFromEnd ? KafkaConsumer.offsetEnd : KafkaConsumer.offsetBeginning
            }
        }
        return start
    }

    private func revoked(_ partitions: [TopicPartition]) {
        let gone = Set(partitions)
        owned.subtract(gone)
        for partition in gone { expected[partition] = nil }
        pending.removeAll { gone.contains($0.topicPartition) }
    }

    /// The stored offsets, retrying until the database answers (or nil when stopping).
    private func readStoredOffsets(_ partitions: [TopicPartition]) -> [TopicPartition: Int64]? {
        var delay = 100
        while true {
            do {
                return try IngestStore.storedOffsets(group: configuration.group, partitions: partitions, on: try database())
            } catch {
                dropConnectionIfBroken()
                if isStopping { return nil }
                logger.warning(
                    "cannot read stored offsets; retrying", metadata: [LibPQ.LogKey.error: "\(error)", "retry.delay_ms": "\(delay)"])
                usleep(UInt32(delay) * 1000)
                delay = min(5_000, delay * 2)
            }
        }
    }

    // MARK: - batches

    private enum Committed {
        case outcome(BatchOutcome)
        case byEarlierAttempt
        case fenced(IngestError)
    }

    private func flush(_ consumer: KafkaConsumer) throws {
        let started = ContinuousClock.now
        let batch = PreparedBatch(records: pending, rules: configuration.rules)
        let expectedNow = expected.filter { batch.nextOffsets[$0.key] != nil }
        switch try commit(batch, expected: expectedNow) {
        case .outcome(let outcome):
            record(outcome, size: batch.records.count, since: started)
            advance(batch, consumer)
        case .byEarlierAttempt:
            advance(batch, consumer)
        case .fenced(let error):
            metrics.fenced.increment()
            logger.warning("batch fenced: another consumer owns a partition; re-reading stored offsets", metadata: [LibPQ.LogKey.error: "\(error)"])
            resynchronize(consumer)
        }
        pending.removeAll(keepingCapacity: true)
    }

    private func advance(_ batch: PreparedBatch, _ consumer: KafkaConsumer) {
        for (partition, next) in batch.nextOffsets { expected[partition] = next }
        consumer.commit(batch.nextOffsets)  // best effort, for lag tools
        configuration.onCommit?(batch.nextOffsets)
        if !batch.rejected.isEmpty { onRejections() }
    }

    private func record(_ outcome: BatchOutcome, size: Int, since started: ContinuousClock.Instant) {
        metrics.applied.increment(by: outcome.applied)
        metrics.duplicates.increment(by: outcome.duplicates)
        for (reason, count) in outcome.rejected { metrics.rejected(reason, count: count) }
        metrics.batchSize.record(size)
        let elapsed = (ContinuousClock.now - started).components
        metrics.batchLatency.recordNanoseconds(elapsed.seconds * 1_000_000_000 + elapsed.attoseconds / 1_000_000_000)
    }

    /// Writes the batch in one transaction, retrying transient database errors (reconnecting
    /// as needed). A retry after an ambiguous COMMIT finds the offsets already advanced: that is
    /// this batch, committed by the earlier attempt.
    private func commit(_ batch: PreparedBatch, expected expectedNow: [TopicPartition: Int64]) throws -> Committed {
        var attempt = 0
        var delay = 50
        while true {
            do {
                let connection = try database()
                let group = configuration.group
                let outcome = try connection.withTransaction { connection in
                    try IngestStore.commit(batch, group: group, expectedOffsets: expectedNow, on: connection)
                }
                return .outcome(outcome)
            } catch let error as IngestError {
                if attempt > 0, let stored = try? IngestStore.storedOffsets(
                    group: configuration.group, partitions: Array(batch.nextOffsets.keys), on: database()),
                    stored == batch.nextOffsets
                {
                    return .byEarlierAttempt
                }
                return .fenced(error)
            } catch let error as PGError where error.isRetriable || error.code == .connectionLost {
                dropConnectionIfBroken()
                attempt += 1
                metrics.commitRetries.increment()
                if isStopping, attempt >= 10 {
                    logger.error("giving up the last batch while stopping; it will be read again", metadata: [LibPQ.LogKey.error: "\(error)"])
                    throw error
                }
                logger.warning(
                    "transient database error; retrying the batch",
                    metadata: [LibPQ.LogKey.error: "\(error)", "retry.attempt": "\(attempt)", "retry.delay_ms": "\(delay)"])
                usleep(UInt32(delay) * 1000)
                delay = min(5_000, delay * 2)
            }
        }
    }

    /// After a fence: forget the batch, re-read the stored offsets of the partitions still
    /// owned, and seek there.
    private func resynchronize(_ consumer: KafkaConsumer) {
        let partitions = Array(owned)
        guard let stored = readStoredOffsets(partitions) else { return }
        var positions: [TopicPartition: Int64] = [:]
        for partition in partitions {
            expected[partition] = stored[partition]
            positions[partition] = stored[partition] ?? (configuration.startFromEnd ? KafkaConsumer.offsetEnd : KafkaConsumer.offsetBeginning)
        }
        do {
            try consumer.seek(positions)
        } catch {
            logger.warning("seek after a fence failed; the next rebalance will fix the positions", metadata: [RdKafka.LogKey.error: "\(error)"])
        }
    }

    // MARK: - database

    private func database() throws(PGError) -> PGConnection {
        if let connection, connection.isOpen { return connection }
        connection?.close()
        var settings = configuration.database
        settings.sessionSettings += BadgeStore.recommendedSessionSettings
        if settings.statementTimeoutMilliseconds == nil { settings.statementTimeoutMilliseconds = 60_000 }
        let fresh = try PGConnection.connect(settings, logger: logger)
        connection = fresh
        return fresh
    }

    private func dropConnectionIfBroken() {
        if let connection, !connection.isReusable {
            connection.close()
            self.connection = nil
        }
    }
}
