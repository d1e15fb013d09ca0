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

    /// Queues every record in order and waits for every delivery report without blocking a
    /// thread: the last report (or the timeout) resumes the caller.
    ///
    /// - Returns: each record's outcome, in order: where it was stored, or why not (a record
    ///   still without a report when `timeout` passed fails with `_MSG_TIMED_OUT`).
    public func sendAll(_ records: [KafkaOutgoingRecord], timeout: Duration? = nil) async -> [Result<KafkaDelivery, KafkaError>] {
        guard !records.isEmpty else { return [] }
        let results = Mutex([Result<KafkaDelivery, KafkaError>?](repeating: nil, count: records.count))
        return await withCheckedContinuation { (continuation: CheckedContinuation<[Result<KafkaDelivery, KafkaError>], Never>) in
            let reports = PendingReports({ index, result in results.withLock { $0[index] = result } }) {
                continuation.resume(returning: results.withLock { $0.map { $0 ?? .failure(PendingReports.noReport) } })
            }
            for (index, record) in records.enumerated() {
                reports.expect(index)
                do throws(KafkaError) {
                    try produce(record) { result in reports.report(index, result) }
                } catch {
                    reports.report(index, .failure(error))
                }
            }
            reports.queueingFinished()
            if let timeout {
                DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(PendingReports.nanoseconds(timeout))) {
                    reports.expire()
                }
            }
        }
    }
}

/// The records of one `sendAll` still without a report, and what happens when the last one
/// comes in (or the rest are given up on): `whenDone` runs exactly once, after every record's
/// `onReport`.
private final class PendingReports: Sendable {
    private struct State {
        var pending: Set<Int> = []
        var queueingDone = false
        var finished = false
    }

    static let noReport = KafkaError(code: .messageTimedOut, message: "no delivery report in time")

    private let state = Mutex(State())
    private let allReported = DispatchSemaphore(value: 0)
    private let onReport: @Sendable (Int, Result<KafkaDelivery, KafkaError>) -> Void
    private let whenDone: (@Sendable () -> Void)?

    init(
        _ onReport: @escaping @Sendable (Int, Result<KafkaDelivery, KafkaError>) -> Void,
        whenDone: (@Sendable () -> Void)? = nil
    ) {
        self.onReport = onReport
        self.whenDone = whenDone
    }

    func expect(_ index: Int) {
        state.withLock { _ = $0.pending.insert(index) }
    }

    /// Passes a record's report on, unless it was given up on already.
    func report(_ index: Int, _ result: Result<KafkaDelivery, KafkaError>) {
        let (fresh, last) = state.withLock { state in
            let fresh = state.pending.remove(index) != nil
            return (fresh, fresh && Self.finishIfComplete(&state))
        }
        guard fresh else { return }
        onReport(index, result)
        if last { done() }
    }

    /// Every record is queued: from now on the last report finishes.
    func queueingFinished() {
        let last = state.withLock { state in
            state.queueingDone = true
            return Self.finishIfComplete(&state)
        }
        if last { done() }
    }

    /// Reports every record still waiting as timed out, and finishes.
    func expire() {
        let (missing, last) = state.withLock { state in
            let missing = state.pending.sorted()
            state.pending.removeAll()
            let last = !state.finished
            state.finished = true
            return (missing, last)
        }
        for index in missing { onReport(index, .failure(Self.noReport)) }
        if last { done() }
    }

    /// Blocks until every queued record has its report, or `timeout` passed; then reports the
    /// records still waiting as timed out.
    func wait(timeout: Duration?) {
        queueingFinished()
        if let timeout {
            _ = allReported.wait(timeout: .now() + .nanoseconds(Self.nanoseconds(timeout)))
        } else {
            allReported.wait()
        }
        expire()
    }

    private func done() {
        allReported.signal()
        whenDone?()
    }

    private static func finishIfComplete(_ state: inout State) -> Bool {
        guard state.queueingDone, state.pending.isEmpty, !state.finished else { return false }
        state.finished = true
        return true
    }

    /// `duration` in nanoseconds for a dispatch deadline, clamped to 0…Int.max.
    static func nanoseconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0 else { return 0 }
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return Int.max }
        let (total, sumOverflow) = whole.addingReportingOverflow(attoseconds / 1_000_000_000)
        return sumOverflow ? Int.max : Int(clamping: total)
    }
}
