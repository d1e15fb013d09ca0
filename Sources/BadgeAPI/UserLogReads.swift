import BadgeCore
import Metrics
import Synchronization

/// The reads of users' change logs for the streams of one process (DESIGN §10): streams follow
/// a user by applying the versions the rollup logged, and the streams of one user that wake for
/// the same notifications share one read of the log, so a burst of notifications costs one
/// read per user, not one per stream (and ``LogReadBatches`` gathers the reads of many users
/// into one statement).
///
/// For each user with streams it counts the notifications received (a generation) and keeps the
/// highest own version they named. A read joins another in flight only if that read started at
/// the current generation or later (so it sees every version notified so far) and from a version
/// no later than its own; otherwise it reads for itself.
final class UserLogReads: Sendable {
    /// The most versions one read fetches: a stream further behind reads its tree.
    static let maximumVersions = 100

    private struct Follow {
        var watchers = 0
        var generation: UInt64 = 0
        var notified: Int64 = 0
        var read: Read?
    }

    private struct Read {
        var after: Int64
        var generation: UInt64
        var waiters: [(after: Int64, continuation: CheckedContinuation<Outcome, Never>)] = []
    }

    private enum Outcome: Sendable {
        /// Read the log; `shared`: others may join, hand them the answer.
        case lead(shared: Bool, notified: Int64)
        /// The answer of a read joined.
        case answer([OwnLayerChange]?)
    }

    private let state = Mutex<[UserID: Follow]>([:])
    private let reads = Counter(label: "reddot_api_log_reads_total")
    private let shared = Counter(label: "reddot_api_log_reads_shared_total")
    private let readsMade = Atomic<Int>(0)

    init() {}

    /// Reads of the log made since the start (not counting the streams that shared one).
    var readCount: Int { readsMade.load(ordering: .relaxed) }

    /// A stream of `user` starts: their notifications are counted from now on.
    func watch(_ user: UserID) {
        state.withLock { $0[user, default: Follow()].watchers += 1 }
    }

    /// A stream of `user` ended.
    func unwatch(_ user: UserID) {
        state.withLock { follows in
            guard var follow = follows[user] else { return }
            follow.watchers -= 1
            // Kept while a read is in flight: its waiters are resumed from here.
            follows[user] = follow.watchers > 0 || follow.read != nil ? follow : nil
        }
    }

    /// A notification for `user` arrived (naming their new own version, when it does). Call it
    /// before the user's streams are woken.
    func notified(_ user: UserID, version: Int64?) {
        state.withLock { follows in
            guard var follow = follows[user] else { return }
            follow.generation &+= 1
            if let version { follow.notified = max(follow.notified, version) }
            follows[user] = follow
        }
    }

    /// Every user may have changed (notifications were missed): counted as a notification for
    /// each watched user, so that no stream joins a read of the log that began before.
    func notifiedEveryone() {
        state.withLock { follows in
            for user in follows.keys { follows[user]?.generation &+= 1 }
        }
    }

    /// How many notifications for `user` arrived since their first stream started (0 when
    /// nobody watches them). A stream that holds a view made at one generation and sees another
    /// has a change of the user's own to take in before anything else.
    func generation(of user: UserID) -> UInt64 {
        state.withLock { $0[user]?.generation ?? 0 }
    }

    /// `user`'s logged own versions after `after`, read by `read` (from a version, at most so
    /// many) or taken from a read of the same user in flight. Nil when they cannot be had: the
    /// read failed or answered nil, or the versions stop short of the last one notified (the
    /// log misses one, or the stream is more than ``maximumVersions`` behind). Then read the tree.
    func changes(
        for user: UserID, after: Int64, read: @Sendable (_ after: Int64, _ limit: Int) async throws -> [OwnLayerChange]?
    ) async -> [OwnLayerChange]? {
        let outcome: Outcome = await withCheckedContinuation { continuation in
            let lead: Outcome? = state.withLock { follows in
                var follow = follows[user] ?? Follow()
                if var running = follow.read, running.after <= after, running.generation >= follow.generation {
                    running.waiters.append((after, continuation))
                    follow.read = running
                    follows[user] = follow
                    return nil
                }
                guard follow.read == nil else { return .lead(shared: false, notified: follow.notified) }
                follow.read = Read(after: after, generation: follow.generation)
                follows[user] = follow
                return .lead(shared: true, notified: follow.notified)
            }
            if let lead { continuation.resume(returning: lead) }
        }
        switch outcome {
        case .answer(let changes):
            shared.increment()
            return changes
        case .lead(let isShared, let notified):
            reads.increment()
            readsMade.add(1, ordering: .relaxed)
            var changes = try? await read(after, Self.maximumVersions)
            if let found = changes, (found.last?.version ?? after) < notified { changes = nil }
            guard isShared else { return changes }
            let waiters = state.withLock { follows -> [(after: Int64, continuation: CheckedContinuation<Outcome, Never>)] in
                guard var follow = follows[user], let running = follow.read else { return [] }
                follow.read = nil
                follows[user] = follow.watchers > 0 ? follow : nil
                return running.waiters
            }
            for waiter in waiters {
                waiter.continuation.resume(returning: .answer(changes.map { $0.filter { $0.version > waiter.after } }))
            }
            return changes
        }
    }
}
