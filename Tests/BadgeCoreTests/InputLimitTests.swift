import BadgeCore
import Foundation
import TestSupport
import Testing

/// Numbers and dates at the edges of what events may carry (issue 11): refused with a reason, or
/// kept within the model's saturating arithmetic; never a trap.
@Suite("Input limits of events and the model")
struct InputLimitTests {
    @Test("timestamps must fall in the years 1970-9999 UTC, after the offset and the Double's rounding")
    func timestampRange() throws {
        let refused = [
            "0000-01-01T00:00:00Z", "0001-01-01T00:00:00Z", "1500-03-10T12:00:00Z", "1969-12-31T23:59:59.999Z",
            "1970-01-01T00:00:00+00:01", "9999-12-31T23:59:59-00:01", "9999-12-31T23:59:59.999999Z",
            "9999-12-31T23:59:59.9999999999Z",
        ]
        for text in refused {
            let found = rejection(#"{"id":"t","op":"set","user":"u","path":"root.a","expires_at":"\#(text)"}"#)
            #expect(found?.reason == .invalidField, "\(text)")
            #expect(found?.message.contains("from 1970 to 9999") == true, "\(text): \(String(describing: found))")
        }
        for text in ["1970-01-01T00:00:00Z", "1970-01-01T00:00:00-00:01", "9999-12-31T23:59:59Z", "9999-12-31T23:59:59.99Z", "9999-12-31T23:59:59+23:59"] {
            let decoded = try #require(event(#"{"id":"t","op":"set","user":"u","path":"root.a","occurred_at":"\#(text)"}"#), "\(text)")
            // What is read is written back within the years, and reads again to the same instant.
            let encoded = EventEncoder().encode(decoded)
            let again = try #require(try? EventDecoder().decode(encoded).get(), "\(String(decoding: encoded, as: UTF8.self))")
            let first = try #require(decoded.occurredAt).timeIntervalSinceReferenceDate
            let second = try #require(again.occurredAt).timeIntervalSinceReferenceDate
            #expect(abs(first - second) <= 0.000_000_5 + 4 * first.ulp, "\(text)")
        }
    }

    @Test("a time only compared with now reads every year, clamped into 1970-9999; what is not RFC 3339 stays refused")
    func clampedTimes() throws {
        let first = try #require(Date(rfc3339: "1970-01-01T00:00:00Z"))
        let last = try #require(Date(rfc3339: "9999-12-31T23:59:59Z"))
        for text in ["0000-01-01T00:00:00Z", "1500-03-10T12:00:00Z", "1969-12-31T23:59:59.999Z", "1970-01-01T00:00:00+00:01"] {
            #expect(Date(rfc3339: text) == nil && Date(rfc3339Clamping: text) == first, "\(text)")
        }
        for text in ["9999-12-31T23:59:59-00:01", "9999-12-31T23:59:59.9999999999Z"] {
            #expect(Date(rfc3339: text) == nil && Date(rfc3339Clamping: text) == last, "\(text)")
        }
        #expect(Date(rfc3339Clamping: "2026-12-01T08:00:00+01:00") == Date(rfc3339: "2026-12-01T07:00:00Z"))
        for text in ["tomorrow", "2026-02-30T00:00:00Z", "2026-12-01T08:00:00", "99999-01-01T00:00:00Z"] {
            #expect(Date(rfc3339Clamping: text) == nil, "\(text)")
        }
    }

    @Test("count and by beyond 1,000,000,000 (and at Int64's limits) are refused")
    func countLimits() {
        for json in [
            #"{"id":"c","op":"set","user":"u","path":"root.a","count":9223372036854775807}"#,
            #"{"id":"c","op":"set","user":"u","path":"root.a","count":9223372036854775808}"#,
            #"{"id":"c","op":"set","user":"u","path":"root.a","count":-9223372036854775808}"#,
            #"{"id":"c","op":"set","user":"u","path":"root.a","count":1e300}"#,
            #"{"id":"c","op":"incr","user":"u","path":"root.a","by":1000000001}"#,
            #"{"id":"c","op":"incr","user":"u","path":"root.a","by":9.3e18}"#,
        ] {
            #expect(rejection(json)?.reason == .invalidField, "\(json)")
        }
    }

    @Test("sums near Int64.max saturate in the tree, the batch and the aggregates")
    func saturation() throws {
        let a = path("root.a")
        let b = path("root.b")
        var tree = BadgeTree(states: [a: BadgeState(count: .max - 1), b: BadgeState(count: .max)])
        var batch = BadgeBatch()
        let alice = user("alice")
        for _ in 0..<3 {
            tree.apply(.increment(by: BadgeOperation.maximumCount), at: a, now: now)
            batch.append(BadgeMutation(user: alice, path: a, operation: .increment(by: BadgeOperation.maximumCount)))
        }
        #expect(tree.counters[a]?.count == .max)
        var coalesced = BadgeTree(states: [a: BadgeState(count: .max - 1), b: BadgeState(count: .max)])
        coalesced.apply(batch, for: alice, now: now)
        #expect(coalesced.counters == tree.counters)
        let aggregates = tree.aggregates(now: now)
        #expect(aggregates[.root]?.count == .max)
        #expect(tree.node(at: .root, now: now)?.text == "99+")
    }
}

@Suite("Depths from untrusted input")
struct DepthLimitTests {
    @Test("a depth of Int.max (reddot badges show --depth) is all levels, not an overflow")
    func hugeDepth() throws {
        let tree = BadgeTree(states: [path("root.a.b"): BadgeState(count: 2)])
        let aggregates = tree.aggregates(now: now)
        let all = BadgeNode.build(aggregates: aggregates, at: path("root.a"), depth: .max, display: BadgeDisplay())
        #expect(all == BadgeNode.build(aggregates: aggregates, at: path("root.a"), depth: nil, display: BadgeDisplay()))
        #expect(all?.children.map(\.path.rawValue) == ["root.a.b"])
        let none = BadgeNode.build(aggregates: aggregates, at: .root, depth: .min, display: BadgeDisplay())
        #expect(none?.children.isEmpty == true)
    }
}
