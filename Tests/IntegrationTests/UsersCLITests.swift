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
        try await tearingDown({ await harness.tearDown() }) {
            let changes = harness.topic + ".changes"
            try harness.cluster.createTopic(changes, partitions: 1)
            let ingest = try ReddotChild(harness.ingestArguments(group: "g-users"), in: harness.folder, name: "ingest")
            try await harness.publish([
                ("gx", #"{"id":"x1","op":"incr","user":"gx","path":"root.chat.c1","by":2}"#),
                ("gx", #"{"id":"x2","op":"incr","user":"gx","path":"root.","#),
                ("gy", #"{"id":"y1","op":"incr","user":"gy","path":"root.chat.c1"}"#),
            ])
            #expect(try await harness.waitForCount("SELECT count(*) FROM rejected_record", 1, seconds: 60) == 1, "\(ingest.standardError)")
            #expect(try await harness.waitForCount("SELECT count(*) FROM applied_user_event_generation", 2, seconds: 60) == 2, "\(ingest.standardError)")
            let url = harness.database.url
            let cli = CLITests()

            let export = try await cli.reddot(["users", "export", "--user", "gx", "--database-url", url])
            #expect(export.exitCode == 0, "\(export)")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(export.stdout.utf8)) as? [String: Any])
            let tables = try #require(object["tables"] as? [String: [Any]])
            #expect(tables["badge_increment"]?.count == 1 && tables["applied_user_event_generation"]?.count == 1, "\(export.stdout)")
            #expect((object["dead_letters"] as? [Any])?.count == 1, "the malformed record keyed gx: \(export.stdout)")

            let erase = try await cli.reddot([
                "users", "erase", "--user", "gx", "--database-url", url, "--brokers", harness.cluster.bootstrapServers,
                "--changes-topic", changes, "--topic", harness.topic,  // its dead-letter topic: <topic>.dlq, as ingest's
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
            #expect(try await harness.waitForCount("SELECT count(*) FROM applied_user_event_generation WHERE user_id = 'gy'", 2, seconds: 60) == 2)
            #expect(try await harness.count("SELECT count(*) FROM badge_increment WHERE user_id = 'gx'") == 0)
            #expect(try await harness.count("SELECT count(*) FROM applied_user_event_generation WHERE user_id = 'gx'") == 0)

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

    @Test("an erasure by the database alone (as DELETE /v1/users/{user} does): the running rollup's feed and ingest write the tombstones, once each, and again after a second erasure")
    func tombstonesFromTheRunningServices() async throws {
        let harness = try await PipelineHarness(partitions: 1)
        try await tearingDown({ await harness.tearDown() }) {
            let (changes, dlq) = (harness.topic + ".changes", harness.topic + ".dlq")
            try harness.cluster.createTopic(changes, partitions: 1)
            let ingest = try ReddotChild(harness.ingestArguments(group: "g-tomb"), in: harness.folder, name: "ingest")
            let rollup = try ReddotChild(
                ["rollup", "--database-url", harness.database.url, "--changes-brokers", harness.cluster.bootstrapServers, "--changes-topic", changes, "--log-level", "error"],
                in: harness.folder, name: "rollup")
            try await harness.publish([
                ("tx", #"{"id":"t1","op":"incr","user":"tx","path":"root.chat.c1"}"#),
                ("ty", #"{"id":"t2","op":"incr","user":"ty","path":"root.chat.c1"}"#),
            ])
            #expect(try await harness.waitForCount("SELECT count(*) FROM user_version", 2, seconds: 60) == 2, "\(ingest.standardError)")
            let url = harness.database.url
            let cli = CLITests()
            func readTopic(_ topic: String) async throws -> [Substring] {
                let read = try await PublishTests.run(
                    PublishTests.environmentTool, ["kcat", "-C", "-q", "-b", harness.cluster.bootstrapServers, "-t", topic, "-o", "beginning", "-e", "-f", "%k\\t%S\\n"])
                #expect(read.exitCode == 0, "\(read)")
                return read.stdout.split(separator: "\n")
            }
            for round in 1...2 {
                let erase = try await cli.reddot(["users", "erase", "--user", "tx", "--database-url", url])
                #expect(erase.exitCode == 0, "\(erase)")
                let summary = try #require(try JSONSerialization.jsonObject(with: Data(erase.stdout.utf8)) as? [String: Any])
                #expect((summary["tombstones"] as? [String] ?? []).isEmpty, "no brokers given: \(erase.stdout)")
                let stamped = "SELECT count(*) FROM erased_user WHERE user_id = 'tx' AND changes_tombstone_at IS NOT NULL AND dlq_tombstone_at IS NOT NULL"
                #expect(try await harness.waitForCount(stamped, 1, seconds: 60) == 1, "\(rollup.standardError) \(ingest.standardError)")
                let feed = try await readTopic(changes)
                #expect(feed.filter { $0 == "tx\t-1" }.count == round, "one tombstone per erasure on the changes topic: \(feed)")
                #expect(feed.last == "tx\t-1", "after the user's records: \(feed)")
                #expect(!feed.contains("ty\t-1"))
                let letters = try await readTopic(dlq)
                #expect(letters.filter { $0 == "tx\t-1" }.count == round, "one tombstone per erasure on the dead-letter topic: \(letters)")
            }
            #expect(try await rollup.stop() == 0, "\(rollup.standardError)")
            #expect(try await ingest.stop() == 0, "\(ingest.standardError)")
        }
    }
}
