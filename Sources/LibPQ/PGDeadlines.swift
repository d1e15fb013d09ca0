import Dispatch
import Foundation
import Synchronization

/// Runs actions once their deadline passes, for `PGPool.withConnection(deadline:)`.
///
/// One thread for the process checks every 50 ms, so arming and disarming a deadline is a
/// dictionary insert and remove under a lock: no timer, no task per call. Actions run on a global
/// dispatch queue, so that a slow one never delays the next check.
final class PGDeadlines: Sendable {
    static let shared = PGDeadlines()

    /// How often due deadlines are looked for, in microseconds: the precision of a deadline.
    static let tickMicroseconds: useconds_t = 50_000

    private struct Armed {
        let deadline: ContinuousClock.Instant
        let action: @Sendable () -> Void
    }

    private struct State {
        var nextID: UInt64 = 0
        var armed: [UInt64: Armed] = [:]
        var started = false
    }

    private let state = Mutex(State())

    /// Runs `action` once `deadline` passes, unless `disarm` is called with the returned id first.
    func arm(_ deadline: ContinuousClock.Instant, _ action: @escaping @Sendable () -> Void) -> UInt64 {
        let (id, start) = state.withLock { state -> (UInt64, Bool) in
            state.nextID += 1
            state.armed[state.nextID] = Armed(deadline: deadline, action: action)
            defer { state.started = true }
            return (state.nextID, !state.started)
        }
        if start {
            let thread = Thread { [self] in loop() }
            thread.name = "reddot.postgres.deadlines"
            thread.start()
        }
        return id
    }

    /// Forgets a deadline; its action will not run (if it has not started already).
    func disarm(_ id: UInt64) {
        _ = state.withLock { $0.armed.removeValue(forKey: id) }
    }

    private func loop() {
        while true {
            usleep(Self.tickMicroseconds)
            let now = ContinuousClock.now
            let due = state.withLock { state -> [@Sendable () -> Void] in
                guard !state.armed.isEmpty else { return [] }
                var due: [@Sendable () -> Void] = []
                for (id, armed) in state.armed where armed.deadline <= now {
                    due.append(armed.action)
                    state.armed[id] = nil
                }
                return due
            }
            for action in due { DispatchQueue.global().async(execute: action) }
        }
    }
}

/// A continuation that the first of several parties resumes; the others learn that they came late.
final class PGResumeOnce<Value: Sendable>: Sendable {
    private let continuation: Mutex<CheckedContinuation<Value, Never>?>

    init(_ continuation: CheckedContinuation<Value, Never>) {
        self.continuation = Mutex(continuation)
    }

    /// Resumes with `value` unless that happened already; returns whether this call resumed.
    @discardableResult
    func resume(_ value: Value) -> Bool {
        guard let continuation = continuation.withLock({ $0.take() }) else { return false }
        continuation.resume(returning: value)
        return true
    }
}
