import BadgeStore
import Crypto
import Foundation
import LibPQ
import Logging
import RdKafka
import TestSupport
import Testing

@testable import BadgeHooks

/// `reddot run` with a push provider's credentials and `--webhooks`: the senders run in the same
/// process as ingest, the rollup's change feed and the API.
@Suite("reddot run with push and webhooks in the same process")
struct InProcessSendersTests {
    @Test("an event published to the events topic reaches a webhook receiver (signed) and a device (APNs) through reddot run alone; SIGTERM exits 0")
    func runCarriesTheSenders() async throws {
        let setting = try await PushServiceTests.Setting.make()
        let events = "events-\(UInt32.random(in: 0...UInt32.max))"
        try setting.cluster.createTopic(events, partitions: 1)
        try setting.cluster.createTopic(events + ".dlq", partitions: 1)
        let key = P256.Signing.PrivateKey()
        let apns = FakeAPNs(publicKey: key.publicKey, keyID: "ABC123DEFG", teamID: "TEAM123456")
        let (apnsURL, trust, serving) = try await apns.start(in: setting.folder, logger: setting.logger)
        defer { serving.cancel() }
        let keyFile = setting.folder.appendingPathComponent("AuthKey_ABC123DEFG.p8")
        try key.pemRepresentation.write(to: keyFile, atomically: true, encoding: .utf8)
        let secret = WebhookSubscription.makeSecret()
        let receiver = Receiver(key: try #require(WebhookSubscription.key(of: secret)))
        let (port, receiving) = try await receiver.start(logger: setting.logger)
        defer { receiving.cancel() }
        let subscriptions = setting.folder.appendingPathComponent("subscriptions.json")
        try Data(#"[{"id":"crm","url":"http://127.0.0.1:\#(port)/ok","secret":"\#(secret)","paths":["root"],"kinds":["root"]}]"#.utf8)
            .write(to: subscriptions)
        try await setting.register("ann", "phone", token: "aa01")

        let process = Process()
        process.executableURL = try ReddotBinary.url.get()
        process.arguments = [
            "run", "--database-url", setting.migrated.database.url, "--brokers", setting.cluster.bootstrapServers, "--topic", events,
            "--changes-topic", setting.topic, "--host", "127.0.0.1", "--port", "0", "-X", "session.timeout.ms=6000",
            "--apns-key-file", keyFile.path, "--apns-key-id", "ABC123DEFG", "--apns-team-id", "TEAM123456", "--apns-url", apnsURL,
            "--trust-roots-file", trust, "--webhooks", "--webhook-subscriptions", subscriptions.path,
        ]
        var environment = ProcessInfo.processInfo.environment
        environment["REDDOT_JWT_HS256_SECRET"] = String(repeating: "s3cret-", count: 8)
        environment["REDDOT_LOG_LEVEL"] = "info"
        environment["REDDOT_KAFKA_BROKERS"] = nil
        process.environment = environment
        let log = setting.folder.appendingPathComponent("run.err")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        process.standardOutput = FileHandle.nullDevice
        process.standardError = try FileHandle(forWritingTo: log)
        try process.run()
        defer { if process.isRunning { process.terminate() } }

        _ = try await setting.producer.send(
            KafkaOutgoingRecord(topic: events, key: Array("ann".utf8), payload: Array(#"{"id":"run-1","op":"incr","user":"ann","path":"root.chat.c1","by":3}"#.utf8)))
        let errors = { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }
        #expect(try await PushServiceTests.eventually { try await setting.devices("ann")["phone"]?.sent == 3 }, "\(errors())")
        let versions = try await setting.migrated.pool.withConnection { connection in
            try connection.query(PGStatement("test.ann_versions", "SELECT version, root_count FROM badge_change WHERE user_id = 'ann' ORDER BY version")).rows.map { row in
                "v\(try row.decode(0, as: Int64.self))=\(try row.decode(1, as: Int64.self))"
            }
        }
        // One version, one number. A push whose answer was lost (a timeout under load, a dropped
        // connection) is sent again, as the runbook says, and the process logs the retry; a
        // second push without one would be a second version or a second claim.
        #expect(versions == ["v1=3"], "\(errors())")
        let badges = apns.pushes(to: "aa01").map(\.badge)
        #expect(!badges.isEmpty && badges.allSatisfy { $0 == 3 }, "\(badges)")
        #expect(badges.count == 1 || errors().contains("push: a push failed; retrying"), "\(badges) \(errors())")
        #expect(
            try await PushServiceTests.eventually { receiver.requests("ok").contains { $0.body.contains(#""type":"badge.root""#) && $0.body.contains(#""ann""#) } },
            "\(receiver.requests("ok").map(\.body)) \(errors())")
        kill(process.processIdentifier, SIGTERM)
        #expect(await ChildProcess.exitStatus(of: process) == 0, "\(errors())")
        try await setting.tearDown()
    }

    @Test("reddot run --webhooks with the change feed off is refused with exit 64 and a sentence")
    func refusedWithoutFeed() async throws {
        let result = try await ChildProcess.run(
            try ReddotBinary.url.get().path,
            ["run", "--database-url", "postgresql://nobody@127.0.0.1:1/none", "--webhooks", "--no-change-feed"], mergingStandardError: true)
        #expect(result.status == 64 && result.output.contains("follow the change feed"), "\(result.output)")
    }
}
