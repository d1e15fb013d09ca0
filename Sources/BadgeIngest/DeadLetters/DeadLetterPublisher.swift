import BadgeStore
import Foundation
import LibPQ
import Logging
import RdKafka
import Synchronization

/// Publishes rejected records from the table to the dead-letter topic, marking each published
/// in the same transaction that locked it: a crash between commit and publish loses none (the
/// row stays unpublished) and concurrent publishers never send one twice, though a crash after
/// sending but before marking sends it again (at least once).
struct DeadLetterPublisher: Sendable {
    let pool: PGPool
    let producer: KafkaProducer
    let topic: String
    let logger: Logger
    let metrics: IngestMetrics

    func publishPending() async {
        do {
            while try await publishChunk(limit: 500) == 500 {}
            while try await publishTombstones(limit: 500) == 500 {}
        } catch {
            logger.info("publishing dead letters failed; will retry", metadata: [LibPQ.LogKey.error: "\(error)"])
        }
    }

    /// Sends a tombstone (the user's key, no value) to the dead-letter topic for up to `limit`
    /// erased users that have not had one, then stamps them; returns how many (a crash between
    /// the two, or a second ingest process, sends one again: harmless). A dead letter is keyed as its producer keyed the event: producers that key by
    /// user id have every dead letter of an erased user dropped by a compacted topic.
    private func publishTombstones(limit: Int) async throws -> Int {
        let (producer, topic) = (self.producer, self.topic)
        let sent = try await pool.withTransaction { connection in
            let users = try DeadLetterStore.pendingTombstones(limit: limit, on: connection)
            guard !users.isEmpty else { return 0 }
            let failure = Mutex<KafkaError?>(nil)
            producer.sendAll(users.lazy.map { KafkaOutgoingRecord(topic: topic, key: Array($0.utf8), payload: nil) }, timeout: .seconds(30)) { _, result in
                if case .failure(let error) = result { failure.withLock { $0 = $0 ?? error } }
            }
            if let failure = failure.withLock({ $0 }) { throw failure }
            try DeadLetterStore.markTombstonesPublished(users, on: connection)
            return users.count
        }
        if sent > 0 {
            logger.info("sent erased users' tombstones to the dead-letter topic", metadata: [RdKafka.LogKey.topic: "\(topic)", "ingest.tombstones": "\(sent)"])
        }
        return sent
    }

    /// Publishes up to `limit` records; returns how many.
    private func publishChunk(limit: Int) async throws -> Int {
        let producer = self.producer
        let topic = self.topic
        let published = try await pool.withTransaction { connection in
            let rows = try DeadLetterStore.unpublished(limit: limit, on: connection)
            guard !rows.isEmpty else { return 0 }
            // Blocks this connection's thread (never a Swift concurrency thread) for the reports.
            let failure = Mutex<KafkaError?>(nil)
            producer.sendAll(rows.lazy.map { DeadLetterPublisher.record(for: $0, topic: topic) }, timeout: .seconds(30)) { _, result in
                if case .failure(let error) = result { failure.withLock { $0 = $0 ?? error } }
            }
            if let failure = failure.withLock({ $0 }) { throw failure }
            try DeadLetterStore.markPublished(ids: rows.map(\.id), on: connection)
            return rows.count
        }
        if published > 0 {
            metrics.deadLettersPublished.increment(by: published)
            logger.info("published dead letters", metadata: [RdKafka.LogKey.topic: "\(topic)", "ingest.dead_letters": "\(published)"])
        }
        return published
    }

    static func record(for row: StoredRejection, topic: String) -> KafkaOutgoingRecord {
        var headers = [
            KafkaHeader(name: "reddot.reason", text: row.reason),
            KafkaHeader(name: "reddot.message", text: row.message),
            KafkaHeader(name: "reddot.original.topic", text: row.record.topic),
            KafkaHeader(name: "reddot.original.partition", text: String(row.record.partition)),
            KafkaHeader(name: "reddot.original.offset", text: String(row.record.offset)),
        ]
        if let eventID = row.eventID { headers.append(KafkaHeader(name: "reddot.event.id", text: eventID)) }
        return KafkaOutgoingRecord(topic: topic, key: row.record.key, payload: row.record.payload, headers: headers)
    }

    /// Deletes dead letters published more than `retention` ago, 10,000 at most a call.
    static func prune(pool: PGPool, retention: Duration, logger: Logger) async {
        let cutoff = Date().addingTimeInterval(-Double(retention.components.seconds))
        do {
            let removed = try await pool.withConnection { connection in try DeadLetterStore.prune(olderThan: cutoff, limit: 10_000, on: connection) }
            if removed > 0 { logger.info("pruned published dead letters past their retention", metadata: ["ingest.pruned_dead_letters": "\(removed)"]) }
        } catch {
            logger.info("pruning dead letters failed; will retry", metadata: [LibPQ.LogKey.error: "\(error)"])
        }
    }
}
