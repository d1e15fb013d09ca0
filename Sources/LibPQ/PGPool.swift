import Dispatch
public import Logging
import Synchronization

/// A pool of `PGConnection`s that leases each connection to one task at a time.
///
/// Blocking libpq calls never run on Swift's cooperative thread pool: every leased body runs on
/// the connection's own serial dispatch queue, and the awaiting task is resumed when it returns.
/// Cancelling the awaiting task cancels the statement running on the server. A connection that
/// broke, or that a body left inside a transaction, is closed instead of being reused.
public final class PGPool: Sendable {
    /// The pool's settings.
    public let configuration: PGConfiguration
    /// The most connections open at once.
    public let maximumConnections: Int
    /// The logger for connection events.
    public let logger: Logger
    private let state: Mutex<State>

    private struct Entry: @unchecked Sendable {
        let connection: PGConnection
        let queue: DispatchQueue
    }

    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<Grant, any Error>
        /// The `PGDeadlines` id of its deadline, if it has one.
        let deadlineID: UInt64?

        /// Hands it `grant` (its deadline no longer applies).
        func resume(_ grant: Grant) {
            if let deadlineID { PGDeadlines.shared.disarm(deadlineID) }
            continuation.resume(returning: grant)
        }

        /// Fails it with `error`.
        func resume(throwing error: any Error) {
            if let deadlineID { PGDeadlines.shared.disarm(deadlineID) }
            continuation.resume(throwing: error)
        }
    }

    /// What `acquire` was given: an idle connection, or the right to open a new one.
    private enum Grant: @unchecked Sendable {
        case idle(Entry)
        case open
    }

    private struct State: ~Copyable {
        var idle: [Entry] = []
        var open = 0
        var waiters: [Waiter] = []
        var nextWaiterID: UInt64 = 0
        var closed = false
    }

    /// Creates a pool; connections are opened lazily, on first use.
    public init(configuration: PGConfiguration, maximumConnections: Int = 4, logger: Logger) {
        self.configuration = configuration
        self.maximumConnections = max(1, maximumConnections)
        self.logger = logger
        self.state = Mutex(State())
    }

    /// Leases a connection to `body`, which runs on the connection's own thread.
    ///
    /// With a `deadline`, the call gives up when it passes, with `PGError` `.timedOut`: while
    /// waiting for a free connection, while opening one, or while `body` runs. A running statement
    /// is then cancelled on the server; the connection goes back to the pool (or is closed) when
    /// `body` has returned, even if the server never answers the cancel. A deadline is checked
    /// every 50 ms. `.timedOut` does not say that `body` had no effect: it may still finish, or
    /// commit, after the caller was answered.
    ///
    /// - Throws: whatever `body` throws; `PGError` `.connectionFailed` when no connection can be
    ///   opened; `.timedOut` when the deadline passed first; `.poolClosed` after `close()`;
    ///   `CancellationError` when cancelled while waiting.
    @discardableResult
    public func withConnection<T: Sendable>(
        deadline: ContinuousClock.Instant? = nil, _ body: @escaping @Sendable (PGConnection) throws -> T
    ) async throws -> T {
        let entry = try await acquire(deadline: deadline)
        entry.connection.resetCancellation()
        if Task.isCancelled {
            release(entry)
            throw CancellationError()
        }
        let lease = Lease(entry.connection)
        let outcome: Result<T, any Error> = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, any Error>, Never>) in
                let once = PGResumeOnce(continuation)
                let deadlineID = deadline.map { deadline in
                    PGDeadlines.shared.arm(deadline) {
                        if once.resume(.failure(PGError(code: .timedOut, message: "the database did not answer in time"))) {
                            lease.cancelUntilDone()
                        }
                    }
                }
                entry.queue.async {
                    let result = Result { try body(entry.connection) }
                    lease.done()
                    if let deadlineID { PGDeadlines.shared.disarm(deadlineID) }
                    self.release(entry)
                    once.resume(result)
                }
            }
        } onCancel: {
            lease.cancelUntilDone()
        }
        return try outcome.get()
    }

    /// Leases a connection and runs `body` in one transaction on it.
    @discardableResult
    public func withTransaction<T: Sendable>(
        _ isolation: PGIsolationLevel = .readCommitted,
        _ body: @escaping @Sendable (PGConnection) throws -> T
    ) async throws -> T {
        try await withConnection { connection in
            try connection.withTransaction(isolation, body)
        }
    }

    /// Closes idle connections and fails waiting and later leases with `.poolClosed`; leased
    /// connections are closed when they come back.
    public func close() {
        let (idle, waiters) = state.withLock { state -> ([Entry], [Waiter]) in
            state.closed = true
            defer {
                state.idle = []
                state.waiters = []
            }
            state.open -= state.idle.count
            return (state.idle, state.waiters)
        }
        for entry in idle { entry.queue.async { entry.connection.close() } }
        for waiter in waiters {
            waiter.resume(throwing: PGError(code: .poolClosed, message: "the connection pool is closed"))
        }
    }

    private static let connectionQueueKey = DispatchSpecificKey<Bool>()

    /// Whether the caller runs on a pool connection's own queue (never Swift's cooperative pool).
    public static var isOnConnectionQueue: Bool {
        DispatchQueue.getSpecific(key: connectionQueueKey) ?? false
    }

    /// How many connections are open and how many are idle, for metrics.
    public var statistics: (open: Int, idle: Int, waiting: Int) {
        state.withLock { ($0.open, $0.idle.count, $0.waiters.count) }
    }

    /// Cancels one lease's statement, and only while its body runs: once the body has returned,
    /// the connection may already serve another lease.
    private final class Lease: Sendable {
        /// Where cancels are sent: `PQcancel` blocks while it reaches the server (for as long as
        /// TCP tries, when the network is down), so it never holds a thread that deadlines need.
        /// Concurrent: a cancel stuck on one server (unreachable, restarting) must not hold back
        /// the cancels of every other lease in the process, as one serial queue would. One
        /// lease's resends still go one after the other.
        private static let cancelQueue = DispatchQueue(label: "reddot.postgres.cancel", attributes: .concurrent)
        /// How often the cancel is sent again while the body still runs: a cancel that reaches
        /// the server between two statements, or between prepare and execute, is ignored there.
        private static let resendInterval = Duration.milliseconds(250)

        private let connection: PGConnection
        private let running = Mutex(true)

        init(_ connection: PGConnection) {
            self.connection = connection
        }

        /// Sends a cancel now, and again every 250 ms, until the body returns.
        func cancelUntilDone() {
            Self.cancelQueue.async { [self] in
                let stillRunning = running.withLock { isRunning in
                    if isRunning { connection.cancel() }
                    return isRunning
                }
                if stillRunning {
                    _ = PGDeadlines.shared.arm(.now + Self.resendInterval) { [self] in cancelUntilDone() }
                }
            }
        }

        /// The body has returned: no more cancels.
        func done() {
            running.withLock { $0 = false }
        }
    }

    private func acquire(deadline: ContinuousClock.Instant?) async throws -> Entry {
        try Task.checkCancellation()
        let waiterID = state.withLock { state -> UInt64 in
            state.nextWaiterID += 1
            return state.nextWaiterID
        }
        let grant: Grant = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Grant, any Error>) in
                let immediate = state.withLock { state -> Result<Grant, PGError>? in
                    if state.closed {
                        return .failure(PGError(code: .poolClosed, message: "the connection pool is closed"))
                    }
                    if let entry = state.idle.popLast() { return .success(.idle(entry)) }
                    if state.open < maximumConnections {
                        state.open += 1
                        return .success(.open)
                    }
                    let deadlineID = deadline.map { deadline in
                        PGDeadlines.shared.arm(deadline) { [self] in
                            stopWaiting(waiterID, PGError(code: .timedOut, message: "no database connection became free in time"))
                        }
                    }
                    state.waiters.append(Waiter(id: waiterID, continuation: continuation, deadlineID: deadlineID))
                    return nil
                }
                if let immediate { continuation.resume(with: immediate) }
            }
        } onCancel: {
            stopWaiting(waiterID, CancellationError())
        }
        switch grant {
        case .idle(let entry):
            return entry
        case .open:
            return try await open(deadline: deadline)
        }
    }

    /// Fails a waiting `acquire` with `error`, if it is still waiting.
    private func stopWaiting(_ waiterID: UInt64, _ error: any Error) {
        let waiter = state.withLock { state -> Waiter? in
            guard let index = state.waiters.firstIndex(where: { $0.id == waiterID }) else { return nil }
            return state.waiters.remove(at: index)
        }
        waiter?.resume(throwing: error)
    }

    /// Opens a connection in a slot `acquire` granted. The slot is given back if opening fails,
    /// and the connection goes to the pool if it opens after the deadline passed.
    private func open(deadline: ContinuousClock.Instant?) async throws -> Entry {
        let queue = DispatchQueue(label: "reddot.postgres.connection")
        queue.setSpecific(key: Self.connectionQueueKey, value: true)
        let configuration = self.configuration
        let logger = self.logger
        let outcome = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Entry, any Error>, Never>) in
            let once = PGResumeOnce(continuation)
            let deadlineID = deadline.map { deadline in
                PGDeadlines.shared.arm(deadline) {
                    once.resume(.failure(PGError(code: .timedOut, message: "no database connection could be opened in time")))
                }
            }
            queue.async {
                let result = Result { try Entry(connection: PGConnection.connect(configuration, logger: logger), queue: queue) }
                if let deadlineID { PGDeadlines.shared.disarm(deadlineID) }
                if once.resume(result) {
                    if case .failure = result { self.giveBack(nil) }
                } else {
                    switch result {
                    case .success(let entry): self.release(entry)
                    case .failure: self.giveBack(nil)
                    }
                }
            }
        }
        return try outcome.get()
    }

    private func release(_ entry: Entry) {
        if entry.connection.isReusable {
            giveBack(entry)
        } else {
            entry.queue.async { entry.connection.close() }
            giveBack(nil)
        }
    }

    /// Returns a connection (or, with `nil`, a slot whose connection was closed or never opened)
    /// to the first waiter, or to the idle list.
    private func giveBack(_ entry: Entry?) {
        enum Action {
            case none
            case resume(Waiter, Grant)
            case close(Entry)
        }
        let action = state.withLock { state -> Action in
            if state.closed {
                state.open -= 1
                return entry.map { .close($0) } ?? .none
            }
            if !state.waiters.isEmpty {
                let waiter = state.waiters.removeFirst()
                if let entry { return .resume(waiter, .idle(entry)) }
                return .resume(waiter, .open)
            }
            if let entry {
                state.idle.append(entry)
            } else {
                state.open -= 1
            }
            return .none
        }
        switch action {
        case .none: break
        case .resume(let waiter, let grant): waiter.resume(grant)
        case .close(let entry): entry.queue.async { entry.connection.close() }
        }
    }
}
