import Backoff
import BadgeCore
import BadgeStore
public import LibPQ
public import Logging
import Synchronization

/// What tells a ``ChangeHub`` that trees changed: `LISTEN` on the primary (``PGListener``), or,
/// for a server that reads from a hot standby, this poller of the standby's change log.
///
/// A standby cannot `LISTEN`, and a notification from the primary may arrive before the standby
/// has replayed the change: the wake-up would read the old tree there and the stream would miss
/// the change. Reading the log on the standby itself, every `interval`, reports each change once
/// the standby shows it (``BadgeStore/followChangeLog(from:limit:on:)``), in the hub's terms:
/// `.connected` after every (re)start and after a burst too large to list (every subscriber
/// reads again), `.disconnected` when a read fails, and each user's newest version and the
/// broadcast version.
public final class ChangeLogPoller: Sendable {
    /// What the poller reports.
    enum Signal: Sendable, Equatable {
        case connected
        case disconnected
        case user(UserID, version: Int64)
        case broadcasts(version: Int64)
    }

    /// The reports; the stream finishes when `run()` returns.
    let signals: AsyncStream<Signal>
    private let continuation: AsyncStream<Signal>.Continuation
    private let pool: PGPool
    private let interval: Duration
    private let limit: Int
    private let logger: Logger
    private let stopped = Atomic<Bool>(false)

    /// A poller of the change log at `configuration` (a standby, usually), every `interval`,
    /// reporting up to `limit` changed rows a read (more: every subscriber reads again).
    public init(configuration: PGConfiguration, interval: Duration, limit: Int = 20_000, logger: Logger) {
        var configuration = configuration
        configuration.sessionSettings += BadgeStore.recommendedSessionSettings
        configuration.applicationName = "reddot-serve-changes"
        self.pool = PGPool(configuration: configuration, maximumConnections: 1, logger: logger)
        self.interval = interval
        self.limit = max(1, limit)
        self.logger = logger
        (signals, continuation) = AsyncStream.makeStream(of: Signal.self, bufferingPolicy: .bufferingNewest(100_000))
    }

    /// Polls until the calling task is cancelled or `stop()` is called; then finishes `signals`.
    public func run() async {
        var backoff = Backoff(initial: .milliseconds(100), maximum: .seconds(5))
        var warned = false
        while !isStopped, !Task.isCancelled {
            var connectedAt: ContinuousClock.Instant?
            do {
                var cursor = try await pool.withConnection(deadline: .now + .seconds(10)) { connection in
                    try BadgeStore.changeLogHead(on: connection)
                }
                continuation.yield(.connected)
                connectedAt = .now
                while !isStopped {
                    try await Task.sleep(for: interval)
                    let step = try await pool.withConnection(deadline: .now + .seconds(10)) { [limit, cursor] connection in
                        try BadgeStore.followChangeLog(from: cursor, limit: limit, on: connection)
                    }
                    cursor = step.cursor
                    let held = cursor.transactionsHeld
                    if held >= Self.heldWarning, !warned {
                        logger.warning(
                            "a write transaction has been open on the primary for long: each read of the change log carries the transactions since it began",
                            metadata: ["transactions": "\(held)", "xmin": "\(cursor.oldestRunning)"])
                    }
                    warned = held >= Self.heldWarning
                    if step.overflowed {
                        logger.info("more changes than one read of the change log takes; every subscriber reads again", metadata: ["limit": "\(limit)"])
                        continuation.yield(.connected)
                    }
                    for (user, version) in step.users { continuation.yield(.user(user, version: version)) }
                    if let version = step.broadcastVersion { continuation.yield(.broadcasts(version: version)) }
                }
            } catch is CancellationError {
                break
            } catch {
                if let connectedAt {
                    continuation.yield(.disconnected)
                    if ContinuousClock.now - connectedAt >= .seconds(2) { backoff.reset() }
                }
                let delay = backoff.next()
                logger.info(
                    "reading the change log failed; trying again",
                    metadata: [LogKey.error: "\(error)", "retry.delay_ms": "\(Backoff.milliseconds(delay))"])
                try? await Task.sleep(for: delay)
            }
        }
        pool.close()
        continuation.finish()
    }

    /// How many transactions a cursor may carry before the poller warns (an open write
    /// transaction on the primary holds the snapshot's `xmin` back).
    static let heldWarning = 10_000

    /// Asks `run()` to return (within one interval).
    public func stop() { stopped.store(true, ordering: .releasing) }

    private var isStopped: Bool { stopped.load(ordering: .acquiring) }
}
