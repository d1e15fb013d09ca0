import Backoff
import BadgeCore
import BadgeStore
public import LibPQ
public import Logging
import Synchronization

/// What tells a ``ChangeHub`` of changes when reads go to a hot standby: the primary's
/// notifications (`LISTEN` there; a standby cannot listen), each released only once the standby
/// has replayed the commit that sent it.
///
/// A notification arrives when its transaction commits on the primary; the standby replays that
/// commit a moment later. A wake-up released at once would read the old tree on the standby and
/// the stream would miss the change. So the listener gathers the notifications that arrive
/// (coalesced: each user's newest version, the newest broadcast version), reads the primary's
/// WAL insert position (at or after every commit whose notification has arrived), and releases
/// them when `pg_last_wal_replay_lsn()` on the standby reaches it, checking every `interval`.
/// Notifications that arrive meanwhile wait for the next position. On a reconnection of the
/// `LISTEN` connection (notifications were missed), "everyone may have changed" is released the
/// same way. The cost does not grow with the write rate or with open transactions: one
/// statement on the primary per release, and one on the standby per check while one waits.
public final class ReplicaListener: Sendable {
    /// What the listener reports.
    enum Signal: Sendable, Equatable {
        /// Everyone may have changed (the listener (re)connected, or too many users changed to list).
        case connected
        /// Notifications are not coming, or cannot be released (the primary or the standby is
        /// unreachable).
        case disconnected
        case user(UserID, version: Int64?)
        case broadcasts(version: Int64?)
        /// A payload this build does not write: something changed, nobody knows what.
        case unknown
    }

    /// What waits for the standby: each user's newest notified version (nil: a notification
    /// named none), the newest broadcast version, and whether everyone may have changed.
    private struct Batch {
        var everyone = false
        var users: [UserID: Int64?] = [:]
        var broadcasts: Int64?? = nil
        var unknown = false

        var isEmpty: Bool { !everyone && users.isEmpty && broadcasts == nil && !unknown }

        mutating func add(_ notification: PGNotification) {
            switch ChangeNotification(payload: notification.payload) {
            case .user(let user, let version): note(user, version)
            case .broadcasts(let version): noteBroadcasts(version)
            case nil: unknown = true
            }
        }

        mutating func merge(_ other: Batch) {
            everyone = everyone || other.everyone
            unknown = unknown || other.unknown
            for (user, version) in other.users { note(user, version) }
            if let version = other.broadcasts { noteBroadcasts(version) }
        }

        private mutating func note(_ user: UserID, _ version: Int64?) {
            users[user] = users.keys.contains(user) ? Self.newer(users[user] ?? nil, version) : version
            if users.count > ReplicaListener.maximumUsers {
                everyone = true
                users = [:]
            }
        }

        private mutating func noteBroadcasts(_ version: Int64?) {
            broadcasts = .some(broadcasts.map { Self.newer($0, version) } ?? version)
        }

        /// The newer of two notified versions; nil (not known) when either is.
        private static func newer(_ a: Int64?, _ b: Int64?) -> Int64? {
            guard let a, let b else { return nil }
            return max(a, b)
        }
    }

    /// The most users one release lists; beyond it, everyone is woken (and reads).
    static let maximumUsers = 100_000

    /// The reports; the stream finishes when `run()` returns.
    let signals: AsyncStream<Signal>
    private let continuation: AsyncStream<Signal>.Continuation
    private let listener: PGListener
    private let primary: PGPool
    private let replica: PGPool
    private let interval: Duration
    private let logger: Logger
    private let pending = Mutex(Batch())
    private let arrived: AsyncStream<Void>
    private let arrival: AsyncStream<Void>.Continuation
    // Set in `init` after its one throwing call: a default value here made the release build's
    // optimizer crash (Swift 6.3.1, CopyPropagation on the init's error path).
    private let stopped: Atomic<Bool>

    /// A listener on `primary` (the change channel) whose notifications are released once
    /// `replica` has replayed them, checking every `interval`.
    ///
    /// - Throws: `PGError` only for an invalid channel name (a programming error).
    public init(primary: PGConfiguration, replica: PGConfiguration, interval: Duration, logger: Logger) throws(PGError) {
        listener = try PGListener(configuration: primary, channels: [BadgeStore.changeChannel], logger: logger)
        stopped = Atomic(false)
        var primary = primary
        primary.applicationName = "reddot-serve-changes"
        var replica = replica
        replica.applicationName = "reddot-serve-changes"
        self.primary = PGPool(configuration: primary, maximumConnections: 1, logger: logger)
        self.replica = PGPool(configuration: replica, maximumConnections: 1, logger: logger)
        self.interval = interval
        self.logger = logger
        (signals, continuation) = AsyncStream.makeStream(of: Signal.self, bufferingPolicy: .bufferingNewest(200_000))
        (arrived, arrival) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// Listens and releases until the calling task is cancelled or `stop()` is called; then
    /// finishes `signals`.
    public func run() async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.listener.run() }
            group.addTask {
                for await event in self.listener.events {
                    switch event {
                    case .disconnected:
                        // Nothing is known until the listener is back, and then everyone reads.
                        self.pending.withLock { $0 = Batch() }
                        self.continuation.yield(.disconnected)
                    case .connected:
                        self.pending.withLock { $0.everyone = true }
                    case .notification(let notification):
                        self.pending.withLock { $0.add(notification) }
                    }
                    self.arrival.yield()
                }
                self.arrival.finish()
            }
            group.addTask { await self.release() }
        }
        primary.close()
        replica.close()
        continuation.finish()
    }

    /// Asks `run()` to return (within about a quarter of a second).
    public func stop() {
        stopped.store(true, ordering: .releasing)
        listener.stop()
    }

    /// Takes what has arrived, waits for the standby to replay past the primary's position, and
    /// reports it; on a failure, reports `.disconnected` and keeps what it took for the next try.
    private func release() async {
        var backoff = Backoff(initial: .milliseconds(100), maximum: .seconds(5))
        var failing = false
        var held = Batch()
        for await _ in arrived {
            while !isStopped {
                let taken = pending.withLock { batch in
                    let taken = batch
                    batch = Batch()
                    return taken
                }
                held.merge(taken)
                if held.isEmpty { break }
                do {
                    try await waitForReplay()
                    if failing {
                        // Notifications may have been lost while it failed: everyone reads.
                        held.everyone = true
                        failing = false
                        backoff.reset()
                    }
                    report(held)
                    held = Batch()
                } catch {
                    if isStopped { return }
                    if !failing { continuation.yield(.disconnected) }
                    failing = true
                    let delay = backoff.next()
                    logger.info(
                        "cannot tell whether the replica has replayed the latest changes; trying again",
                        metadata: [LogKey.error: "\(error)", "retry.delay_ms": "\(Backoff.milliseconds(delay))"])
                    try? await Task.sleep(for: delay)
                }
            }
        }
    }

    /// Returns once the standby has replayed everything the primary had written when it was
    /// called (at once when the replica is not a standby: it has no replay position).
    private func waitForReplay() async throws {
        let position = try await primary.withConnection(deadline: .now + .seconds(5)) { connection in
            try connection.query(Self.insertPosition).rows[0].decode(0, as: String.self)
        }
        while !isStopped {
            let replayed = try await replica.withConnection(deadline: .now + .seconds(5)) { connection in
                try connection.query(Self.replayedPast, [position]).rows[0].decode(0, as: Bool?.self)
            }
            if replayed ?? true { return }
            try await Task.sleep(for: interval)
        }
    }

    private func report(_ batch: Batch) {
        if batch.everyone {
            continuation.yield(.connected)
            return
        }
        if batch.unknown { continuation.yield(.unknown) }
        for (user, version) in batch.users { continuation.yield(.user(user, version: version)) }
        if let version = batch.broadcasts { continuation.yield(.broadcasts(version: version)) }
    }

    /// Stopped, or the task running it cancelled.
    private var isStopped: Bool { stopped.load(ordering: .acquiring) || Task.isCancelled }

    static let insertPosition = PGStatement("changes.insert_position", "SELECT pg_current_wal_insert_lsn()::text")
    static let replayedPast = PGStatement("changes.replayed_past", "SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn")
}
