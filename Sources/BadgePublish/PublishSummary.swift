/// What `reddot publish` shows after sending: the lines for stdout and stderr, and, when the run
/// did not fully succeed, why (the command picks its exit code from ``Failure/kind``).
public struct PublishSummary: Sendable {
    /// Why a run did not fully succeed.
    public enum Kind: Sendable {
        /// No event reached a broker: nothing was delivered, every failure was a timeout or
        /// transport error.
        case unreachable
        /// Some events were not delivered.
        case notDelivered
        /// Some input lines were invalid and not sent (the rest were delivered).
        case invalidInput
    }

    /// The verdict of a run that did not fully succeed.
    public struct Failure: Sendable {
        /// Why.
        public var kind: Kind
        /// The sentence to end with.
        public var message: String
    }

    /// Lines for stdout, in order.
    public var output: [String] = []
    /// Lines for stderr (before the final sentence), in order.
    public var errors: [String] = []
    /// Nil when every event was delivered and every line was valid.
    public var failure: Failure?

    /// The summary of `outcome` from `sender`, with `invalid` of `total` input lines refused before
    /// sending; every delivery is listed when `verbose`.
    public init(_ outcome: EventSender.Outcome, sender: EventSender, invalid: Int, total: Int, verbose: Bool) {
        if verbose {
            output += outcome.delivered.map { report in
                "\(report.label)\(report.id) -> partition \(report.delivery.partition), offset \(report.delivery.offset)"
            }
        }
        let sent = outcome.deliveredCount + outcome.failedCount
        let first = outcome.failures.first?.error
        if outcome.deliveredCount == 0, outcome.failedCount > 0,
            outcome.failures.allSatisfy({ EventSender.isUnreachable($0.error) })
        {
            let what = sent == 1 ? "the event was not delivered" : "none of the \(sent) events was delivered"
            failure = Failure(
                kind: .unreachable,
                message: "cannot reach Kafka at \(sender.brokers): \(what) within message.timeout.ms "
                    + "(\(sender.timeoutDescription))" + (first.map { " [\($0.code)]" } ?? ""))
            return
        }
        output.append("published \(outcome.deliveredCount) \(Self.events(outcome.deliveredCount, verb: false))")
        if outcome.failedCount > 0 {
            errors += outcome.failures.map { "\($0.label)\($0.id) was not delivered: \($0.error.message)" }
            if outcome.failedCount > outcome.failures.count {
                errors.append("… and \(outcome.failedCount - outcome.failures.count) more")
            }
            failure = Failure(
                kind: .notDelivered,
                message: "\(outcome.failedCount) of \(sent) \(Self.events(sent, verb: false)) failed: "
                    + (first.map { "\($0.message) [\($0.code)]" } ?? "unknown error"))
        } else if invalid > 0 {
            failure = Failure(
                kind: .invalidInput, message: "\(invalid) of \(total) \(Self.events(total)) invalid and not published")
        }
    }

    /// `event is`/`events are` (with `verb`), else `event`/`events`, for `count`.
    public static func events(_ count: Int, verb: Bool = true) -> String {
        if verb { return count == 1 ? "event is" : "events are" }
        return count == 1 ? "event" : "events"
    }
}
