import Foundation
import TestSupport
import Testing

/// `reddot users export` and `reddot users erase` as child processes, beside a running
/// `reddot ingest` (issue 28, "a user's data on request").
@Suite("reddot users export and erase as child processes")
struct UsersCLITests {
    @Test("export prints the user's rows; erase removes them, writes tombstones, and a later event for the user stays out")
    func exportEraseTombstones() async throws {
        let harness = try await PipelineHarness(partitions: 1)
        defer { Task { await harness.tearDown() } }
        let changes = harness.topic + ".changes"
        try harness.cluster.createTopic(changes, partitions: 1)
        let ingest = try ReddotChild(harness.ingestArguments(group: "g-users"), in: harness.folder, name: "ingest")
        try await harness.publish([
            ("gx", #"{"id":"x1","op":"incr","user":"gx","path":"root.chat.c1","by":2}"#),
            ("gx", #"{"id":"x2","op":"incr","user":"gx","path":"root.","#),
            ("gy", #"{"id":"y1","op":"incr","user":"gy","path":"root.chat.c1"}"#),
        ])
        #expect(try await harness.waitForCount("SELECT count(*) FROM rejected_record", 1, seconds: 60) == 1, "\(ingest.standardError)")
        #expect(try await harness.waitForCount("SELECT count(*) FROM applied_user_event", 2, seconds: 60) == 2, "\(ingest.standardError)")
        let url = harness.database.url
        let cli = CLITests()

        let export = try await cli.reddot(["users", "export", "--user", "gx", "--database-url", url])
        #expect(export.exitCode == 0, "\(export)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(export.stdout.utf8)) as? [String: Any])
        let tables = try #require(object["tables"] as? [String: [Any]])
        #expect(tables["badge_increment"]?.count == 1 && tables["applied_user_event"]?.count == 1, "\(export.stdout)")
        #expect((object["dead_letters"] as? [Any])?.count == 1, "the malformed record keyed gx: \(export.stdout)")

        let erase = try await cli.reddot([
            "users", "erase", "--user", "gx", "--database-url", url, "--brokers", harness.cluster.bootstrapServers,
            "--changes-topic", changes, "--dlq-topic", harness.topic + ".dlq",
        ])
        #expect(erase.exitCode == 0, "\(erase)")
        let summary = try #require(try JSONSerialization.jsonObject(with: Data(erase.stdout.utf8)) as? [String: Any])
        #expect(summary["dead_letters"] as? Int == 1 && summary["settled"] as? Bool == true, "\(erase.stdout)")
        #expect(summary["tombstones"] as? [String] == [changes, harness.topic + ".dlq"], "\(erase.stdout)")
        #expect(try await harness.count("SELECT count(*) FROM badge_increment WHERE user_id = 'gx'") == 0)

        // An event for gx still on its way: dropped; gy's after it applies.
        try await harness.publish([
            ("gx", #"{"id":"x3","op":"incr","user":"gx","path":"root.chat.c1"}"#),
            ("gy", #"{"id":"y2","op":"incr","user":"gy","path":"root.chat.c2"}"#),
        ])
        #expect(try await harness.waitForCount("SELECT count(*) FROM applied_user_event WHERE user_id = 'gy'", 2, seconds: 60) == 2)
        #expect(try await harness.count("SELECT count(*) FROM badge_increment WHERE user_id = 'gx'") == 0)
        #expect(try await harness.count("SELECT count(*) FROM applied_user_event WHERE user_id = 'gx'") == 0)

        // The tombstones: the user's key with no value, on both topics.
        for topic in [changes, harness.topic + ".dlq"] {
            let read = try await PublishTests.run(
                PublishTests.environmentTool,
                ["kcat", "-C", "-q", "-b", harness.cluster.bootstrapServers, "-t", topic, "-o", "beginning", "-e", "-f", "%k\\t%S\\n"])
            #expect(read.exitCode == 0, "\(read)")
            #expect(read.stdout.split(separator: "\n").contains("gx\t-1"), "\(topic): \(read.stdout)")
        }

        let bad = try await cli.reddot(["users", "erase", "--user", "has space", "--database-url", url])
        #expect(bad.exitCode == 64 && bad.stderr.contains("user"), "\(bad)")
        #expect(try await ingest.stop() == 0, "\(ingest.standardError)")
    }
}
