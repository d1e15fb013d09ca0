import Backoff
import Logging

/// The senders' loop (webhook deliveries, push devices): claims a batch of work in the database,
/// runs each item at once, and claims again, until `isStopping`. A failed claim is retried
/// with backoff; an empty one waits `idle`. An item's error ends the loop (and is thrown).
func claimLoop<Item: Sendable>(
    what: String, idle: Duration, logger: Logger, isStopping: @escaping @Sendable () -> Bool,
    claim: @escaping @Sendable () async throws -> [Item], run: @escaping @Sendable (Item) async throws -> Void
) async throws {
    var backoff = Backoff(initial: .milliseconds(200), maximum: .seconds(10), jitter: true)
    while !isStopping(), !Task.isCancelled {
        let claimed: [Item]
        do {
            claimed = try await claim()
            backoff.reset()
        } catch {
            logger.warning("claiming \(what) failed; retrying", metadata: ["error": "\(error)"])
            try? await Task.sleep(for: backoff.next())
            continue
        }
        if claimed.isEmpty {
            try? await Task.sleep(for: idle)
            continue
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for item in claimed { group.addTask { try await run(item) } }
            try await group.waitForAll()
        }
    }
}
