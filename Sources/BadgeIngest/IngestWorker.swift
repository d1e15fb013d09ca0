import Backoff
import BadgeCore
import BadgeStore
import Foundation
import LibPQ
import Logging
import RdKafka
import Synchronization

/// The consumer loop: poll, batch, decode, write each batch in one transaction, repeat.
///
/// A consumer thread and `--writers` writer threads. The consumer thread polls Kafka, serves
/// rebalances (inside `poll`), and decodes each batch; the writers (`BatchWriters`, each with
/// its own thread and connection) commit it to PostgreSQL, its partitions split between them. At
/// most one batch is being written while the next is read and decoded, so decoding overlaps the
/// database's work. The consumer thread hands batch N+1 over only after batch N is done, with the offsets batch N stored as
/// the expected ones: if N was fenced, N+1 is dropped too and the stored offsets are read
/// again. Rebalances wait for the batch in flight, so a partition is never given up while one
/// of its batches is being written.
final class IngestWorker: @unchecked Sendable {
    private let configuration: IngestConfiguration
    private let logger: Logger
    private let metrics: IngestMetrics
    private let stopRequested = Atomic<Bool>(false)
    private let onRejections: @Sendable () -> Void
    private let writer: BatchWriters

    // Confined to the consumer thread.
    private var readConnection: DatabaseSession
    /// The stored offset of each owned partition, as of the last batch handed to the writer.
    private var expected: [TopicPartition: Int64] = [:]
    private var owned: Set<TopicPartition> = []
    private var pending: [KafkaRecord] = []
    /// The offset after the last pending record of each partition that has any.
    private var pendingNext: [TopicPartition: Int64] = [:]

    init(configuration: IngestConfiguration, logger: Logger, metrics: IngestMetrics, onRejections: @escaping @Sendable () -> Void) {
        self.configuration = configuration
        self.logger = logger
        self.metrics = metrics
        self.onRejections = onRejections
        self.writer = BatchWriters(
            (0..<max(1, configuration.settings.writers)).map { [stretch = MergingStretch()] _ in
                BatchWriter(configuration: configuration, logger: logger, metrics: metrics, stretch: stretch)
            })
        self.readConnection = DatabaseSession(logger: logger)
    }

    /// Asks the loop to finish its batch, commit, close the consumer and return.
    func stop() {
        stopRequested.store(true, ordering: .releasing)
        writer.requestStop()
    }

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
        do {
            try consume()
        } catch let error as KafkaError where error.isFencedInstance {
            throw KafkaError(
                code: error.code,
                message: "another consumer of group '\(configuration.group)' joined with this consumer's instance id "
                    + "'\(configuration.kafka["group.instance.id"] ?? configuration.instanceID ?? "")' (group.instance.id), so the broker fenced this one: "
                    + "give each ingest its own --instance-id (REDDOT_INSTANCE_ID). \(error.message)",
                isRetriable: error.isRetriable, isFatal: error.isFatal)
        }
    }

    private func consume() throws {
        defer {
            readConnection.close()
            writer.close()
        }
        let kafka = configuration.consumerKafka
        let consumer = try KafkaConsumer(
            configuration: kafka,
            rebalance: KafkaRebalanceHandler(
                assigned: { [unowned self] partitions in assigned(partitions) },
                revoked: { [unowned self] partitions in revoked(partitions) }),
            logger: logger)
        defer {
            writer.waitUntilIdle()  // never close the consumer under a batch in flight
            consumer.close()
        }
        try consumer.subscribe([configuration.topic])
        logger.info(
            "ingest started",
            metadata: [
                LogKey.topic: "\(configuration.topic)", "kafka.group": "\(configuration.group)",
                "kafka.group_instance_id": "\(kafka["group.instance.id"] ?? "none (dynamic member)")",
                "kafka.session_timeout_ms": "\(kafka["session.timeout.ms"] ?? "")",
                "librdkafka.version": "\(RdKafkaVersion.text)",
            ])

        let wait = Duration.milliseconds(configuration.settings.batchWaitMilliseconds)
        let whenIdle = configuration.settings.batchWhenIdle
        let minimumWait = Duration.milliseconds(configuration.settings.batchMinWaitMilliseconds)
        var batchStarted = ContinuousClock.now
        while !isStopping {
            let remaining = pending.isEmpty ? Duration.milliseconds(200) : wait - (ContinuousClock.now - batchStarted)
            var milliseconds = max(0, min(200, remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000))
            // With --batch-when-idle, a batch that has records and has waited --batch-min-wait-ms
            // goes once the writers are free, no record came within a millisecond and fewer
            // records wait in Kafka than it holds (`caughtUp`); until then it looks for more a
            // millisecond at a time, to see the writers finish.
            let writersIdle = whenIdle && !pending.isEmpty && ContinuousClock.now - batchStarted >= minimumWait && writer.isIdle
            if whenIdle && !pending.isEmpty { milliseconds = min(milliseconds, 1) }
            let record = try consumer.poll(timeoutMilliseconds: Int32(milliseconds))
            if let record {
                metrics.consumed.increment()
                if owned.contains(record.topicPartition) {
                    if pending.isEmpty { batchStarted = .now }
                    pending.append(record)
                    if record.offset >= 0 { pendingNext[record.topicPartition] = record.offset == .max ? .max : record.offset + 1 }
                }
            }
            let trigger: IngestMetrics.BatchTrigger? =
                if pending.isEmpty { nil }
                else if pending.count >= configuration.settings.batchSize { .full }
                else if ContinuousClock.now - batchStarted >= wait { .waited }
                else if writersIdle && record == nil && caughtUp(consumer) { .idle }
                else { nil }
            if let trigger {
                metrics.batchFormed(trigger)
                try flush(consumer)
            }
            try writer.throwIfFailed()
        }
        if !pending.isEmpty {
            metrics.batchFormed(.stop)
            try flush(consumer)
        }
        writer.waitUntilIdle()
        try writer.throwIfFailed()
        logger.info("ingest stopping: batches committed, closing the consumer")
    }

    // MARK: - rebalance (called inside poll, on the consumer thread)

    private func assigned(_ partitions: [TopicPartition]) -> [TopicPartition: Int64] {
        writer.waitUntilIdle()
        owned.formUnion(partitions)
        guard let stored = readStoredOffsets(partitions) else { return [:] }
        return adopt(stored, for: partitions)
    }

    /// Takes the stored offsets as the expected ones and returns where each partition starts
    /// (a partition with none starts at the beginning or the end, as configured).
    private func adopt(_ stored: [TopicPartition: Int64], for partitions: [TopicPartition]) -> [TopicPartition: Int64] {
        var start: [TopicPartition: Int64] = [:]
        for partition in partitions {
            expected[partition] = stored[partition]
            start[partition] = stored[partition] ?? startingOffset
        }
        return start
    }

    private func revoked(_ partitions: [TopicPartition]) {
        writer.waitUntilIdle()  // the batch in flight still owns them: let it finish
        let gone = Set(partitions)
        owned.subtract(gone)
        for partition in gone { expected[partition] = nil }
        pending.removeAll { gone.contains($0.topicPartition) }
        for partition in gone { pendingNext[partition] = nil }
    }

    private var startingOffset: Int64 {
        configuration.startFromEnd ? KafkaConsumer.offsetEnd : KafkaConsumer.offsetBeginning
    }

    /// The stored offsets, retrying until the database answers (or nil when stopping).
    private func readStoredOffsets(_ partitions: [TopicPartition]) -> [TopicPartition: Int64]? {
        var backoff = Backoff(initial: .milliseconds(100), maximum: .seconds(5))
        while true {
            do {
                let connection = try readConnection.connection(configuration.database)
                return try IngestStore.storedOffsets(group: configuration.group, partitions: partitions, on: connection)
            } catch {
                readConnection.dropIfBroken()
                if isStopping { return nil }
                let delay = backoff.next()
                logger.info(
                    "cannot read stored offsets; retrying",
                    metadata: [LibPQ.LogKey.error: "\(error)", "retry.delay_ms": "\(Backoff.milliseconds(delay))"])
                Backoff.sleepOnThread(delay)
            }
        }
    }

    // MARK: - batches

    /// Decodes the pending records (while the writers may still be busy with the previous
    /// batch), then hands them to the writers: the batch's partitions are split between them, so
    /// each partition's records stay in one transaction, in order.
    ///
    /// With `configuration.settings.rollUp`, a batch brings its users current itself when it
    /// has caught up, or nearly and its users are spread (`rollsUpItself`); otherwise (ingest is
    /// behind) it leaves them to the rollup, whose round brings many batches of a user current
    /// at once.
    private func flush(_ consumer: KafkaConsumer) throws {
        var batches = writer.split(pending).map { PreparedBatch(records: $0, rules: configuration.rules) }
        for index in batches.indices { batches[index].waiting = waiting(after: batches[index].nextOffsets, consumer) }
        let rollUp = configuration.settings.rollUp && rollsUpItself(batches)
        pending.removeAll(keepingCapacity: true)
        pendingNext.removeAll(keepingCapacity: true)
        writer.waitUntilIdle()
        try writer.throwIfFailed()
        if writer.takeFenced() {
            // The previous batch was refused: this one was read past it, so drop it as well.
            metrics.fenced.increment()
            resynchronize(consumer)
            return
        }
        let onRejections = self.onRejections
        for (index, batch) in batches.enumerated() {
            let expectedNow = expected.filter { batch.nextOffsets[$0.key] != nil }
            for (partition, next) in batch.nextOffsets { expected[partition] = next }  // if it commits
            writer.writers[index].write(batch, expected: expectedNow, rollUp: rollUp) { nextOffsets in
                try? consumer.commit(nextOffsets)  // best effort, for lag tools; throws only once closed
                if !batch.rejected.isEmpty { onRejections() }
            }
        }
    }

    /// Whether fewer records wait in Kafka after the pending ones, in their partitions, than
    /// are pending, by the high watermarks of the consumer's last fetches (no request to the
    /// broker); false while a watermark is unknown. A batch that goes when the writers are free
    /// (`--batch-when-idle`) asks this: behind a backlog, the local queue can be empty between
    /// fetches while the partitions hold more, and small batches then would only slow ingest
    /// down (at 10,000 events/s over 100,000 users, past this machine's capacity, without this
    /// check p99 was 6.3 and 3.0 s against 2.9 and 3.1 s with `--no-batch-when-idle`, and more
    /// users were left to the rollup, BENCHMARKS.md); such a batch fills as before.
    private func caughtUp(_ consumer: KafkaConsumer) -> Bool {
        let behind = waiting(after: pendingNext, consumer)
        guard behind.count == pendingNext.count else { return false }
        // Each term capped: the sum never overflows.
        return behind.values.reduce(Int64(0)) { $0 + min($1, Int64(Int32.max)) } < pending.count
    }

    /// How many records wait in each partition after `nextOffsets` (each partition's next
    /// offset), by the high watermarks of the consumer's last fetches (no request to the
    /// broker); a partition whose watermark is not known yet is absent.
    private func waiting(after nextOffsets: [TopicPartition: Int64], _ consumer: KafkaConsumer) -> [TopicPartition: Int64] {
        var waiting: [TopicPartition: Int64] = [:]
        for (partition, next) in nextOffsets {
            // Both checked: an absurd watermark must not trap the subtraction.
            guard let high = consumer.cachedHighWatermark(partition), high >= 0, next >= 0 else { continue }
            waiting[partition] = max(0, high - next)
        }
        return waiting
    }

    /// Whether `batches` (one flush, every writer's part) bring their users current themselves:
    /// when fewer than `--batch-size` records wait in their partitions after them, counted over
    /// all of them (`waiting(after:)`: ingest has caught up), or fewer than
    /// `--rollup-in-ingest-within` (default and at least `--batch-size`) and their users are
    /// spread (`PreparedBatch.usersAreSpread`: on average at most two events a user). False
    /// while a partition's high watermark is unknown. A full batch alone does not say it: at a
    /// rate below `--batch-size` per `--batch-wait-ms`, a backlog's batches are flushed by their
    /// wait.
    ///
    /// A batch or two behind under load, a round of the rollup would gather no second write of
    /// spread users either; rolling them up in the batch saves the queue's rows, but slows
    /// ingest while it is behind. At 10,000 events/s over 100,000 users (past this machine's
    /// capacity) four batches helped in some runs and hurt in others, so the default stays one
    /// (BENCHMARKS.md, issue 25's twelfth part). Users with many events a batch (200 users at
    /// 20,000 events/s) are always left to the rollup when behind: its rounds gather them.
    private func rollsUpItself(_ batches: [PreparedBatch]) -> Bool {
        let settings = configuration.settings
        // Both at most Int64.max / 2, whatever a library user set: the sum below never overflows.
        let caughtUp = min(Int64(clamping: settings.batchSize), Int64.max / 2)
        let limit = max(caughtUp, settings.rollUpWithinRecords)
        var waiting: Int64 = 0
        for batch in batches {
            for partition in batch.nextOffsets.keys {
                guard let behind = batch.waiting[partition] else { return false }
                // Each term at most the limit, and out at the limit: the sum never overflows.
                waiting += min(behind, limit)
                if waiting >= limit { return false }
            }
        }
        return waiting < caughtUp || PreparedBatch.usersAreSpread(batches)
    }

    /// After a fence: re-read the stored offsets of the partitions still owned, and seek there.
    private func resynchronize(_ consumer: KafkaConsumer) {
        logger.info("a batch was fenced: another consumer owns a partition; re-reading stored offsets")
        pending.removeAll()
        pendingNext.removeAll()
        let partitions = Array(owned)
        guard let stored = readStoredOffsets(partitions) else { return }
        do {
            try consumer.seek(adopt(stored, for: partitions))
        } catch {
            logger.info("seek after a fence failed; the next rebalance will fix the positions", metadata: [RdKafka.LogKey.error: "\(error)"])
        }
    }
}

/// Several writers, each with its own thread and connection, that work on disjoint partitions.
struct BatchWriters: Sendable {
    let writers: [BatchWriter]

    init(_ writers: [BatchWriter]) { self.writers = writers }

    /// Splits records into one group per writer by partition (records of one partition stay
    /// together and in order); empty groups are left out.
    func split(_ records: [KafkaRecord]) -> [[KafkaRecord]] {
        guard writers.count > 1 else { return [records] }
        let partitions = Set(records.map(\.topicPartition)).sorted()
        var writerOf: [TopicPartition: Int] = [:]
        for (index, partition) in partitions.enumerated() { writerOf[partition] = index % writers.count }
        var groups = [[KafkaRecord]](repeating: [], count: writers.count)
        for record in records { groups[writerOf[record.topicPartition] ?? 0].append(record) }
        return groups.filter { !$0.isEmpty }
    }

    func waitUntilIdle() { writers.forEach { $0.waitUntilIdle() } }

    /// Whether no writer has a batch in flight (without waiting).
    var isIdle: Bool { writers.allSatisfy(\.isIdle) }

    func throwIfFailed() throws { try writers.forEach { try $0.throwIfFailed() } }

    /// Whether any writer's last batch was fenced (and forgets it for all).
    func takeFenced() -> Bool { writers.map { $0.takeFenced() }.contains(true) }

    func requestStop() { writers.forEach { $0.stopRequested.store(true, ordering: .releasing) } }

    func close() { writers.forEach { $0.close() } }
}

/// Writes batches to PostgreSQL on a thread of its own, one at a time.
final class BatchWriter: @unchecked Sendable {
    private let configuration: IngestConfiguration
    private let logger: Logger
    private let metrics: IngestMetrics
    private let queue = DispatchQueue(label: "reddot.ingest.writer")
    private let idle = DispatchSemaphore(value: 1)
    private let fenced = Atomic<Bool>(false)
    private let busy = Atomic<Bool>(false)
    private let failure = Mutex<(any Error)?>(nil)
    let stopRequested = Atomic<Bool>(false)
    private let stretch: MergingStretch
    // Confined to the writer queue.
    private var session: DatabaseSession
    /// The most users a batch brings current itself (`--rollup-in-ingest-users`, else sized to
    /// the server's lock table when first needed); confined to the writer queue.
    private var rollUpLimit: Int?

    init(configuration: IngestConfiguration, logger: Logger, metrics: IngestMetrics, stretch: MergingStretch) {
        self.configuration = configuration
        self.stretch = stretch
        self.logger = logger
        self.metrics = metrics
        self.session = DatabaseSession(logger: logger)
    }

    /// Blocks until no batch is in flight.
    func waitUntilIdle() {
        idle.wait()
        idle.signal()
    }

    /// Whether no batch is in flight (without waiting).
    var isIdle: Bool { !busy.load(ordering: .acquiring) }

    /// Whether the last batch was fenced (and forgets it).
    func takeFenced() -> Bool { fenced.exchange(false, ordering: .acquiringAndReleasing) }

    /// Rethrows a failure of the last batch (a non-retriable database error).
    func throwIfFailed() throws {
        if let error = failure.withLock({ $0 }) { throw error }
    }

    /// Starts writing `batch` (with `rollUp`, bringing its users current in its transaction
    /// where it can); `committed` runs on the writer thread after it commits, with the batch's
    /// next offsets. Call only when idle.
    func write(
        _ batch: PreparedBatch, expected: [TopicPartition: Int64], rollUp: Bool,
        committed: @escaping @Sendable ([TopicPartition: Int64]) -> Void
    ) {
        idle.wait()
        busy.store(true, ordering: .releasing)
        queue.async { [self] in
            defer {
                busy.store(false, ordering: .releasing)
                idle.signal()
            }
            let started = ContinuousClock.now
            do {
                switch try commit(batch, expected: expected, rollUp: rollUp) {
                case .outcome(let outcome):
                    record(outcome, size: batch.records.count, since: started)
                    committed(batch.nextOffsets)
                    configuration.onCommit?(batch.nextOffsets)
                case .byEarlierAttempt:
                    committed(batch.nextOffsets)
                    configuration.onCommit?(batch.nextOffsets)
                case .fenced(let error):
                    logger.info("batch fenced", metadata: [LibPQ.LogKey.error: "\(error)"])
                    fenced.store(true, ordering: .releasing)
                }
            } catch {
                failure.withLock { $0 = error }
            }
        }
    }

    func close() {
        waitUntilIdle()
        queue.sync { session.close() }
    }

    private enum Committed {
        case outcome(BatchOutcome)
        case byEarlierAttempt
        case fenced(IngestError)
    }

    private func record(_ outcome: BatchOutcome, size: Int, since started: ContinuousClock.Instant) {
        metrics.rewrites.increment(by: outcome.rewrites)
        metrics.applied.increment(by: outcome.applied)
        metrics.duplicates.increment(by: outcome.duplicates)
        metrics.erased.increment(by: outcome.erased)
        metrics.usersRolledUp.increment(by: outcome.rolledUp)
        metrics.usersLeft.increment(by: max(0, outcome.users - outcome.rolledUp))
        for (reason, count) in outcome.rejected { metrics.rejected(reason, count: count) }
        metrics.batchSize.record(size)
        let elapsed = (ContinuousClock.now - started).components
        metrics.batchLatency.recordNanoseconds(elapsed.seconds * 1_000_000_000 + elapsed.attoseconds / 1_000_000_000)
    }

    /// `rollUpLimit`, read once: the flag's, else `IngestTransaction.rollUpLimit(writers:on:)`'s.
    private func rollUpLimit(on connection: PGConnection) throws(PGError) -> Int {
        if let rollUpLimit { return rollUpLimit }
        let settings = configuration.settings
        let (limit, source): (Int, String)
        if let users = settings.rollUpUsers {
            (limit, source) = (users, "flag")
        } else {
            (limit, source) = (try IngestTransaction.rollUpLimit(writers: settings.writers, on: connection), "lock table")
        }
        logger.info(
            "a batch brings at most \(limit) users current itself",
            metadata: ["ingest.rollup_users": "\(limit)", "ingest.rollup_users_from": "\(source)"])
        rollUpLimit = limit
        return limit
    }

    /// Writes the batch in one transaction, retrying transient database errors (reconnecting
    /// as needed). A retry after an ambiguous COMMIT finds the offsets already advanced: that is
    /// this batch, committed by the earlier attempt.
    private func commit(_ batch: PreparedBatch, expected: [TopicPartition: Int64], rollUp: Bool) throws -> Committed {
        var attempt = 0
        var backoff = Backoff(initial: .milliseconds(50), maximum: .seconds(5))
        let group = configuration.group
        while true {
            do {
                let connection = try session.connection(configuration.database)
                let newRowsFirst = stretch.newRowsFirst
                let limit = rollUp ? try rollUpLimit(on: connection) : 0
                let outcome = try connection.withTransaction { connection in
                    try IngestStore.commit(
                        batch, group: group, expectedOffsets: expected, newRowsFirst: newRowsFirst, rollUp: rollUp, rollUpLimit: limit,
                        on: connection)
                }
                stretch.record(rewritten: outcome.rewrites > 0, merged: !newRowsFirst && !batch.accepted.isEmpty)
                return .outcome(outcome)
            } catch let error as IngestError {
                if attempt > 0,
                    let connection = try? session.connection(configuration.database),
                    let stored = try? IngestStore.storedOffsets(group: group, partitions: Array(batch.nextOffsets.keys), on: connection),
                    stored == batch.nextOffsets
                {
                    return .byEarlierAttempt
                }
                return .fenced(error)
            } catch let error as PGError where error.isRetriable || error.code == .connectionLost {
                session.dropIfBroken()
                attempt += 1
                metrics.commitRetries.increment()
                if stopRequested.load(ordering: .acquiring), attempt >= 10 {
                    logger.info("giving up the last batch while stopping; it will be read again", metadata: [LibPQ.LogKey.error: "\(error)"])
                    throw error
                }
                let delay = backoff.next()
                logger.info(
                    "transient database error; retrying the batch",
                    metadata: [
                        LibPQ.LogKey.error: "\(error)", "retry.attempt": "\(attempt)", "retry.delay_ms": "\(Backoff.milliseconds(delay))",
                    ])
                Backoff.sleepOnThread(delay)
            }
        }
    }
}

/// How many batches ingest's writers still write with merging inserts only, shared by them all.
/// After a batch's plain inserts met a stored row (see
/// `IngestTransaction.applyEvents(_:into:newRowsFirst:on:)`), the next `Self.batches` batches
/// that have events merge from the start: a stream that keeps repeating keys (duplicate ids,
/// increments at one time) pays for a failed plain insert once every 17 batches, whichever
/// writer its partitions go to, not every time.
final class MergingStretch: Sendable {
    static let batches = 16
    private let left = Mutex(0)

    /// Whether the next batch tries plain inserts first.
    var newRowsFirst: Bool { left.withLock { $0 == 0 } }

    /// After a committed batch: `rewritten` when its plain inserts met a stored row; `merged`
    /// when it had events and merged from the start.
    func record(rewritten: Bool, merged: Bool) {
        left.withLock { left in
            if rewritten {
                left = Self.batches
            } else if merged, left > 0 {
                left -= 1
            }
        }
    }
}

/// One database connection, opened on first use and again after it broke.
struct DatabaseSession {
    let logger: Logger
    private var current: PGConnection?

    init(logger: Logger) { self.logger = logger }

    mutating func connection(_ configuration: PGConfiguration) throws(PGError) -> PGConnection {
        if let current, current.isOpen { return current }
        current?.close()
        var settings = configuration
        settings.sessionSettings += BadgeStore.recommendedSessionSettings
        if settings.statementTimeoutMilliseconds == nil { settings.statementTimeoutMilliseconds = 60_000 }
        let fresh = try PGConnection.connect(settings, logger: logger)
        current = fresh
        return fresh
    }

    mutating func dropIfBroken() {
        if let current, !current.isReusable {
            current.close()
            self.current = nil
        }
    }

    mutating func close() {
        current?.close()
        current = nil
    }
}
