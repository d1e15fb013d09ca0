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

    /// A configuration; what is left out is `reddot webhooks run`'s default (`WebhookSettings`).
    public init(
        kafka: KafkaConfiguration, topic: String = "reddot.changes", group: String = "reddot-webhooks",
        concurrency: Int = WebhookSettings.defaults.concurrency, requestTimeout: Duration = .seconds(WebhookSettings.defaults.requestTimeoutSeconds),
        maximumAttempts: Int = WebhookSettings.defaults.maxAttempts, firstRetryDelay: Duration = .seconds(WebhookSettings.defaults.firstRetrySeconds),
        maximumRetryDelay: Duration = .seconds(WebhookSettings.defaults.maxRetrySeconds),
        retention: Duration = .seconds(WebhookSettings.defaults.retentionDays * 86_400)
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

extension WebhookConfiguration {
    /// A configuration of `settings` (`reddot webhooks run`'s flags, their ranges held here too:
    /// a library user's value never overflows), reading the feed with `kafka`.
    public init(kafka: KafkaConfiguration, topic: String, group: String, settings: WebhookSettings) {
        self.init(
            kafka: kafka, topic: topic, group: group, concurrency: settings.concurrency, requestTimeout: .seconds(settings.requestTimeoutSeconds),
            maximumAttempts: settings.maxAttempts, firstRetryDelay: .seconds(settings.firstRetrySeconds),
            maximumRetryDelay: .seconds(settings.maxRetrySeconds), retention: .seconds(min(max(settings.retentionDays, 1), 3_650) * 86_400))
    }
}
