import BadgeCore
import BadgeStore
import Dispatch
import Foundation
import LibPQ
public import Logging
import RdKafka
public import ServiceLifecycle
import Synchronization

/// `reddot ingest` as a service: the consumer loop, plus the dead-letter publisher and the
/// pruning of old event ids.
///
/// Graceful shutdown (SIGTERM): the consumer finishes its batch, commits it and closes (a
/// dynamic member leaves the group, so its partitions move at once; a static one, the default,
/// keeps them until it returns with the same id or its session times out), the dead letters
/// left are published, and `run()` returns.
public final class IngestService: Service {
    private let configuration: IngestConfiguration
    private let logger: Logger
    private let metrics = IngestMetrics()

    /// Creates the service.
    public init(configuration: IngestConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
    }

    /// Runs until graceful shutdown or cancellation; throws what ended it otherwise.
    public func run() async throws {
        try RdKafkaVersion.requireSupported()
        let producer = try KafkaProducer(configuration: configuration.kafka, logger: logger)
        try await producer.closing { try await run(producer: producer) }
    }

    private func run(producer: KafkaProducer) async throws {
        var database = configuration.database
        if database.statementTimeoutMilliseconds == nil { database.statementTimeoutMilliseconds = 60_000 }
        let pool = PGPool(configuration: database, maximumConnections: 1, logger: logger)
        defer { pool.close() }
        let (signals, signal) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let worker = IngestWorker(configuration: configuration, logger: logger, metrics: metrics, onRejections: { signal.yield() })
        let deadLetters = DeadLetterPublisher(
            pool: pool, producer: producer, topic: configuration.deadLetterTopic, logger: logger, metrics: metrics)

        guard await Self.waitForSchema(pool: pool, logger: logger) else { return }
        try await withGracefulShutdownHandler {
            try await withTaskCancellationHandler {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await worker.runOnThread() }
                    // The maintenance loop wakes on a signal: from the worker when a batch had
                    // rejections, and from this ticker every `deadLetterInterval`.
                    group.addTask { [configuration] in
                        while !Task.isCancelled {
                            try? await Task.sleep(for: configuration.deadLetterInterval)
                            signal.yield()
                        }
                    }
                    group.addTask { [configuration, logger, metrics] in
                        if configuration.rules.declaresModes {
                            await Self.storeModes(configuration.rules.modes, pool: pool, logger: logger)
                        }
                        var lastPrune = ContinuousClock.now - .seconds(3600)
                        var iterator = signals.makeAsyncIterator()
                        while !Task.isCancelled {
                            await deadLetters.publishPending()
                            if ContinuousClock.now - lastPrune > .seconds(600) {
                                lastPrune = .now
                                await Self.prune(pool: pool, retention: configuration.eventRetention, metrics: metrics, logger: logger)
                                if let retention = configuration.deadLetterRetention {
                                    await DeadLetterPublisher.prune(pool: pool, retention: retention, logger: logger)
                                }
                            }
                            _ = await iterator.next()
                        }
                    }
                    // The worker ends first (stopped or failed): stop the maintenance loop.
                    defer { group.cancelAll() }
                    try await group.next()
                    signal.finish()
                }
            } onCancel: {
                worker.stop()
            }
        } onGracefulShutdown: {
            worker.stop()
        }
        await deadLetters.publishPending()
        logger.info("ingest stopped")
    }

    /// Waits, checking every 5 s, until the schema is at the version this build's statements
    /// need (`Migrator.requiredSchemaVersion`): an ingest started before `reddot migrate up` has
    /// run waits for it, saying so, instead of failing its batches. A database that cannot be
    /// reached is left to the worker, which retries. Returns false when stopped meanwhile.
    private static func waitForSchema(pool: PGPool, logger: Logger) async -> Bool {
        while !Task.isCancelled, !Task.isShuttingDownGracefully {
            let applied = try? await pool.withConnection { connection in try Migrator.appliedSchemaVersion(on: connection) }
            guard let applied, applied < Migrator.requiredSchemaVersion else { return true }
            logger.warning(
                "the schema is at version \(applied); this build needs \(Migrator.requiredSchemaVersion): run reddot migrate up. Waiting",
                metadata: ["schema.applied": "\(applied)", "schema.required": "\(Migrator.requiredSchemaVersion)"])
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: .seconds(5)) }
        }
        return false
    }

    /// Stores the rules file's aggregation modes for the rollup (DESIGN §2), retrying every 5
    /// seconds until the database takes them; ingest does not wait for it.
    private static func storeModes(_ modes: AggregationModes, pool: PGPool, logger: Logger) async {
        while !Task.isCancelled {
            do {
                let changed = try await BadgeStore(pool: pool).storeAggregationModes(modes)
                let declared = modes.entries.map { "\($0.pattern)=\($0.mode.rawValue)" }.joined(separator: " ")
                if changed {
                    logger.notice(
                        """
                        aggregation modes stored from the rules file; aggregates counted before keep the old modes until \
                        their user changes: run reddot verify --repair to recount them now
                        """,
                        metadata: ["rules.modes": "\(declared.isEmpty ? "none" : declared)"])
                }
                return
            } catch {
                logger.error(
                    "storing the rules file's aggregation modes failed; retrying in 5 s",
                    metadata: [LibPQ.LogKey.error: "\(error)"])
                try? await Task.sleep(for: .seconds(5))
            }
        }
    }

    private static func prune(pool: PGPool, retention: Duration, metrics: IngestMetrics, logger: Logger) async {
        let cutoff = Date().addingTimeInterval(-Double(retention.components.seconds))
        do {
            let (rotated, age) = try await pool.withConnection { connection in
                let rotated = try IngestTransaction.rotateDedupeGeneration(startedBefore: cutoff, on: connection)
                return (rotated, try IngestTransaction.dedupeGenerationAge(on: connection))
            }
            metrics.dedupeGenerationAge.record(age)
            if rotated {
                logger.info("started the next dedupe generation; emptied the users' event ids of the one before it (older than the retention)")
            }
        } catch {
            logger.info("starting the next dedupe generation failed; will retry at the next prune", metadata: [LibPQ.LogKey.error: "\(error)"])
        }
        do {
            var removed = 0
            while true {
                let chunk = try await pool.withConnection { connection in
                    try IngestTransaction.pruneAppliedEvents(olderThan: cutoff, limit: 10_000, on: connection)
                }
                removed += chunk
                if chunk < 10_000 { break }
            }
            if removed > 0 {
                logger.info("pruned applied event ids, item tombstones and clear marks; folded old increments", metadata: ["ingest.pruned": "\(removed)"])
            }
        } catch {
            logger.info("pruning applied event ids failed; will retry", metadata: [LibPQ.LogKey.error: "\(error)"])
        }
    }
}
