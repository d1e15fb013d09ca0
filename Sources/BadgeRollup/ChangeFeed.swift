import BadgeCore
import Backoff
import BadgeStore
import Foundation
public import LibPQ
public import Logging
import Metrics
public import RdKafka
import Synchronization
public import ServiceLifecycle

/// How the change feed publishes.
public struct ChangeFeedConfiguration: Sendable {
    /// The topic the records go to.
    public var topic: String
    /// At most this many records of each kind per round (users' versions: this many `seq`
    /// numbers from the first one not yet published).
    public var batchSize: Int
    /// How long an idle publisher waits before looking again.
    public var pollInterval: Duration
    /// How long a lease lasts; the holder renews it every round, and another process takes over
    /// once it has run out (a stopped holder gives it up at once).
    public var leaseSeconds: Double
    /// Node texts above this count show as `N+` (as `reddot serve --count-cap`).
    public var countCap: Int64

    /// Defaults: `reddot.changes`, 5,000 records a round, 20 ms idle wait, 15 s leases, cap 99.
    public init(
        topic: String = "reddot.changes", batchSize: Int = 5_000, pollInterval: Duration = .milliseconds(20), leaseSeconds: Double = 15,
        countCap: Int64 = 99
    ) {
        self.topic = topic
        self.batchSize = max(1, batchSize)
        self.pollInterval = pollInterval
        self.leaseSeconds = max(1, leaseSeconds)
        self.countCap = max(1, countCap)
    }
}

/// The change feed (DESIGN §6a): publishes every change-log record to Kafka, in order, at least
/// once, and moves its cursor past it once Kafka acknowledged it.
///
/// One process publishes at a time (a lease in `change_feed_lease`), so one user's versions go
/// out in order (keyed by the user, one partition); broadcast versions go out in order under the
/// key `*`. The cursor (users' versions) and the broadcasts' marks move only past records Kafka
/// acknowledged, up to the first one it refused: a process that dies between send and move, or
/// a failed send, leads to the same records (same versions) being sent again, in order, never to
/// one being lost. Consumers drop a record whose version they have already seen.
public struct ChangeFeed: Service {
    /// The database.
    public let pool: PGPool
    /// The producer (idempotent, so retries never reorder nor duplicate within a session).
    public let producer: KafkaProducer
    /// The settings.
    public let configuration: ChangeFeedConfiguration
    /// Who holds the lease: host, process and a random part.
    public let holder: String
    /// Where it logs.
    public let logger: Logger
    private let metrics = ChangeFeedMetrics()
    /// When this process last took or renewed the lease (nil: it does not hold it).
    private let lease = LeaseClock()

    /// A feed over `pool` through `producer` (give the pool at least one connection of its own).
    public init(pool: PGPool, producer: KafkaProducer, configuration: ChangeFeedConfiguration = ChangeFeedConfiguration(), logger: Logger) {
        self.pool = pool
        self.producer = producer
        self.configuration = configuration
        self.holder = "\(ProcessInfo.processInfo.hostName)/\(ProcessInfo.processInfo.processIdentifier)/\(UUID().uuidString.prefix(8))"
        self.logger = logger
    }

    /// The producer settings the feed adds to `kafka` (unless set there): client id
    /// `reddot-changes`, a short linger, and a 30 s delivery timeout.
    public static func producerConfiguration(_ kafka: KafkaConfiguration) -> KafkaConfiguration {
        var configuration = kafka
        for (key, value) in [("client.id", "reddot-changes"), ("linger.ms", "5"), ("message.timeout.ms", "30000")]
        where configuration[key] == nil {
            configuration.set(key, value)
        }
        return configuration
    }

    /// Publishes until graceful shutdown or cancellation, then gives up the lease.
    public func run() async throws {
        logger.info("change feed started", metadata: ["kafka.topic": "\(configuration.topic)", "feed.holder": "\(holder)"])
        var backoff = Backoff(initial: .milliseconds(100), maximum: .seconds(5))
        var leading = false
        var lastMeasured = ContinuousClock.now - .seconds(5)
        while !Task.isCancelled, !Task.isShuttingDownGracefully {
            do {
                if ContinuousClock.now - lastMeasured >= .seconds(5) {
                    metrics.pending.record(try await pool.withConnection { try BadgeStore.unpublishedChanges(on: $0) })
                    lastMeasured = ContinuousClock.now
                }
                let published = try await step()
                if (published != nil) != leading {
                    leading = published != nil
                    logger.info(leading ? "change feed: publishing (this process holds the lease)" : "change feed: standing by (another process holds the lease)")
                }
                backoff.reset()
                if published ?? 0 == 0 {
                    let pause = leading ? configuration.pollInterval : .seconds(1)
                    try? await cancelWhenGracefulShutdown { try await Task.sleep(for: pause) }
                }
            } catch {
                metrics.errors.increment()
                logger.info("change feed round failed; retrying", metadata: [RedDotLogKey.error: "\(error)"])
                let pause = backoff.next()
                try? await cancelWhenGracefulShutdown { try await Task.sleep(for: pause) }
            }
        }
        try? await pool.withConnection { try BadgeStore.releaseFeedLease(holder: holder, on: $0) }
        await producer.closeOffPool()
        logger.info("change feed stopped")
    }

    /// One round: renews the lease (when a third of it has passed), reads the records not yet
    /// published, sends them and moves past those delivered, in order.
    ///
    /// - Returns: the records published; nil when another process holds the lease.
    public func step() async throws -> Int? {
        let seconds = configuration.leaseSeconds
        let holder = self.holder
        if lease.renewedAt.withLock({ $0.map { ContinuousClock.now - $0 >= .seconds(seconds / 3) } ?? true }) {
            let renewedAt = ContinuousClock.now
            let held = try await pool.withConnection { try BadgeStore.takeFeedLease(holder: holder, seconds: seconds, on: $0) }
            lease.renewedAt.withLock { $0 = held ? renewedAt : nil }
            guard held else { return nil }
        }
        let (limit, cap) = (configuration.batchSize, configuration.countCap)
        let round = try await pool.withConnection { try BadgeStore.pendingFeedRecords(limit: limit, countCap: cap, on: $0) }
        guard !round.records.isEmpty else { return 0 }
        let sentAt = ContinuousClock.now
        let outgoing = round.records.map {
            KafkaOutgoingRecord(topic: configuration.topic, key: Array($0.key.utf8), payload: $0.payload)
        }
        let results = await producer.sendAll(outgoing)
        let sendSeconds = Self.seconds(ContinuousClock.now - sentAt)
        var failed: Set<Int> = []
        var firstError: KafkaError?
        for (index, result) in results.enumerated() {
            if case .failure(let error) = result {
                failed.insert(index)
                firstError = firstError ?? error
            }
        }
        // The cursor moves past what Kafka acknowledged, up to the first refused record; the
        // rest go again next round, in order.
        let refused = failed
        let held = try await pool.withConnection { try BadgeStore.finishFeedRound(round, failed: refused, holder: holder, on: $0) }
        if !held {
            lease.renewedAt.withLock { $0 = nil }
        }
        let delivered = round.records.indices.filter { !failed.contains($0) }.map { round.records[$0] }
        for record in delivered {
            metrics.lag.recordNanoseconds(Int64(min(max(0, record.age + sendSeconds), 1e9) * 1e9))
        }
        metrics.published(delivered)
        if let firstError {
            throw firstError
        }
        return delivered.count
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}

/// When the lease was last taken or renewed (nil: not held).
final class LeaseClock: Sendable {
    let renewedAt = Mutex<ContinuousClock.Instant?>(nil)
}

/// The change feed's metrics, created once.
final class ChangeFeedMetrics: Sendable {
    /// Seconds from the change's transaction to Kafka's acknowledgement of its record.
    let lag = Metrics.Timer(label: "reddot_feed_lag_seconds")
    let publishedUsers = Counter(label: "reddot_feed_published_total", dimensions: [("kind", "user")])
    let publishedBroadcasts = Counter(label: "reddot_feed_published_total", dimensions: [("kind", "broadcasts")])
    let publishedTombstones = Counter(label: "reddot_feed_published_total", dimensions: [("kind", "tombstone")])
    /// Failed rounds (retried with backoff).
    let errors = Counter(label: "reddot_feed_errors_total")
    /// Records waiting to be published (measured every 5 s).
    let pending = Gauge(label: "reddot_feed_pending_records")

    func published(_ records: [FeedRecord]) {
        publishedUsers.increment(by: records.count { $0.kind == .user })
        publishedBroadcasts.increment(by: records.count { $0.kind == .broadcasts })
        publishedTombstones.increment(by: records.count { $0.kind == .tombstone })
    }
}
