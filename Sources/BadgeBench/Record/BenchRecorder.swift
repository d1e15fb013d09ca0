import RdKafka
import Synchronization

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

    /// Whether every partition's commits reached its end in `ends` (partition → next offset).
    func committedAll(_ ends: [Int32: Int64]) -> Bool {
        ends.allSatisfy { committedNext(partition: $0.key) >= $0.value }
    }

    /// The log-end offset of every partition written: the delivered events' and the warm-ups'.
    func logEndOffsets(warmups: [(Int32, Int64)], events: Int) -> [Int32: Int64] {
        let deliveries = self.deliveries
        var ends: [Int32: Int64] = [:]
        for (partition, offset) in warmups { ends[partition] = max(ends[partition] ?? 0, offset + 1) }
        for index in 0..<events {
            let partition = deliveries.partitions[index]
            ends[partition] = max(ends[partition] ?? 0, deliveries.offsets[index] + 1)
        }
        return ends
    }

    /// The time of the first commit in `history` whose next offset is past `offset`: the commit
    /// that covers the record at `offset`; nil when none does.
    static func firstCommit(after offset: Int64, in history: [(next: Int64, at: UInt64)]) -> UInt64? {
        var low = 0
        var high = history.count
        while low < high {
            let middle = (low + high) / 2
            if history[middle].next > offset { high = middle } else { low = middle + 1 }
        }
        return low < history.count ? history[low].at : nil
    }
}
