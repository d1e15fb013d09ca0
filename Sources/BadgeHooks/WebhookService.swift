import AsyncHTTPClient
import Backoff
import BadgeCore
import BadgeStore
import Foundation
public import LibPQ
public import Logging
import Metrics
import NIOCore
import NIOHTTP1
import RdKafka
public import ServiceLifecycle
import Synchronization

/// `reddot webhooks run`: follows the change feed in a consumer group and turns its records into
/// deliveries (stored with the feed's position per user, so a record read twice makes none), and
/// delivers them: signed the Standard Webhooks way, retried with backoff (and `Retry-After`),
/// dead after the last try.
public final class WebhookService: Service, Sendable {
    private let configuration: WebhookConfiguration
    private let pool: PGPool
    private let logger: Logger
    private let stopping = Atomic<Bool>(false)
    private let metrics = Metrics()
    private let follower: FeedFollower

    struct Metrics: Sendable {
        let records = Counter(label: "reddot_webhook_records_total")
        let unreadable = Counter(label: "reddot_webhook_records_unreadable_total")
        let enqueued = Counter(label: "reddot_webhook_enqueued_total")
        let delivered = Counter(label: "reddot_webhook_deliveries_total", dimensions: [("outcome", "delivered")])
        let retried = Counter(label: "reddot_webhook_deliveries_total", dimensions: [("outcome", "retried")])
        let dead = Counter(label: "reddot_webhook_deliveries_total", dimensions: [("outcome", "dead")])
        let latency = Timer(label: "reddot_webhook_request_seconds")
    }

    public init(configuration: WebhookConfiguration, pool: PGPool, logger: Logger) {
        (self.configuration, self.pool, self.logger) = (configuration, pool, logger)
        let unreadable = metrics.unreadable
        follower = FeedFollower(
            kafka: configuration.kafka, topic: configuration.topic, group: configuration.group, logger: logger,
            unreadable: { unreadable.increment() })
    }

    public func run() async throws {
        var http = HTTPClient.Configuration(redirectConfiguration: .disallow)
        http.timeout = .init(connect: .seconds(5), read: Self.timeAmount(configuration.requestTimeout))
        try await runParts(http: http, stop: { self.stop() }, [
            { _ in try await self.follow() },
            { client in try await self.deliverLoop(client) },
            { _ in await self.pruneLoop() },
        ])
    }

    // MARK: Following the feed

    /// Turns each batch of the feed into deliveries: the positions of its users, the planner,
    /// then the deliveries and the new positions in one transaction.
    private func follow() async throws {
        let subscriptions = Mutex<(list: [WebhookSubscription], loadedAt: ContinuousClock.Instant)?>(nil)
        try await follower.run { [pool, metrics] records in
            metrics.records.increment(by: records.count)
            var current = subscriptions.withLock { $0 }
            if current == nil || ContinuousClock.now - current!.loadedAt > .seconds(5) {
                current = (try await pool.withConnection { try WebhookStore.subscriptions(on: $0) }, .now)
                subscriptions.withLock { $0 = current }
            }
            let list = current!.list
            let users = Set(records.compactMap { record -> String? in
                if case .user(let change) = record { return change.user }
                return nil
            })
            let added = try await pool.withConnection { connection in
                var positions = try WebhookStore.positions(of: Array(users), on: connection)
                let deliveries = WebhookPlanner.plan(records, positions: &positions, subscriptions: list)
                return try WebhookStore.record(deliveries, positions: positions.filter { users.contains($0.key) }, on: connection)
            }
            metrics.enqueued.increment(by: added)
        }
    }

    private func stop() {
        stopping.store(true, ordering: .relaxed)
        follower.stop()
    }

    // MARK: Delivering

    private func deliverLoop(_ client: HTTPClient) async throws {
        let lease = configuration.requestTimeout + .seconds(30)
        let parts = PartsInTurn(of: "webhook_delivery")
        try await claimLoop(
            what: "webhook deliveries", idle: .milliseconds(250), logger: logger, isStopping: { self.stopping.load(ordering: .relaxed) },
            claim: { [pool, configuration] in
                try await parts.claim { taken in
                    try await pool.withConnection { try WebhookStore.claim(limit: configuration.concurrency, lease: lease, parts: taken, on: $0) }
                }
            },
            run: { delivery in await self.deliver(delivery, client) })
    }

    private func deliver(_ delivery: WebhookStore.Claimed, _ client: HTTPClient) async {
        let outcome = await attempt(delivery, client)
        let retryDelay: Duration?
        switch outcome {
        case .delivered:
            retryDelay = nil
        case .failed(_, let retryAfter):
            retryDelay = configuration.retryDelay(after: delivery.attempt, retryAfter: retryAfter)
        }
        var backoff = Backoff(initial: .milliseconds(200), maximum: .seconds(5), jitter: true)
        // The result is stored, or the lease runs out and the delivery is tried again.
        for _ in 0..<10 {
            do {
                try await pool.withConnection { connection in
                    switch outcome {
                    case .delivered: try WebhookStore.delivered(delivery, on: connection)
                    case .failed(let error, _): try WebhookStore.failed(delivery, error: error, retryAfter: retryDelay, on: connection)
                    }
                }
                break
            } catch {
                logger.warning("webhooks: storing a delivery's outcome failed", metadata: [RedDotLogKey.delivery: "\(delivery.id)", RedDotLogKey.error: "\(error)"])
                try? await Task.sleep(for: backoff.next())
            }
        }
        switch outcome {
        case .delivered:
            metrics.delivered.increment()
        case .failed(let error, _):
            if let retryDelay {
                metrics.retried.increment()
                logger.info(
                    "webhooks: a try failed; retrying",
                    metadata: [
                        RedDotLogKey.delivery: "\(delivery.id)", RedDotLogKey.subscription: "\(delivery.subscription)", "attempt": "\(delivery.attempt)",
                        "retry_in": "\(retryDelay)", RedDotLogKey.error: "\(error)",
                    ])
            } else {
                metrics.dead.increment()
                logger.warning(
                    "webhooks: a delivery's last try failed; it is dead (reddot webhooks replay sends it again)",
                    metadata: [RedDotLogKey.delivery: "\(delivery.id)", RedDotLogKey.subscription: "\(delivery.subscription)", "attempts": "\(delivery.attempt)", RedDotLogKey.error: "\(error)"])
            }
        }
    }

    enum Outcome {
        case delivered
        case failed(String, retryAfter: Duration?)
    }

    private func attempt(_ delivery: WebhookStore.Claimed, _ client: HTTPClient) async -> Outcome {
        guard let key = WebhookSubscription.key(of: delivery.secret) else { return .failed("the subscription's secret is not a whsec_ secret", retryAfter: nil) }
        let timestamp = Int64(Date().timeIntervalSince1970)
        var request = HTTPClientRequest(url: delivery.url)
        request.method = .POST
        request.headers.add(name: "content-type", value: "application/json")
        request.headers.add(name: "user-agent", value: "RedDot-Webhooks")
        request.headers.add(name: "webhook-id", value: delivery.id)
        request.headers.add(name: "webhook-timestamp", value: String(timestamp))
        request.headers.add(
            name: "webhook-signature", value: WebhookSignature.sign(id: delivery.id, timestamp: timestamp, body: delivery.payload, key: key))
        request.body = .bytes(ByteBuffer(string: delivery.payload))
        let started = ContinuousClock.now
        defer { metrics.latency.recordNanoseconds(Self.nanoseconds(ContinuousClock.now - started)) }
        do {
            let response = try await client.execute(request, timeout: Self.timeAmount(configuration.requestTimeout))
            // The body is read (and dropped) so the connection can serve the next try.
            _ = try? await response.body.collect(upTo: 64 << 10)
            if (200..<300).contains(response.status.code) { return .delivered }
            let retryAfter = [429, 503].contains(response.status.code) ? WebhookConfiguration.retryAfter(response.headers.first(name: "retry-after")) : nil
            return .failed("HTTP \(response.status.code)", retryAfter: retryAfter)
        } catch {
            return .failed("\(error)", retryAfter: nil)
        }
    }

    // MARK: Retention

    private func pruneLoop() async {
        while !stopping.load(ordering: .relaxed), !Task.isCancelled {
            do {
                var removed = 0
                repeat {
                    removed = try await pool.withConnection { [configuration] in
                        try WebhookStore.prune(olderThan: configuration.retention, limit: 1000, on: $0)
                    }
                } while removed == 1000 && !stopping.load(ordering: .relaxed)
            } catch {
                logger.warning("webhooks: pruning old deliveries failed", metadata: [RedDotLogKey.error: "\(error)"])
            }
            for _ in 0..<600 where !stopping.load(ordering: .relaxed) { try? await Task.sleep(for: .milliseconds(100)) }
        }
    }

    static func timeAmount(_ duration: Duration) -> TimeAmount {
        .nanoseconds(nanoseconds(duration))
    }

    static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds.multipliedReportingOverflow(by: 1_000_000_000).overflow ? .max : seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
