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
        """

    /// A record of `json` keyed by `key`.
    func record(_ key: String, _ json: String) -> (key: String, value: [UInt8]) {
        (key: key, value: Array(json.utf8))
    }

    @Test("remove or clear first, or content or increment first: the same tree, nothing stuck, nothing lost")
    func bothOrders() async throws {
        let harness = try await IngestHarness(partitions: 2)
        defer { Task { await harness.tearDown() } }
        var configuration = harness.configuration(group: "g-order", batchSize: 50)
        configuration.rules = try RuleSet(yaml: Self.rules)
        let running = RunningIngest.start(IngestService(configuration: configuration, logger: harness.logger), logger: harness.logger)
        defer { Task { try? await running.stop() } }

        /// Publishes one record after another, each applied before the next is sent (so the
        /// order they are applied in is the order given), and returns the partition of each.
        func publishInOrder(_ records: [(key: String, value: [UInt8])]) async throws -> [Int32] {
            var partitions: [Int32] = []
            for record in records {
                let ends = try await harness.publish([record])
                partitions += ends.keys.map(\.partition)
                #expect(try await harness.waitForOffsets(group: "g-order", ends, seconds: 60))
            }
            return partitions
        }

        // The key of a multi-user event is its first user; the readers below are keyed by
        // themselves. Pick a reader whose key lands in the other partition.
        let sender = "alice"
        let senderPartition = try await publishInOrder([record(sender, #"{"id":"probe-a","op":"incr","user":"alice","path":"root.probe"}"#)])
        var reader = ""
        for candidate in (0..<20).map({ "reader\($0)" }) {
            let probe = try await publishInOrder([record(candidate, #"{"id":"probe-\#(candidate)","op":"incr","user":"\#(candidate)","path":"root.probe"}"#)])
            if probe != senderPartition {
                reader = candidate
                break
            }
        }
        try #require(!reader.isEmpty, "no reader key landed in the other partition")

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
