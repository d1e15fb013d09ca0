import BadgeCore
import Metrics
import Synchronization

/// The reads of users' change logs that one process's streams make at about the same time,
/// gathered into one database read (DESIGN §10). A burst of notifications (a rollup round
/// commits the versions of many users at once) wakes the streams of many users; each user's
/// read (``UserLogReads``, shared by that user's streams) joins a batch here, so the burst
/// costs the database a statement or two rather than one per user.
///
/// It runs no task of its own. A read that finds fewer than ``maximumInFlight`` batches in
/// flight leads one at once, for itself and whatever waits. A read that comes while they are
/// all in flight waits; when a batch ends, the first read waiting leads the next one, for every
/// read waiting then (at most ``maximumReads``). A batch that fails answers nil to each of its
/// reads: their streams read the tree instead.
final class LogReadBatches: Sendable {
    /// How many batches are read at once (each holds a pooled connection while it reads).
    static let maximumInFlight = 2
    /// The most reads one batch takes.
    static let maximumReads = 200

    typealias Answer = [OwnLayerChange]?

    private enum Turn: Sendable {
        /// Read a batch: this read's and those waiting.
        case lead
        /// The answer a batch read for this read.
        case answer(Answer)
    }

    private struct Waiter {
        var read: LogRead
        var continuation: CheckedContinuation<Turn, Never>
    }

    private struct State {
        var waiting: [Waiter] = []
        var inFlight = 0
    }

    private let state = Mutex(State())
    private let batches = Counter(label: "reddot_api_log_read_batches_total")
    private let batchesMade = Atomic<Int>(0)
    private let readsMade = Atomic<Int>(0)

    init() {}

    /// Database reads of the log made since the start.
    var batchCount: Int { batchesMade.load(ordering: .relaxed) }

    /// Reads answered since the start (each user's read counts once, however it was batched).
    var readCount: Int { readsMade.load(ordering: .relaxed) }

    /// What `perform` answers for `read`, read alone or in a batch with others (`perform` reads
    /// the log for a list of reads and answers each, in order). Nil when the batch failed. The
    /// `perform` of the read that leads a batch reads it for all: every caller passes one that
    /// reads the same log the same way (``ChangeHub``'s store, ``UserLogReads/maximumVersions``).
    func read(_ read: LogRead, by perform: @Sendable (_ reads: [LogRead]) async throws -> [Answer]) async -> Answer {
        readsMade.add(1, ordering: .relaxed)
        let turn: Turn = await withCheckedContinuation { continuation in
            let leads = state.withLock { state -> Bool in
                guard state.inFlight < Self.maximumInFlight else {
                    state.waiting.append(Waiter(read: read, continuation: continuation))
                    return false
                }
                state.inFlight += 1
                return true
            }
            if leads { continuation.resume(returning: .lead) }
        }
        if case .answer(let answer) = turn { return answer }

        let others = state.withLock { state -> [Waiter] in
            let taken = Array(state.waiting.prefix(Self.maximumReads - 1))
            state.waiting.removeFirst(taken.count)
            return taken
        }
        let reads = [read] + others.map(\.read)
        batches.increment()
        batchesMade.add(1, ordering: .relaxed)
        var answers = (try? await perform(reads)) ?? []
        if answers.count != reads.count { answers = reads.map { _ in nil } }
        for (waiter, answer) in zip(others, answers.dropFirst()) { waiter.continuation.resume(returning: .answer(answer)) }
        // The batch's slot passes to the first read waiting, if any.
        let next = state.withLock { state -> Waiter? in
            guard !state.waiting.isEmpty else {
                state.inFlight -= 1
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.continuation.resume(returning: .lead)
        return answers[0]
    }
}
