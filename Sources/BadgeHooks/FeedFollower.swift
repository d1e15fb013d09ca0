import Backoff
import BadgeCore
import Foundation
import Logging
import RdKafka
import Synchronization

/// Reads the change feed (`reddot.changes`) in a consumer group on a thread of its own, hands
/// each batch of readable records to `handle` (retried with backoff until it succeeds or the
/// follower stops), then commits the batch's offsets. A crash between the two reads the batch
/// again: `handle` must make nothing new of a record it has seen (both users of it keep a
/// position per user).
final class FeedFollower: Sendable {
    let kafka: KafkaConfiguration
    let topic: String
    let group: String
    let logger: Logger
    let stopping: Atomic<Bool> = Atomic(false)
    private let unreadable: @Sendable () -> Void

    init(kafka: KafkaConfiguration, topic: String, group: String, logger: Logger, unreadable: @escaping @Sendable () -> Void) {
        (self.kafka, self.topic, self.group, self.logger, self.unreadable) = (kafka, topic, group, logger, unreadable)
    }

    func stop() { stopping.store(true, ordering: .relaxed) }

    private var isStopping: Bool { stopping.load(ordering: .relaxed) }

    /// Follows until ``stop()``, on a thread of its own; throws when the consumer cannot be made.
    func run(_ handle: @escaping @Sendable ([ChangeRecord]) async throws -> Void) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let thread = Thread { continuation.resume(with: Result { try self.follow(handle) }) }
            thread.name = "reddot.feed.\(group)"
            thread.start()
        }
    }

    private func follow(_ handle: @escaping @Sendable ([ChangeRecord]) async throws -> Void) throws {
        var kafka = kafka
        kafka.set("group.id", group)
        kafka.setGroupTimerDefaults()
        if kafka["auto.offset.reset"] == nil { kafka.set("auto.offset.reset", "earliest") }
        let consumer = try KafkaConsumer(
            configuration: kafka, rebalance: KafkaRebalanceHandler(assigned: { _ in [:] }, revoked: { _ in }), logger: logger)
        defer { consumer.close() }
        try consumer.subscribe([topic])
        logger.info("following the change feed", metadata: ["topic": "\(topic)", "kafka.group": "\(group)"])
        var backoff = Backoff(initial: .milliseconds(200), maximum: .seconds(10), jitter: true)
        while !isStopping {
            var batch: [KafkaRecord] = []
            let deadline = ContinuousClock.now + .milliseconds(100)
            while batch.count < 500, ContinuousClock.now < deadline, !isStopping {
                if let record = try consumer.poll(timeoutMilliseconds: batch.isEmpty ? 200 : 20) { batch.append(record) }
            }
            guard !batch.isEmpty else { continue }
            let records = decode(batch)
            while !isStopping {
                do {
                    if !records.isEmpty { try blocking { try await handle(records) } }
                    backoff.reset()
                    break
                } catch {
                    logger.warning("handling a batch of the change feed failed; retrying", metadata: ["kafka.group": "\(group)", RedDotLogKey.error: "\(error)"])
                    Backoff.sleepOnThread(backoff.next(), stopWhen: { self.isStopping })
                }
            }
            guard !isStopping else { return }
            var next: [TopicPartition: Int64] = [:]
            for record in batch { next[record.topicPartition] = max(next[record.topicPartition] ?? 0, record.offset + 1) }
            do {
                try consumer.commitSynchronously(next)
            } catch {
                // The batch is handled; the next reader of these partitions makes nothing new of it.
                logger.warning("committing the change feed's offsets failed", metadata: ["kafka.group": "\(group)", RedDotLogKey.error: "\(error)"])
            }
        }
    }

    private func decode(_ batch: [KafkaRecord]) -> [ChangeRecord] {
        var records: [ChangeRecord] = []
        for record in batch {
            // A tombstone (an erased user's key) carries nothing.
            guard let payload = record.payload else { continue }
            switch ChangeRecord.decode(payload) {
            case .success(let change): records.append(change)
            case .failure(let problem):
                unreadable()
                logger.warning(
                    "a change feed record cannot be read; skipped",
                    metadata: ["partition": "\(record.partition)", "offset": "\(record.offset)", RedDotLogKey.error: "\(problem)"])
            }
        }
        return records
    }

    /// Runs `body` from the follower's thread and waits for it (never on the cooperative pool).
    private func blocking(_ body: @escaping @Sendable () async throws -> Void) throws {
        let semaphore = DispatchSemaphore(value: 0)
        let outcome = Mutex<(any Error)??>(nil)
        Task {
            do {
                try await body()
                outcome.withLock { $0 = .some(nil) }
            } catch {
                outcome.withLock { $0 = .some(error) }
            }
            semaphore.signal()
        }
        semaphore.wait()
        if let failure = outcome.withLock({ $0 }) ?? nil { throw failure }
    }
}
