import Foundation

/// Exponential pauses between retries: `initial`, then doubling up to `maximum`, with optional
/// jitter; `reset()` after a success starts again from `initial`.
///
/// A value type owned by one retry loop. `next()` only computes the pause; the loop sleeps it
/// with `Task.sleep(for:)` (or `pause()`) in async code, or with `sleepOnThread` on a thread of
/// its own (never on Swift's cooperative pool, where a blocking sleep starves other tasks).
public struct Backoff: Sendable, Hashable {
    /// The first pause.
    public let initial: Duration
    /// The longest pause.
    public let maximum: Duration
    /// Whether each pause is drawn at random between half of it and all of it, so that many
    /// workers that failed together do not retry in step.
    public let jitter: Bool
    /// Pauses handed out by `next()` since the start or the last `reset()`.
    public private(set) var attempts = 0
    private var upcoming: Duration

    /// A backoff from `initial`, doubling up to `maximum` (which is raised to `initial` when smaller).
    public init(initial: Duration, maximum: Duration, jitter: Bool = false) {
        self.initial = initial
        self.maximum = Swift.max(initial, maximum)
        self.jitter = jitter
        self.upcoming = initial
    }

    /// The pause `next()` will hand out next, before jitter.
    public var upcomingDelay: Duration { upcoming }

    /// The next pause (jittered when asked for); the one after it is twice as long, up to `maximum`.
    public mutating func next() -> Duration {
        let delay = upcoming
        upcoming = Swift.min(maximum, delay * 2)
        attempts += 1
        guard jitter else { return delay }
        return delay / 2 + (delay / 2) * Double.random(in: 0...1)
    }

    /// Starts again from `initial` (after a success).
    public mutating func reset() {
        upcoming = initial
        attempts = 0
    }

    /// Sleeps the next pause in async code.
    ///
    /// - Throws: `CancellationError` when the task is cancelled meanwhile.
    public mutating func pause() async throws {
        try await Task.sleep(for: next())
    }

    /// Blocks the calling thread for `duration`, in steps of `step`, returning early once
    /// `stopWhen` says so. Call it only on a thread of your own.
    public static func sleepOnThread(
        _ duration: Duration, step: Duration = .milliseconds(50), stopWhen: () -> Bool = { false }
    ) {
        var left = duration
        while left > .zero, !stopWhen() {
            let slice = Swift.min(step, left)
            Thread.sleep(forTimeInterval: Double(slice.components.seconds) + Double(slice.components.attoseconds) / 1e18)
            left -= slice
        }
    }

    /// The pause in whole milliseconds (for logs).
    public static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1_000 + duration.components.attoseconds / 1_000_000_000_000_000
    }
}
