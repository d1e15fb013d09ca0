import Synchronization

/// Each event's produce time and the time a stream first showed it. The n-th event on a (user,
/// path) implies a count of n there; a stream event showing a count c at that path makes every
/// pending event with an implied count ≤ c visible.
final class PipelineTracker: Sendable {
    private struct State {
        var producedAt: [UInt64]
        var visibleAt: [UInt64]
        var impliedCount: [Int64]
        /// Per (user, path): events published so far, the indexes of the events in order, and how
        /// many of them are visible.
        var published: [Int64]
        var pending: [[Int32]]
        var visibleHead: [Int]
        var tracked = 0
        var visible = 0
    }

    private let paths: Int
    private let state: Mutex<State>
    private let producerCPU = Atomic<UInt64>(0)

    init(events: Int, users: Int, paths: Int) {
        self.paths = paths
        state = Mutex(
            State(
                producedAt: [UInt64](repeating: 0, count: events), visibleAt: [UInt64](repeating: 0, count: events),
                impliedCount: [Int64](repeating: 0, count: events), published: [Int64](repeating: 0, count: users * paths),
                pending: [[Int32]](repeating: [], count: users * paths), visibleHead: [Int](repeating: 0, count: users * paths)))
    }

    /// Called just before the `produce()` of an event of a user with a stream.
    func willPublish(index: Int, user: Int, path: Int, at time: UInt64) {
        let key = user * paths + path
        state.withLock { state in
            state.published[key] += 1
            state.impliedCount[index] = state.published[key]
            state.pending[key].append(Int32(index))
            state.tracked += 1
        }
    }

    /// Called just before every event's `produce()`.
    func published(index: Int, at time: UInt64) {
        state.withLock { $0.producedAt[index] = time }
    }

    /// A stream of `user` showed these counts at `time`.
    func shown(user: Int, counts: [(path: Int, count: Int64)], at time: UInt64) {
        state.withLock { state in
            for (path, count) in counts where path < paths {
                let key = user * paths + path
                var head = state.visibleHead[key]
                let pending = state.pending[key]
                while head < pending.count, state.impliedCount[Int(pending[head])] <= count {
                    state.visibleAt[Int(pending[head])] = time
                    head += 1
                    state.visible += 1
                }
                state.visibleHead[key] = head
            }
        }
    }

    var visibleCount: Int { state.withLock { $0.visible } }
    var trackedCount: Int { state.withLock { $0.tracked } }
    var times: (producedAt: [UInt64], visibleAt: [UInt64]) { state.withLock { ($0.producedAt, $0.visibleAt) } }

    /// The producer thread's CPU time so far (it updates it before each sleep).
    var producerCPUNanoseconds: UInt64 {
        get { producerCPU.load(ordering: .relaxed) }
        set { producerCPU.store(newValue, ordering: .relaxed) }
    }
}

/// Samples of the rollup's `reddot_rollup_lag_seconds` timer, with the time each was recorded;
