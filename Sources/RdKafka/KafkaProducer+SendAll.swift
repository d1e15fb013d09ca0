import Foundation
import Synchronization

extension KafkaProducer {
    /// Queues every record in order (a key's records keep their order in its partition) and
    /// waits for the delivery report of each, blocking the calling thread: call it on a thread
    /// of your own, never on Swift's cooperative pool.
    ///
    /// `onReport` is called exactly once per record, with its position in `records` and where it
    /// was stored or why not: on the producer's thread for a delivery report, on the calling
    /// thread for a record that could not be queued, and with `_MSG_TIMED_OUT` for one still
    /// without a report when `timeout` (nil: none) passed; a report coming later is dropped.
    /// Records are read from `records` as they are queued, so a lazy sequence streams.
    ///
    /// - Returns: how many records there were.
    @discardableResult
    public func sendAll<Records: Sequence<KafkaOutgoingRecord>>(
        _ records: Records, timeout: Duration?,
        onReport: @escaping @Sendable (Int, Result<KafkaDelivery, KafkaError>) -> Void
    ) -> Int {
        let reports = PendingReports(onReport)
        var count = 0
        for record in records {
            let index = count
            count += 1
            reports.expect(index)
            do {
                try produce(record) { result in reports.report(index, result) }
            } catch {
                reports.report(index, .failure(error))
            }
        }
        reports.wait(timeout: timeout)
        return count
    }

    /// Queues every record in order and waits for every delivery report (on a thread of its
    /// own, off Swift's cooperative pool).
    ///
    /// - Returns: each record's outcome, in order: where it was stored, or why not (a record
    ///   still without a report when `timeout` passed fails with `_MSG_TIMED_OUT`).
    public func sendAll(_ records: [KafkaOutgoingRecord], timeout: Duration? = nil) async -> [Result<KafkaDelivery, KafkaError>] {
        await withCheckedContinuation { (continuation: CheckedContinuation<[Result<KafkaDelivery, KafkaError>], Never>) in
            let thread = Thread { [self] in
                let results = Mutex([Result<KafkaDelivery, KafkaError>?](repeating: nil, count: records.count))
                sendAll(records, timeout: timeout) { index, result in results.withLock { $0[index] = result } }
                continuation.resume(returning: results.withLock { $0.map { $0 ?? .failure(PendingReports.noReport) } })
            }
            thread.name = "reddot.kafka.send-all"
            thread.start()
        }
    }
}

/// The records of one `sendAll` still without a report, and the signal that the last came in.
private final class PendingReports: Sendable {
    private struct State {
        var pending: Set<Int> = []
        var queueingDone = false
    }

    static let noReport = KafkaError(code: .messageTimedOut, message: "no delivery report in time")

    private let state = Mutex(State())
    private let allReported = DispatchSemaphore(value: 0)
    private let onReport: @Sendable (Int, Result<KafkaDelivery, KafkaError>) -> Void

    init(_ onReport: @escaping @Sendable (Int, Result<KafkaDelivery, KafkaError>) -> Void) {
        self.onReport = onReport
    }

    func expect(_ index: Int) {
        state.withLock { _ = $0.pending.insert(index) }
    }

    /// Passes a record's report on, unless it was given up on already.
    func report(_ index: Int, _ result: Result<KafkaDelivery, KafkaError>) {
        let (fresh, last) = state.withLock { state in
            let fresh = state.pending.remove(index) != nil
            return (fresh, fresh && state.queueingDone && state.pending.isEmpty)
        }
        guard fresh else { return }
        onReport(index, result)
        if last { allReported.signal() }
    }

    /// Waits until every record queued has its report, or `timeout` passed; then reports the
    /// records still waiting as timed out.
    func wait(timeout: Duration?) {
        let waiting = state.withLock { state in
            state.queueingDone = true
            return !state.pending.isEmpty
        }
        guard waiting else { return }
        if let timeout {
            let nanoseconds = timeout.components.seconds * 1_000_000_000 + timeout.components.attoseconds / 1_000_000_000
            _ = allReported.wait(timeout: .now() + .nanoseconds(Int(clamping: max(0, nanoseconds))))
        } else {
            allReported.wait()
        }
        let missing = state.withLock { state in
            defer { state.pending.removeAll() }
            return state.pending.sorted()
        }
        for index in missing { onReport(index, .failure(Self.noReport)) }
    }
}
