public import ArgumentParser

/// The delivery settings of `reddot webhooks run`, declared once: each flag's default, help and
/// range. `WebhookConfiguration`'s defaults are these (``defaults``); the command includes this
/// type as an option group.
public struct WebhookSettings: ParsableArguments, Sendable {
    /// Options in their definition state; read ``defaults`` (or a parsed value) instead.
    public init() {}

    /// Every flag left out.
    public static let defaults: WebhookSettings = {
        do {
            return try WebhookSettings.parse([])
        } catch {
            preconditionFailure("the webhooks' defaults are out of their own ranges: \(error)")
        }
    }()

    @Option(help: "Deliveries in flight at once (1…256).")
    public var concurrency: Int = 16
    @Option(help: "Seconds one try may take (1…300).")
    public var requestTimeoutSeconds: Int = 10
    @Option(help: "Tries before a delivery is dead (1…30).")
    public var maxAttempts: Int = 8
    @Option(help: "The pause after the first failed try, in seconds (1…3600).")
    public var firstRetrySeconds: Int = 5
    @Option(help: "The longest pause between tries, in seconds (1…86400).")
    public var maxRetrySeconds: Int = 21_600
    @Option(help: "Days finished deliveries are kept (1…3650).")
    public var retentionDays: Int = 7

    public func validate() throws {
        for (name, value, range) in [
            ("--concurrency", concurrency, 1...256), ("--request-timeout-seconds", requestTimeoutSeconds, 1...300),
            ("--max-attempts", maxAttempts, 1...30), ("--first-retry-seconds", firstRetrySeconds, 1...3600),
            ("--max-retry-seconds", maxRetrySeconds, 1...86_400), ("--retention-days", retentionDays, 1...3650),
        ] where !range.contains(value) {
            throw ValidationError("\(name) takes \(range.lowerBound)…\(range.upperBound), not \(value)")
        }
        guard firstRetrySeconds <= maxRetrySeconds else {
            throw ValidationError("--first-retry-seconds (\(firstRetrySeconds)) must not exceed --max-retry-seconds (\(maxRetrySeconds))")
        }
    }
}
