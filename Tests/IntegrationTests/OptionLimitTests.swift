import Foundation
import TestSupport
import Testing

/// Numeric options that once reached a trapping conversion (Int64(1e300 * 1000), Duration of
/// 1e300 s, UInt64 of an infinite schedule): each is refused with exit 64 and a sentence naming
/// the option, before anything connects (issue 11).
@Suite("Option limits")
struct OptionLimitTests {
    static let cases: [(arguments: [String], names: String)] = [
        (["serve", "--insecure-no-auth", "--heartbeat-seconds", "1e300"], "--heartbeat-seconds"),
        (["serve", "--insecure-no-auth", "--heartbeat-seconds", "inf"], "--heartbeat-seconds"),
        (["serve", "--insecure-no-auth", "--tree-cache-max-age-seconds", "1e300"], "--tree-cache-max-age-seconds"),
        (["serve", "--insecure-no-auth", "--statement-timeout-ms", "9223372036854775807"], "--statement-timeout-ms"),
        (["migrate", "up", "--lock-wait", "1e300"], "--lock-wait"),
        (["migrate", "status", "--lock-timeout", "inf"], "--lock-timeout"),
        (["ingest", "--event-retention-days", "1e300"], "--event-retention-days"),
        (["ingest", "--batch-wait-ms", "9223372036854775807"], "--batch-wait-ms"),
        (["ingest", "--batch-min-wait-ms", "9223372036854775807"], "--batch-min-wait-ms"),
        (["bench", "ingest", "--rate", "1e-300"], "--rate"),
        (["token", "--jwt-hs256-secret", String(repeating: "s", count: 32), "--subject", "a", "--expires-in", "nan"], "--expires-in"),
        // Accepted once, and then wrong: a heartbeat loop, a cap below 1, dead letters Kafka refuses.
        (["serve", "--insecure-no-auth", "--heartbeat-seconds", "0.0001"], "--heartbeat-seconds"),
        (["badges", "show", "--user", "u", "--count-cap=-7"], "--count-cap"),
        (["ingest", "--dlq-topic", "a b"], "--dlq-topic"),
        (["token", "--jwt-hs256-secret", String(repeating: "s", count: 32), "--subject", "a b"], "--subject"),
        (["webhooks", "run", "--first-retry-seconds", "3600", "--max-retry-seconds", "1"], "--first-retry-seconds"),
        // A connection string libpq cannot read: refused at start, not retried for ever.
        (["rollup", "--database-url", "postgresql://%zz@127.0.0.1/x"], "--database-url"),
        (["serve", "--insecure-no-auth", "--database-url", "postgresql://reddot@127.0.0.1:1/x", "--replica-database-url", "host='x"], "--replica-database-url"),
    ]

    @Test("huge, infinite and NaN numbers are refused with exit 64, not a trap")
    func refused() async throws {
        let reddot = try ReddotBinary.url.get()
        for (arguments, name) in Self.cases {
            let (status, output) = try await ChildProcess.run(reddot.path, arguments, mergingStandardError: true)
            #expect(status == 64, "\(arguments): exit \(status)\n\(output)")
            #expect(output.contains(name), "\(arguments): \(output)")
        }
    }
}
