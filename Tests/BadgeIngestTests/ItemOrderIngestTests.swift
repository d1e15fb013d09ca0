import BadgeCore
import BadgeIngest
import BadgeStore
import Foundation
import RdKafka
import TestSupport
import Testing

/// A multi-user event travels in its first user's partition; the other users' own events travel
/// in theirs. Whatever order the two partitions are read in, no dot may stick.
@Suite("Two partitions: a content event for several users and one user's remove or clear, in both orders")
struct ItemOrderIngestTests {
    static let rules = """
        rules:
          - type: chat.message
            op: add
            item: "{message}"
            path: root.chat.{conversation}
          - type: message.read
            op: remove
            item: "{message}"
            path: root.chat.{conversation}
          - type: chat.read
            op: clear
            path: root.chat.{conversation}
          - type: feature.launched
            op: set
            icon: new
            path: root.settings.{feature}
          - type: feature.opened
            op: clear
            path: root.settings.{feature}
        """

    /// An ingest service with the suite's rules, consuming as `group`, in batches of 50.
    func startIngest(on harness: IngestHarness, group: String) throws -> RunningIngest {
        var configuration = harness.configuration(group: group, batchSize: 50)
        configuration.rules = try RuleSet(yaml: Self.rules)
        return RunningIngest.start(IngestService(configuration: configuration, logger: harness.logger), logger: harness.logger)
    }

    /// A record of `json` keyed by `key`.
    func record(_ key: String, _ json: String) -> (key: String, value: [UInt8]) {
        (key: key, value: Array(json.utf8))
    }

    /// Publishes one record after another, each applied by the consumer group `group` before
    /// the next is sent (so the order they are applied in is the order given), and returns the
    /// partition of each.
    func publishInOrder(_ records: [(key: String, value: [UInt8])], to harness: IngestHarness, group: String) async throws -> [Int32] {
        var partitions: [Int32] = []
        for record in records {
            let ends = try await harness.publish([record])
            partitions += ends.keys.map(\.partition)
            #expect(try await harness.waitForOffsets(group: group, ends, seconds: 60))
        }
        return partitions
    }

    /// A user id named `prefix` and a number whose key lands in another partition than
    /// `sender`'s (the key of a multi-user event is its first user; a user's own events are keyed
    /// by the user).
    func readerInOtherPartition(than sender: String, prefix: String, harness: IngestHarness, group: String) async throws -> String {
        let senderPartition = try await publishInOrder(
            [record(sender, #"{"id":"probe-\#(sender)","op":"incr","user":"\#(sender)","path":"root.probe"}"#)], to: harness, group: group)
        for candidate in (0..<20).map({ "\(prefix)\($0)" }) {
            let probe = try await publishInOrder(
                [record(candidate, #"{"id":"probe-\#(candidate)","op":"incr","user":"\#(candidate)","path":"root.probe"}"#)], to: harness,
                group: group)
            if probe != senderPartition { return candidate }
        }
        throw TestSetupError("no key of \(prefix)0…\(prefix)19 landed in another partition than \(sender)'s")
    }

    @Test("remove or clear first, or content or increment first: the same tree, nothing stuck, nothing lost")
    func bothOrders() async throws {
        let harness = try await IngestHarness(partitions: 2)
        try await tearingDown({ await harness.tearDown() }) {
            let running = try startIngest(on: harness, group: "g-order")
            try await tearingDown({ try? await running.stop() }) {

                func publishInOrder(_ records: [(key: String, value: [UInt8])]) async throws -> [Int32] {
                    try await self.publishInOrder(records, to: harness, group: "g-order")
                }
                let sender = "alice"
                let reader = try await readerInOtherPartition(than: sender, prefix: "reader", harness: harness, group: "g-order")

                let content = { (conversation: String, message: String, at: String) in
                    self.record(sender, #"{"id":"msg-\#(conversation)-\#(message)","type":"chat.message","users":["\#(sender)","\#(reader)"],"attrs":{"conversation":"\#(conversation)","message":"\#(message)"},"occurred_at":"\#(at)"}"#)
                }
                let read = { (conversation: String, message: String) in
                    self.record(reader, #"{"id":"read-\#(conversation)-\#(message)","type":"message.read","user":"\#(reader)","attrs":{"conversation":"\#(conversation)","message":"\#(message)"}}"#)
                }
                let clear = { (conversation: String, at: String) in
                    self.record(reader, #"{"id":"clear-\#(conversation)","type":"chat.read","user":"\#(reader)","attrs":{"conversation":"\#(conversation)"},"occurred_at":"\#(at)"}"#)
                }
                let increment = { (feed: String, at: String) in
                    self.record(sender, #"{"id":"incr-\#(feed)","op":"incr","users":["\#(sender)","\#(reader)"],"path":"root.feed.\#(feed)","occurred_at":"\#(at)"}"#)
                }
                let clearFeed = { (feed: String, at: String) in
                    self.record(reader, #"{"id":"clear-\#(feed)","op":"clear","user":"\#(reader)","path":"root.feed.\#(feed)","occurred_at":"\#(at)"}"#)
                }
                // c1: content, then the reader's remove. c2: the remove arrives first.
                // c3: content, then a clear that occurred after it. c4: the clear arrives first.
                // c5: a clear arrives first, then a message that occurred after the clear: it stays.
                let partitions = try await publishInOrder([
                    content("c1", "m1", "2026-11-23T10:00:00Z"), read("c1", "m1"),
                    read("c2", "m2"), content("c2", "m2", "2026-11-23T10:00:00Z"),
                    content("c3", "m3", "2026-11-23T10:00:00Z"), clear("c3", "2026-11-23T10:05:00Z"),
                    clear("c4", "2026-11-23T10:05:00Z"), content("c4", "m4", "2026-11-23T10:00:00Z"),
                    clear("c5", "2026-11-23T10:05:00Z"), content("c5", "m5", "2026-11-23T10:06:00Z"),
                    // The same four orders with counters: f3 and f4 end cleared; f5 and f6 keep the
                    // increment that occurred after the clear, whichever arrived first.
                    increment("f3", "2026-11-23T10:00:00Z"), clearFeed("f3", "2026-11-23T10:05:00Z"),
                    clearFeed("f4", "2026-11-23T10:05:00Z"), increment("f4", "2026-11-23T10:00:00Z"),
                    clearFeed("f5", "2026-11-23T10:05:00Z"), increment("f5", "2026-11-23T10:06:00Z"),
                    increment("f6", "2026-11-23T10:06:00Z"), clearFeed("f6", "2026-11-23T10:05:00Z"),
                ])
                #expect(Set(partitions).count == 2, "the two kinds of record went to different partitions: \(partitions)")
                try await harness.rollUp()

                let store = BadgeStore(pool: harness.pool)
                let readerTree = try await store.tree(for: try UserID(validating: reader), at: try BadgePath(validating: "root.chat"))
                #expect(readerTree.tree?.children.map(\.path.rawValue) == ["root.chat.c5"], "\(String(describing: readerTree.tree))")
                #expect(readerTree.tree?.count == 1)
                let readerFeed = try await store.tree(for: try UserID(validating: reader), at: try BadgePath(validating: "root.feed"))
                #expect(readerFeed.tree?.children.map(\.path.rawValue) == ["root.feed.f5", "root.feed.f6"], "\(String(describing: readerFeed.tree))")
                #expect(readerFeed.tree?.count == 2)
                // The sender's own copies are untouched by the reader's removes and clears.
                let senderTree = try await store.tree(for: try UserID(validating: sender), at: try BadgePath(validating: "root.chat"))
                #expect(senderTree.tree?.count == 5)
                let senderFeed = try await store.tree(for: try UserID(validating: sender), at: try BadgePath(validating: "root.feed"))
                #expect(senderFeed.tree?.count == 4)
                #expect(try await harness.count("SELECT count(*)::int FROM rejected_record") == 0)
            }
        }
    }

    @Test("a multi-user set rule and one user's own clear, and a decrement and its increment, in both orders: the same tree")
    func timedSetsAndDecrements() async throws {
        let harness = try await IngestHarness(partitions: 2)
        try await tearingDown({ await harness.tearDown() }) {
            let running = try startIngest(on: harness, group: "g-timed")
            try await tearingDown({ try? await running.stop() }) {

                func publishInOrder(_ records: [(key: String, value: [UInt8])]) async throws -> [Int32] {
                    try await self.publishInOrder(records, to: harness, group: "g-timed")
                }
                let sender = "launcher"
                let reader = try await readerInOtherPartition(than: sender, prefix: "user", harness: harness, group: "g-timed")

                // The launch rule is keyed by its first user, the sender; the reader's own events by the
                // reader: they travel in different partitions.
                let launch = { (feature: String, at: String) in
                    self.record(sender, #"{"id":"launch-\#(feature)","type":"feature.launched","users":["\#(sender)","\#(reader)"],"attrs":{"feature":"\#(feature)"},"occurred_at":"\#(at)"}"#)
                }
                let opened = { (feature: String, at: String) in
                    self.record(reader, #"{"id":"open-\#(feature)","type":"feature.opened","user":"\#(reader)","attrs":{"feature":"\#(feature)"},"occurred_at":"\#(at)"}"#)
                }
                let increment = { (node: String, by: Int, at: String) in
                    self.record(sender, #"{"id":"incr-\#(node)","op":"incr","users":["\#(sender)","\#(reader)"],"path":"root.inbox.\#(node)","by":\#(by),"occurred_at":"\#(at)"}"#)
                }
                let decrement = { (node: String, by: Int, at: String) in
                    self.record(reader, #"{"id":"decr-\#(node)","op":"decr","user":"\#(reader)","path":"root.inbox.\#(node)","by":\#(by),"occurred_at":"\#(at)"}"#)
                }
                let set = { (node: String, count: Int, at: String) in
                    self.record(reader, #"{"id":"set-\#(node)-\#(count)","op":"set","user":"\#(reader)","path":"root.count.\#(node)","count":\#(count),"occurred_at":"\#(at)"}"#)
                }
                // s1: the launch, then the reader opens it; s2: the open arrives first (the reader's
                // partition ahead). s3: opened before a later launch (a second launch of the feature):
                // the dot stays, whichever arrives first; s4 likewise, the other order.
                // i1: 3 arrive, then 2 are read; i2: the decrement arrives first. i3: a decrement that
                // occurred before the increment: it meets nothing, so all 3 show.
                // n1, n2: two sets of a node, the later-timed one arriving first: it holds.
                let partitions = try await publishInOrder([
                    launch("s1", "2026-11-23T10:00:00Z"), opened("s1", "2026-11-23T10:05:00Z"),
                    opened("s2", "2026-11-23T10:05:00Z"), launch("s2", "2026-11-23T10:00:00Z"),
                    opened("s3", "2026-11-23T10:05:00Z"), launch("s3", "2026-11-23T10:06:00Z"),
                    launch("s4", "2026-11-23T10:06:00Z"), opened("s4", "2026-11-23T10:05:00Z"),
                    increment("i1", 3, "2026-11-23T10:00:00Z"), decrement("i1", 2, "2026-11-23T10:01:00Z"),
                    decrement("i2", 2, "2026-11-23T10:01:00Z"), increment("i2", 3, "2026-11-23T10:00:00Z"),
                    decrement("i3", 2, "2026-11-23T09:59:00Z"), increment("i3", 3, "2026-11-23T10:00:00Z"),
                    set("n1", 7, "2026-11-23T10:02:00Z"), set("n1", 4, "2026-11-23T10:01:00Z"),
                ])
                #expect(Set(partitions).count == 2, "the two kinds of record went to different partitions: \(partitions)")
                try await harness.rollUp()

                let store = BadgeStore(pool: harness.pool)
                let readerID = try UserID(validating: reader)
                let settings = try await store.tree(for: readerID, at: try BadgePath(validating: "root.settings"))
                #expect(settings.tree?.children.map(\.path.rawValue) == ["root.settings.s3", "root.settings.s4"], "\(String(describing: settings.tree))")
                #expect(settings.tree?.children.allSatisfy { $0.icon?.rawValue == "new" } == true)
                let inbox = try await store.tree(for: readerID, at: try BadgePath(validating: "root.inbox"))
                #expect(inbox.tree?.children.map { "\($0.path.rawValue)=\($0.count)" } == ["root.inbox.i1=1", "root.inbox.i2=1", "root.inbox.i3=3"], "\(String(describing: inbox.tree))")
                let counts = try await store.tree(for: readerID, at: try BadgePath(validating: "root.count"))
                #expect(counts.tree?.count == 7)
                // The sender's copies: every launch shows, and every increment in full.
                let senderID = try UserID(validating: sender)
                #expect(try await store.tree(for: senderID, at: try BadgePath(validating: "root.settings")).tree?.children.count == 4)
                #expect(try await store.tree(for: senderID, at: try BadgePath(validating: "root.inbox")).tree?.count == 9)
                #expect(try await harness.count("SELECT count(*)::int FROM rejected_record") == 0)
            }
        }
    }
}
