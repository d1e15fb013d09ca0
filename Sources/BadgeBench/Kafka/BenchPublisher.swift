import BadgeCore
import Foundation
import RdKafka

/// The benches' own Kafka publishing: the warm-up, the throttled producer of `bench ingest`, the
/// open-loop producer of `bench pipeline`, and the wait for the delivery reports. Kept in this one
/// file so that the "produce, then wait for delivery reports" step can move to the producer's
/// own send-all in one place.
struct BenchPublisher: Sendable {
    let producer: KafkaProducer
    let recorder: BenchRecorder
    /// How long the producer may wait on the in-flight window with no commit before giving up.
    let stallSeconds: Double

    /// Sends one warm-up event to every partition of the mock cluster's topic (one to the topic
    /// on real brokers) and waits until ingest has committed them all: the group has joined.
    ///
    /// - Returns: each warm-up event's partition and offset.
    /// - Throws: `BenchFailure` when ingest stops or commits nothing within twice `stallSeconds`.
    func warmUp(topic: String, mockPartitions: Int32?, runID: String, user: String, path: String) async throws -> [(Int32, Int64)] {
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

    /// Publishes `workload` as fast as allowed (at most `rate` events/s when given), never more
    /// than `window` events ahead of ingest's commits; blocking, on the caller's thread.
    ///
    /// - Returns: each event's publish time.
    func publish(_ workload: BenchWorkload, topic: String, rate: Double?, window: Int, baseline: Int64) throws -> [UInt64] {
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
            try waitForWindow(
                index: index, window: window, baseline: baseline, stalledSince: &stalledSince,
                stopped: "ingest stopped while the events were being published")
            let record = KafkaOutgoingRecord(topic: topic, key: workload.keys[index], payload: workload.payloads[index])
            times[index] = BenchClock.now
            let recorder = self.recorder
            try producer.produce(record) { result in recorder.delivered(index: index, result) }
        }
        return times
    }

    /// The open-loop producer of `bench pipeline`, blocking on its own thread: event `i` is due
    /// at `start + i / rate`, whatever happens downstream.
    ///
    /// - Returns: how far, at most, an event went out behind its schedule, in nanoseconds.
    func publishOnSchedule(
        _ workload: PipelineWorkload, settings: PipelineBenchmark.Settings, start: UInt64, window: Int, baseline: Int64,
        tracker: PipelineTracker
    ) throws -> UInt64 {
        let spacing = 1e9 / settings.rate
        var behind: UInt64 = 0
        var stalledSince: UInt64?
        defer { tracker.producerCPUNanoseconds = threadCPUNanoseconds() }
        for index in 0..<settings.totalEvents {
            if recorder.hasIngestEnded { throw BenchFailure("the services stopped while the events were being published: \(recorder.ingestError ?? "")") }
            let due = start + UInt64(Double(index) * spacing)
            var now = BenchClock.now
            if due > now {
                // At least 1 ms per sleep: the events due meanwhile go out together (at 20,000/s,
                // 20 at a time), instead of one wake-up per event.
                tracker.producerCPUNanoseconds = threadCPUNanoseconds()
                usleep(UInt32(min(100_000, max(1_000, (due - now) / 1_000))))
            }
            try waitForWindow(
                index: index, window: window, baseline: baseline, stalledSince: &stalledSince,
                stopped: "the services stopped while the events were being published")
            let user = Int(workload.users[index])
            let record = KafkaOutgoingRecord(topic: settings.topic, key: PipelineWorkload.key(of: workload.users[index]), payload: workload.payloads[index])
            now = BenchClock.now
            if now > due { behind = max(behind, now - due) }
            if user < settings.streams { tracker.willPublish(index: index, user: user, path: Int(workload.paths[index]), at: now) }
            tracker.published(index: index, at: now)
            let recorder = self.recorder
            try producer.produce(record) { result in recorder.delivered(index: index, result) }
        }
        return behind
    }

    /// The mock broker keeps only the newest ~5 MB of a partition: waits while event `index`
    /// would run more than `window` events ahead of the commits, or records are dropped unread.
    ///
    /// - Throws: `BenchFailure` (`stopped`) when ingest stops, or when it commits nothing for
    ///   `stallSeconds`.
    private func waitForWindow(index: Int, window: Int, baseline: Int64, stalledSince: inout UInt64?, stopped: String) throws {
        while index - Int(recorder.committedTotal - baseline) > window {
            if recorder.hasIngestEnded { throw BenchFailure(stopped) }
            let now = BenchClock.now
            let since = stalledSince ?? now
            stalledSince = since
            if Double(now - since) / 1e9 > stallSeconds {
                throw BenchFailure("ingest committed nothing for \(Int(stallSeconds)) s")
            }
            usleep(1_000)
        }
        stalledSince = nil
    }

    /// Flushes the producer (on a thread of its own) and waits for every delivery report (flush
    /// returns when none is outstanding; the last callback may still be running on the
    /// producer's thread).
    ///
    /// - Throws: `BenchFailure` when an event was not delivered.
    func awaitDeliveries() async throws -> BenchRecorder.Deliveries {
        let producer = self.producer
        try await onThread(named: "reddot.bench.flush") { try producer.flush(timeoutMilliseconds: 120_000) }
        while !recorder.allReported { try await Task.sleep(for: .milliseconds(1)) }
        let deliveries = recorder.deliveries
        if deliveries.failures > 0 {
            throw BenchFailure("\(deliveries.failures) events were not delivered to Kafka: \(deliveries.firstFailure ?? "")")
        }
        return deliveries
    }
}
