public import ArgumentParser

/// The delivery settings of `reddot push run`, declared once: each flag's default, help and
/// range. `PushConfiguration`'s defaults are these (``defaults``); the command includes this type
/// as an option group (the providers' credentials are `reddot`'s `PushProviderOptions`: files
/// read at start, with their variables).
public struct PushSettings: ParsableArguments, Sendable {
    /// Options in their definition state; read ``defaults`` (or a parsed value) instead.
    public init() {}

    /// Every flag left out.
    public static let defaults: PushSettings = {
        do {
            return try PushSettings.parse([])
        } catch {
            preconditionFailure("push's defaults are out of their own ranges: \(error)")
        }
    }()

    @Option(help: "Devices pushed at once (1…1000).")
    public var concurrency: Int = 32
    @Option(help: "Seconds one push may take (1…300).")
    public var requestTimeoutSeconds: Int = 10
    @Option(help: "The longest pause between tries of one device, in seconds (1…3600).")
    public var maxRetrySeconds: Int = 300

    public func validate() throws {
        for (name, value, range) in [
            ("--concurrency", concurrency, 1...1000), ("--request-timeout-seconds", requestTimeoutSeconds, 1...300),
            ("--max-retry-seconds", maxRetrySeconds, 1...3600),
        ] where !range.contains(value) {
            throw ValidationError("\(name) takes \(range.lowerBound)…\(range.upperBound), not \(value)")
        }
    }
}
