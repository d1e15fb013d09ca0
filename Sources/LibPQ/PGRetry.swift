import Backoff
public import Logging

/// How often, and with what pauses, a unit of work is run again after a retriable `PGError`.
public struct PGRetryPolicy: Sendable {
    /// Attempts in all, including the first; 0 or less means "until cancelled".
    public var maximumAttempts: Int
    /// The first pause, in milliseconds; it doubles each time up to `maximumDelayMilliseconds`.
    public var initialDelayMilliseconds: Int
    /// The longest pause, in milliseconds.
    public var maximumDelayMilliseconds: Int

    /// Creates a policy.
    public init(maximumAttempts: Int = 8, initialDelayMilliseconds: Int = 50, maximumDelayMilliseconds: Int = 5_000) {
        self.maximumAttempts = maximumAttempts
        self.initialDelayMilliseconds = initialDelayMilliseconds
        self.maximumDelayMilliseconds = maximumDelayMilliseconds
    }

    /// Runs `work` until it succeeds, throws a non-retriable error, or attempts run out.
    ///
    /// `onRetry` is told each retriable failure (for logs and metrics) before the pause. The pause
    /// has random jitter so that many workers do not retry in step.
    public func run<T>(
        logger: Logger,
        onRetry: (PGError, Int) -> Void = { _, _ in },
        _ work: () async throws -> T
    ) async throws -> T {
        var attempt = 1
        var backoff = Backoff(
            initial: .milliseconds(initialDelayMilliseconds), maximum: .milliseconds(maximumDelayMilliseconds), jitter: true)
        while true {
            do {
                return try await work()
            } catch let error as PGError where error.isRetriable {
                if maximumAttempts > 0, attempt >= maximumAttempts { throw error }
                onRetry(error, attempt)
                let delay = backoff.next()
                logger.info(
                    "retriable database error; trying again",
                    metadata: [
                        LogKey.error: "\(error)", LogKey.sqlState: "\(error.sqlState ?? "")",
                        "retry.attempt": "\(attempt)", "retry.delay_ms": "\(Backoff.milliseconds(delay))",
                    ])
                try await Task.sleep(for: delay)
                attempt += 1
            }
        }
    }
}
