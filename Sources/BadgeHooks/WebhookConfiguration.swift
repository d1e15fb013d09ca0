import Foundation
public import RdKafka

/// How `reddot webhooks run` follows the feed and delivers.
public struct WebhookConfiguration: Sendable {
    /// The Kafka client's properties (brokers and any `-X` overrides); the group and offsets
    /// are set by the service.
    public var kafka: KafkaConfiguration
    /// The change feed's topic.
    public var topic: String
    /// The consumer group that shares the feed's partitions among webhook processes.
    public var group: String
    /// Deliveries in flight at once, per process.
    public var concurrency: Int
    /// How long one try may take (connect, send, answer).
    public var requestTimeout: Duration
    /// Tries before a delivery is dead (the first included).
    public var maximumAttempts: Int
    /// The pause after the first failed try; each next one is four times longer, up to
    /// ``maximumRetryDelay``. A `Retry-After` the endpoint sends (429, 503) is kept instead, up
    /// to the same bound.
    public var firstRetryDelay: Duration
    /// The longest pause between two tries.
    public var maximumRetryDelay: Duration
    /// How long finished deliveries (delivered or dead) are kept for `deliveries` and `replay`.
    public var retention: Duration

    public init(
        kafka: KafkaConfiguration, topic: String = "reddot.changes", group: String = "reddot-webhooks", concurrency: Int = 16,
        requestTimeout: Duration = .seconds(10), maximumAttempts: Int = 8, firstRetryDelay: Duration = .seconds(5),
        maximumRetryDelay: Duration = .seconds(6 * 3600), retention: Duration = .seconds(7 * 86_400)
    ) {
        (self.kafka, self.topic, self.group, self.concurrency, self.requestTimeout) = (kafka, topic, group, concurrency, requestTimeout)
        (self.maximumAttempts, self.firstRetryDelay, self.maximumRetryDelay, self.retention) =
            (maximumAttempts, firstRetryDelay, maximumRetryDelay, retention)
    }

    /// The pause after failed try number `attempt` (1 for the first), or the endpoint's
    /// `Retry-After` when it sent one; nil when that was the last try.
    public func retryDelay(after attempt: Int, retryAfter: Duration?) -> Duration? {
        guard attempt < maximumAttempts else { return nil }
        if let retryAfter { return min(max(retryAfter, .seconds(1)), maximumRetryDelay) }
        var delay = firstRetryDelay
        for _ in 1..<max(1, attempt) {
            delay *= 4
            if delay >= maximumRetryDelay { return maximumRetryDelay }
        }
        return min(delay, maximumRetryDelay)
    }

    /// A `Retry-After` value in whole seconds (0 to 7 days); nil for anything else (an HTTP
    /// date is not followed: the backoff applies).
    public static func retryAfter(_ value: String?) -> Duration? {
        guard let value, let seconds = Int(value.trimmingCharacters(in: .whitespaces)), (0...604_800).contains(seconds) else { return nil }
        return .seconds(seconds)
    }
}
