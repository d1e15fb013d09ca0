import BadgeCore
import Foundation

/// Event records: a decoded event re-encodes to a record that decodes to the same event (dates
/// to the microsecond), and re-encoding is then a fixed point; the rules map it to a valid path
/// and an operation within limits; applying that operation to a model tree whose counts are near
/// `Int64.max` saturates, and the coalesced batch agrees with one-by-one application.
///
/// An input starting with `rules:` is a rules file: when it loads, every rule renders a valid path.
enum EventsFuzzTarget {
    static let target = FuzzTarget.events

    /// Rules for content events, with whole-label and part-label placeholders.
    static let rules: RuleSet = {
        let yaml = """
            rules:
              - type: chat.message
                op: incr
                path: root.chat.{conversation}
              - type: feature.launched
                op: set
                icon: new
                path: root.settings.{feature}
              - type: shop.item
                op: set
                count: 3
                path: root.shop.item_{id}.{kind}
              - type: chat.read
                op: clear
                force: true
                path: root.chat.{conversation}
            """
        do {
            return try RuleSet(yaml: yaml)
        } catch {
            // A constant of this file, not input: a failure here is a bug in the harness.
            fatalError("the fuzz rules do not load: \(error)")
        }
    }()

    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    static func run(_ bytes: [UInt8]) {
        if bytes.starts(with: Array("rules:".utf8)) {
            runRules(bytes)
            return
        }
        let decoder = EventDecoder()
        let event: BadgeEvent
        switch decoder.decode(bytes) {
        case .failure(let rejection):
            FuzzFailure.checkMessage(rejection.message, target)
            // The intake (with the lenient read of the dead letter's event id) refuses it alike.
            guard case .failure(let refused) = EventIntake(rules: nil).check(bytes), refused.rejection == rejection else {
                FuzzFailure.fail(target, "the intake and the decoder disagree on a refused record")
            }
            return
        case .success(let decoded):
            event = decoded
        }
        let encoder = EventEncoder()
        let encoded = encoder.encode(event)
        guard case .success(let again) = decoder.decode(encoded) else {
            FuzzFailure.fail(target, "the encoded event does not decode: \(String(decoding: encoded, as: UTF8.self).debugDescription)")
        }
        FuzzFailure.check(
            sameExceptDates(event, again) && closeDates(event, again), target,
            "decode(encode(e)) differs from e: \(event) vs \(again)")
        let reencoded = encoder.encode(again)
        FuzzFailure.check(reencoded == encoded, target, "encoding is not a fixed point: \(String(decoding: reencoded, as: UTF8.self).debugDescription)")
        FuzzFailure.check(decoder.decode(reencoded) == .success(again), target, "decoding is not a fixed point")
        mapAndApply(event)
    }

    static func sameExceptDates(_ first: BadgeEvent, _ second: BadgeEvent) -> Bool {
        var first = first
        var second = second
        first.occurredAt = first.occurredAt.map { _ in .distantPast }
        first.expiresAt = first.expiresAt.map { _ in .distantPast }
        second.occurredAt = second.occurredAt.map { _ in .distantPast }
        second.expiresAt = second.expiresAt.map { _ in .distantPast }
        return first == second
    }

    /// Dates within half a microsecond (the encoder writes microseconds), plus a few units in the
    /// last place of `Date`'s `Double` (about 30 µs near year 9999).
    static func closeDates(_ first: BadgeEvent, _ second: BadgeEvent) -> Bool {
        func close(_ a: Date?, _ b: Date?) -> Bool {
            guard let a, let b else { return a == nil && b == nil }
            let x = a.timeIntervalSinceReferenceDate
            let y = b.timeIntervalSinceReferenceDate
            return abs(x - y) <= 0.000_000_5 + 4 * max(x.ulp, y.ulp)
        }
        return close(first.occurredAt, second.occurredAt) && close(first.expiresAt, second.expiresAt)
    }

    static func mapAndApply(_ event: BadgeEvent) {
        let mapped: MappedOperation
        switch rules.map(event) {
        case .failure(let rejection):
            FuzzFailure.checkMessage(rejection.message, target)
            guard case .content = event.body else { FuzzFailure.fail(target, "a direct operation does not map: \(rejection)") }
            return
        case .success(let operation):
            mapped = operation
        }
        FuzzFailure.check(mapped.operation.isWithinLimits, target, "the operation is beyond the limits: \(mapped.operation)")
        FuzzFailure.check((try? BadgePath(validating: mapped.path.rawValue)) == mapped.path, target, "mapped to an invalid path")
        if case .operation(let path, let operation) = event.body {
            FuzzFailure.check(mapped.path == path && mapped.operation == operation, target, "a direct operation changed in mapping")
        }
        guard let mutation = mapped.mutations().first else { return }

        // A tree whose counts are near Int64.max: the node, a sibling and the parent's own count.
        let path = mutation.path
        var states: [BadgePath: BadgeState] = [path: BadgeState(count: .max - 1)]
        if let parent = path.parent {
            states[parent] = BadgeState(count: .max / 2)
            if let sibling = try? parent.appending(label: "fuzz_sibling"), sibling != path {
                states[sibling] = BadgeState(count: .max - 3)
            }
        }
        var oneByOne = BadgeTree(states: states)
        var batch = BadgeBatch()
        for _ in 0..<3 { batch.append(mutation) }
        for timed in BadgeBatch.timed([mutation, mutation, mutation], readAt: batch.now) {
            oneByOne.apply(timed, now: now)
        }
        var coalesced = BadgeTree(states: states)
        coalesced.apply(batch, for: mutation.user, now: now)
        // BadgeBatch's contract: an expiry set within a batch counts as not yet passed there, so
        // the two agree only for expiries after `now` (or none).
        if (mutation.expiresAt.map { $0 > now } ?? true) {
            FuzzFailure.check(oneByOne == coalesced, target, "the coalesced batch differs from one-by-one application")
        }
        let aggregates = oneByOne.aggregates(now: now)
        for (node, aggregate) in aggregates {
            FuzzFailure.check(aggregate.count >= 0, target, "a negative aggregate at \(node)")
            if let parent = node.parent, let parentAggregate = aggregates[parent] {
                FuzzFailure.check(parentAggregate.count >= aggregate.count, target, "\(parent) counts less than its child \(node)")
            }
        }
        _ = oneByOne.node(at: .root, now: now)
    }

    static func runRules(_ bytes: [UInt8]) {
        guard let yaml = String(validating: bytes, as: UTF8.self) else { return }
        let ruleSet: RuleSet
        do throws(RuleSetError) {
            ruleSet = try RuleSet(yaml: yaml)
        } catch {
            FuzzFailure.check(!error.message.isEmpty, target, "an empty rules error")
            return
        }
        for rule in ruleSet.rules {
            FuzzFailure.check(rule.operation.isWithinLimits, target, "rule \(rule.type) is beyond the limits")
            let attributes = Dictionary(uniqueKeysWithValues: rule.template.placeholders.map { ($0, "v") })
            do throws(EventRejection) {
                _ = try rule.template.render(attributes: attributes, type: rule.type)
            } catch {
                FuzzFailure.fail(target, "rule \(rule.type) does not render: \(error)")
            }
        }
    }
}
