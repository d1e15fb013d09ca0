import BadgeCore
import BadgeIngest
import BadgeStore
import Foundation
import LibPQ
import TestSupport
import Testing

@Suite("Ingest stores the rules file's aggregation modes, and the rollup counts with them")
struct IngestModesTests {
    @Test("a rules file with modes: the app icon counts chats, not messages; a file without the key keeps them, modes: [] removes them")
    func modesFromTheRulesFile() async throws {
        let harness = try await IngestHarness(partitions: 1)
        try await tearingDown({ await harness.tearDown() }) {
            let rules = """
                rules:
                  - type: chat.message
                    op: incr
                    path: root.chat.{conversation}
                """
            let store = BadgeStore(pool: harness.pool)
            func run(_ yaml: String, group: String, records: [(key: String, value: [UInt8])]) async throws {
                var configuration = harness.configuration(group: group)
                configuration.rules = try RuleSet(yaml: yaml)
                let running = RunningIngest.start(IngestService(configuration: configuration, logger: harness.logger), logger: harness.logger)
                let ends = try await harness.publish(records)
                #expect(try await harness.waitForOffsets(group: group, ends, seconds: 60))
                // The modes are stored beside the consumer loop: wait for them, as the rollup would.
                let deadline = Date().addingTimeInterval(30)
                let expected = try RuleSet(yaml: yaml)
                while Date() < deadline, expected.declaresModes, try await store.aggregationModes() != expected.modes {
                    try await Task.sleep(for: .milliseconds(50))
                }
                try await running.stop()
                try await harness.rollUp()
            }
            func message(_ index: Int, _ conversation: String) -> (key: String, value: [UInt8]) {
                (key: "alice", value: Array(#"{"id":"m\#(index)","type":"chat.message","users":["alice"],"attrs":{"conversation":"\#(conversation)"}}"#.utf8))
            }
            let alice = try UserID(validating: "alice")

            try await run(rules + "\nmodes:\n  - path: root.chat\n    mode: children\n", group: "g-modes-1",
                records: (0..<6).map { message($0, ["c1", "c1", "c1", "c1", "c2", "c3"][$0]) })
            #expect(try await store.aggregationModes().entries.map(\.pattern) == ["root.chat"])
            var tree = try #require(try await store.tree(for: alice).tree)
            #expect(tree.count == 3, "three chats, not six messages")
            #expect(tree.children.first?.children.first?.count == 4, "root.chat.c1 keeps its four messages")

            // A file without `modes` leaves them: a message in c1 adds no chat, one in c4 does.
            try await run(rules, group: "g-modes-2", records: [message(6, "c1"), message(7, "c4")])
            #expect(try await store.aggregationModes().entries.count == 1)
            tree = try #require(try await store.tree(for: alice).tree)
            #expect(tree.count == 4)

            // `modes: []` removes them; after verify --repair (which recounts alice if the rollup
            // added the new message to aggregates counted as chats), every node sums again.
            try await run(rules + "\nmodes: []\n", group: "g-modes-3", records: [message(8, "c1")])
            #expect(try await store.aggregationModes().entries.isEmpty)
            _ = try await BadgeVerifier(store: store).run(repair: true)
            #expect(try await store.tree(for: alice).tree?.count == 9)
            #expect(try await BadgeVerifier(store: store).run(repair: false).mismatches == 0)
        }
    }
}
