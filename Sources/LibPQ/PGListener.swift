import Backoff
import Foundation
public import Logging
import Synchronization

/// Receives PostgreSQL `NOTIFY` messages on a dedicated connection and thread.
///
/// One listener per process is enough: fan its `events` out to subscribers. The listener
/// reconnects by itself when the connection breaks. It yields `.disconnected` when a connection
/// it listened on breaks, and `.connected` after every (re)connection: notifications sent while
/// it was away are lost, so subscribers should re-read what they show.
///
/// Reconnection pauses start at 100 ms and double up to 5 s. They start again from 100 ms only
/// after a connection stayed up for `stableConnection`: a server that accepts each connection
/// and drops it at once (shutting down, a proxy whose database is gone, a session killer) is
/// retried with growing pauses, not ten times a second forever.
public final class PGListener: Sendable {
    /// What a listener reports.
    public enum Event: Sendable, Hashable {
        /// The listener is (again) listening on all its channels.
        case connected
        /// The connection it listened on broke; notifications are missed until `.connected`.
        case disconnected
        /// A notification arrived.
        case notification(PGNotification)
    }

    /// The stream of events; it finishes when `run()` returns.
    public let events: AsyncStream<Event>
    private let continuation: AsyncStream<Event>.Continuation
    private let configuration: PGConfiguration
    private let channels: [String]
    private let logger: Logger
    private let stopped = Atomic<Bool>(false)

    /// Creates a listener for `channels` (each a lower-case SQL identifier: `[a-z_][a-z0-9_]*`).
    ///
    /// - Throws: `PGError` `.client` for a channel name that is not such an identifier.
    public init(configuration: PGConfiguration, channels: [String], logger: Logger) throws(PGError) {
        for channel in channels {
            let valid =
                !channel.isEmpty && channel.count <= 63
                && channel.unicodeScalars.enumerated().allSatisfy { index, scalar in
                    scalar == "_" || ("a"..."z").contains(scalar) || (index > 0 && ("0"..."9").contains(scalar))
                }
            guard valid else {
                throw PGError(code: .client, message: "channel name '\(channel.prefix(70))' is not a lower-case identifier")
            }
        }
        (events, continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .bufferingNewest(10_000))
        self.configuration = configuration
        self.channels = channels
        self.logger = logger
    }

    /// Listens until the calling task is cancelled or `stop()` is called; then finishes `events`.
    public func run() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                let thread = Thread { [self] in
                    loop()
                    done.resume()
                }
                thread.name = "reddot.postgres.listener"
                thread.start()
            }
        } onCancel: {
            stop()
        }
        continuation.finish()
    }

    /// Asks `run()` to return (within about a quarter of a second).
    public func stop() {
        stopped.store(true, ordering: .releasing)
    }

    /// How long a connection must stay up before the reconnection pause starts again from 100 ms.
    static let stableConnection = Duration.seconds(2)

    private var isStopped: Bool { stopped.load(ordering: .acquiring) }

    private func loop() {
        var backoff = Backoff(initial: .milliseconds(100), maximum: .seconds(5))
        while !isStopped {
            var connectedAt: ContinuousClock.Instant?
            do {
                let connection = try PGConnection.connect(configuration, logger: logger)
                defer { connection.close() }
                for channel in channels {
                    try connection.execute(script: "LISTEN \(channel)", name: "listen")
                }
                continuation.yield(.connected)
                connectedAt = .now
                while !isStopped {
                    for notification in try connection.waitForNotifications(timeoutMilliseconds: 250) {
                        continuation.yield(.notification(notification))
                    }
                }
            } catch {
                if let connectedAt {
                    continuation.yield(.disconnected)
                    if ContinuousClock.now - connectedAt >= Self.stableConnection { backoff.reset() }
                }
                let delay = backoff.next()
                logger.info(
                    "LISTEN connection failed; reconnecting",
                    metadata: [LogKey.error: "\(error)", "retry.delay_ms": "\(Backoff.milliseconds(delay))"])
                Backoff.sleepOnThread(delay) { isStopped }
            }
        }
    }
}
