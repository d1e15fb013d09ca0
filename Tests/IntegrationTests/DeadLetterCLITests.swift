import Foundation
import TestSupport
import Testing

/// `reddot dlq list` and `reddot dlq replay` run as child processes, over the dead letters of a
/// real `reddot ingest`: the operator's path from "events are rejected" to "the badges are there".
@Suite("reddot dlq list and replay as child processes")
struct DeadLetterCLITests {
    @Test("list names the rejected records with their reasons (text and --json); replay with the missing rule applies them once; exit codes as documented")
    func listFixReplay() async throws {
        let harness = try await PipelineHarness(partitions: 2)
        try await tearingDown({ await harness.tearDown() }) {
            let ingest = try ReddotChild(harness.ingestArguments(group: "g-dlq"), in: harness.folder, name: "ingest")
            defer { _ = ingest }
            let promotion1 = #"{"id":"promo-1","type":"promo.flash","users":["d1","d2"],"attrs":{"item":"spring"}}"#
            let promotion2 = #"{"id":"promo-2","type":"promo.flash","users":["d3"],"attrs":{"item":"summer"}}"#
            let malformed = #"{"id":"broken-1","op":"incr","user":"d1","#
            try await harness.publish([
                ("d1", #"{"id":"chat-1","type":"chat.message","users":["d1"],"attrs":{"conversation":"c1"}}"#),
                ("d1", promotion1), ("d3", promotion2), ("d1", malformed),
            ])
            // Every record handled and the dead letters published.
            let handled = try await harness.waitForCount(
                "SELECT count(*) FROM rejected_record WHERE published_at IS NOT NULL", 3, seconds: 60)
            #expect(handled == 3, "\(ingest.standardError)")
            #expect(try await harness.waitForCount("SELECT count(*) FROM \(AppliedKeys.table)", 1) == 1)
            let url = harness.database.url
            let cli = CLITests()

            // list: one line per record, oldest first, with reason, origin, event id, flags, message.
            let list = try await cli.reddot(["dlq", "list", "--database-url", url])
            #expect(list.exitCode == 0, "\(list)")
            let lines = list.stdout.split(separator: "\n").map(String.init)
            #expect(lines.count == 3, "\(list)")
            let promotionLines = lines.filter { $0.contains("  unknown_type  ") }
            #expect(promotionLines.count == 2, "\(list)")
            #expect(promotionLines.contains { $0.contains("id=promo-1") && $0.contains("[published]") && $0.contains("promo.flash") }, "\(list)")
            #expect(promotionLines.contains { $0.contains("id=promo-2") && $0.contains("\(harness.topic)/") }, "\(list)")
            #expect(lines.contains { $0.contains("  malformed_json  ") }, "\(list)")

            // --json: the payload as sent, the origin, no replay yet.
            let json = try await cli.reddot(["dlq", "list", "--reason", "unknown_type", "--json", "--database-url", url])
            #expect(json.exitCode == 0, "\(json)")
            let objects = try json.stdout.split(separator: "\n").map { line in
                try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
            }
            #expect(objects.count == 2, "\(json)")
            let byEvent = Dictionary(objects.map { (($0["event_id"] as? String) ?? "", $0) }, uniquingKeysWith: { first, _ in first })
            #expect(byEvent["promo-1"]?["payload"] as? String == promotion1, "\(json)")
            #expect(byEvent["promo-2"]?["payload"] as? String == promotion2, "\(json)")
            #expect(byEvent["promo-2"]?["key"] as? String == "d3", "\(json)")
            #expect(byEvent["promo-1"]?["reason"] as? String == "unknown_type", "\(json)")
            #expect(byEvent["promo-1"]?["topic"] as? String == harness.topic, "\(json)")
            #expect(byEvent["promo-1"]?["replayed_at"] is NSNull, "\(json)")
            #expect((byEvent["promo-1"]?["message"] as? String)?.contains("promo.flash") == true, "\(json)")

            // Bad arguments: 64.
            let badReason = try await cli.reddot(["dlq", "list", "--reason", "no_such_reason", "--database-url", url])
            #expect(badReason.exitCode == 64, "\(badReason)")
            let noSelection = try await cli.reddot(["dlq", "replay", "--database-url", url])
            #expect(noSelection.exitCode == 64, "\(noSelection)")
            // An unreadable or invalid rules file: 65, nothing replayed.
            let missingRules = try await cli.reddot(
                ["dlq", "replay", "--reason", "unknown_type", "--rules", harness.folder.appendingPathComponent("none.yaml").path, "--database-url", url])
            #expect(missingRules.exitCode == 65, "\(missingRules)")
            let invalidRules = harness.folder.appendingPathComponent("invalid.yaml")
            try Data("rules:\n  - type: promo.flash\n    op: explode\n    path: root.x\n".utf8).write(to: invalidRules)
            let invalid = try await cli.reddot(["dlq", "replay", "--reason", "unknown_type", "--rules", invalidRules.path, "--database-url", url])
            #expect(invalid.exitCode == 65, "\(invalid)")
            // The database cannot be reached: 69.
            let unreachable = try await cli.reddot(["dlq", "list", "--database-url", "postgresql://reddot@127.0.0.1:1/reddot?connect_timeout=2"])
            #expect(unreachable.exitCode == 69, "\(unreachable)")

            // Replay before the cause is fixed (the same rules): still rejected, exit 2, nothing changes.
            let early = try await cli.reddot(
                ["dlq", "replay", "--reason", "unknown_type", "--rules", harness.rulesFile.path, "--database-url", url])
            #expect(early.exitCode == 2, "\(early)")
            #expect(early.stdout.components(separatedBy: "still rejected: unknown_type").count - 1 == 2, "\(early)")
            #expect(try await harness.count("SELECT count(*) FROM rejected_record WHERE replayed_at IS NOT NULL") == 0)

            // Meanwhile the producer re-sent promo-2 fixed, as a direct operation with the same id.
            try await harness.publish([("d3", #"{"id":"promo-2","op":"set","user":"d3","path":"root.promotion.summer"}"#)])
            #expect(try await harness.waitForCount("SELECT count(*) FROM \(AppliedKeys.table)", 2) == 2, "\(ingest.standardError)")

            // The fix: the missing rule. promo-1 is applied, promo-2 counts as done (not twice).
            let replay = try await cli.reddot(
                ["dlq", "replay", "--reason", "unknown_type", "--rules", harness.fixedRulesFile.path, "--database-url", url])
            #expect(replay.exitCode == 0, "\(replay)")
            let ids = objects.compactMap { object in (object["event_id"] as? String).map { ($0, object["id"] as? Int ?? -1) } }
            let promotion1ID = ids.first { $0.0 == "promo-1" }?.1 ?? -1, promotion2ID = ids.first { $0.0 == "promo-2" }?.1 ?? -1
            #expect(replay.stdout.contains("#\(promotion1ID) replayed\n"), "\(replay)")
            #expect(replay.stdout.contains("#\(promotion2ID) already applied"), "\(replay)")
            #expect(replay.stderr.contains("replayed 1, already applied 1, still rejected 0"), "\(replay)")

            // Nothing of that reason is left to replay: exit 0; list shows only the malformed record,
            // and --all shows the two replayed ones flagged.
            let again = try await cli.reddot(
                ["dlq", "replay", "--reason", "unknown_type", "--rules", harness.fixedRulesFile.path, "--database-url", url])
            #expect(again.exitCode == 0 && again.stderr.contains("replayed 0, already applied 0, still rejected 0"), "\(again)")
            let after = try await cli.reddot(["dlq", "list", "--database-url", url])
            #expect(after.stdout.split(separator: "\n").count == 1 && after.stdout.contains("malformed_json"), "\(after)")
            let all = try await cli.reddot(["dlq", "list", "--all", "--database-url", url])
            #expect(all.stdout.split(separator: "\n").filter { $0.contains("published,replayed") }.count == 2, "\(all)")
            // --all replays what is left: the malformed record still fails, exit 2.
            let rest = try await cli.reddot(["dlq", "replay", "--all", "--rules", harness.fixedRulesFile.path, "--database-url", url])
            #expect(rest.exitCode == 2 && rest.stdout.contains("still rejected: malformed_json"), "\(rest)")

            // The badges appear once rolled up: d1 and d2 have the spring dot, d3 the summer dot once.
            let rollup = try ReddotChild(["rollup", "--database-url", url, "--log-level", "error"], in: harness.folder, name: "rollup")
            #expect(try await harness.waitForCount("SELECT count(DISTINCT user_id) FROM dirty_mark", 0) == 0)
            for (user, item) in [("d1", "spring"), ("d2", "spring"), ("d3", "summer")] {
                let show = try await cli.reddot(["badges", "show", "--user", user, "--path", "root.promotion", "--database-url", url])
                #expect(show.exitCode == 0, "\(show)")
                let answer = try JSONDecoder().decode(CLITests.BadgeAnswer.self, from: Data(show.stdout.utf8))
                #expect(answer.tree?.children.map(\.path) == ["root.promotion.\(item)"], "\(user): \(show.stdout)")
            }
            #expect(try await harness.count("SELECT count(DISTINCT event_id) FROM \(AppliedKeys.table) WHERE event_id LIKE 'promo-%'") == 2)
            #expect(try await rollup.stop() == 0, "\(rollup.standardError)")
            #expect(try await ingest.stop() == 0, "\(ingest.standardError)")
        }
    }
}
