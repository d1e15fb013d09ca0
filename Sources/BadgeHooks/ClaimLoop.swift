import BadgeCore
import AsyncHTTPClient
import Backoff
import Logging
import ServiceLifecycle

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
            logger.warning("claiming \(what) failed; retrying", metadata: [RedDotLogKey.error: "\(error)"])
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

/// Runs a sender's `parts` side by side on one HTTP client made from `http`, until graceful
/// shutdown or until one part ends; then `stop` tells the others (the feed's follower, on its
/// own thread, watches no task cancellation), the client is shut down, and the first error, if
/// any, is thrown.
func runParts(
    http: HTTPClient.Configuration, stop: @escaping @Sendable () -> Void, _ parts: [@Sendable (HTTPClient) async throws -> Void]
) async throws {
    let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: http)
    do {
        try await withGracefulShutdownHandler {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for part in parts { group.addTask { try await part(client) } }
                defer { stop() }
                try await group.next()
                stop()
                group.cancelAll()
                try await group.waitForAll()
            }
        } onGracefulShutdown: {
            stop()
        }
    } catch {
        try? await client.shutdown()
        throw error
    }
    try await client.shutdown()
}
