import BadgeCore
import BadgeStore
import Crypto
import Foundation
import LibPQ
import Logging
import RdKafka
import ServiceLifecycle
import Synchronization
import TestSupport
import Testing

@testable import BadgeHooks

@Suite("Push badges end to end: the feed on the mock cluster, a real PostgreSQL, a fake APNs over TLS and HTTP/2")
struct PushServiceTests {
    struct Setting {
        let logger: Logger
        let cluster: KafkaMockCluster
        let topic: String
        let migrated: MigratedDatabase
        let producer: KafkaProducer
        let folder: URL

        static func make() async throws -> Setting {
            var logger = Logger(label: "reddot.test.push")
            logger.logLevel = ProcessInfo.processInfo.environment["REDDOT_TEST_LOG"].flatMap(Logger.Level.init(rawValue:)) ?? .error
            let cluster = try KafkaMockCluster(logger: logger)
            let topic = "changes-\(UInt32.random(in: 0...UInt32.max))"
            try cluster.createTopic(topic, partitions: 2)
            let migrated = try await MigratedDatabase.create(prefix: "push", logger: logger)
            let producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: cluster.bootstrapServers), logger: logger)
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("reddot-push-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            return Setting(logger: logger, cluster: cluster, topic: topic, migrated: migrated, producer: producer, folder: folder)
        }

        func publish(_ user: String, own: Int64, root: Int64) async throws {
            let json = WebhookUnitTests.userRecord(user, own: own, changed: [("root", root > 0, root, root)], root: (root, root))
            _ = try await producer.send(KafkaOutgoingRecord(topic: topic, key: Array(user.utf8), payload: Array(json.utf8)))
        }

        func register(_ user: String, _ device: String, token: String) async throws {
            let made = try PushDevice(id: device, platform: "apns", token: token, appID: "com.example.app")
            try await migrated.pool.withConnection { try PushStore.register(made, for: TestSupport.user(user), on: $0) }
        }

        func devices(_ user: String) async throws -> [String: (wanted: Int64, sent: Int64?)] {
            let rows = try await migrated.pool.withConnection { try PushStore.devices(of: TestSupport.user(user), on: $0) }
            var found: [String: (wanted: Int64, sent: Int64?)] = [:]
            for row in rows { found[row.device] = (row.wanted, row.sent) }
            return found
        }

        func configuration(_ apns: APNsCredentials, url: String, trust: String) -> PushConfiguration {
            var kafka = KafkaConfiguration(bootstrapServers: cluster.bootstrapServers)
            kafka.set("session.timeout.ms", "6000")
            kafka.set("heartbeat.interval.ms", "500")
            return PushConfiguration(kafka: kafka, topic: topic, group: "push-\(topic)", apnsURL: url, apns: apns, trustRootsFile: trust)
        }

        func tearDown() async throws {
            try await onThread { producer.close() }
            await migrated.drop()
            try await onThread { cluster.close() }
            try? FileManager.default.removeItem(at: folder)
        }
    }

    static func eventually(seconds: Int = 60, _ condition: () async throws -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            if try await condition() { return true }
            try await Task.sleep(for: .milliseconds(100))
        }
        return try await condition()
    }

    @Test(
        "the right number reaches each device; 100 versions in a burst send far fewer pushes and end on the last; 429 and 503 are retried; 410 removes the device; an expired provider token is renewed"
    )
    func endToEnd() async throws {
        let setting = try await Setting.make()
        let key = P256.Signing.PrivateKey()
        let apns = FakeAPNs(publicKey: key.publicKey, keyID: "ABC123DEFG", teamID: "TEAM123456")
        let (url, trust, serving) = try await apns.start(in: setting.folder, logger: setting.logger)
        defer { serving.cancel() }
        let credentials = try APNsCredentials(keyPEM: key.pemRepresentation, keyID: "ABC123DEFG", teamID: "TEAM123456")

        try await setting.register("ann", "phone", token: "aa01")
        try await setting.register("ann", "tablet", token: "aa02")
        try await setting.register("bob", "phone", token: "bb01")
        try await setting.register("carol", "old", token: "cc01")
        apns.answers.withLock { $0 = ["bb01": [429, 503], "cc01": [410]] }
        try await setting.publish("bob", own: 1, root: 5)
        try await setting.publish("carol", own: 1, root: 1)
        try await setting.publish("ann", own: 1, root: 2)

        let service = PushService(configuration: setting.configuration(credentials, url: url, trust: trust), pool: setting.migrated.pool, logger: setting.logger)
        let group = ServiceGroup(services: [service], gracefulShutdownSignals: [], logger: setting.logger)
        let running = Task { try await group.run() }

        #expect(try await Self.eventually { try await setting.devices("ann")["phone"]?.sent == 2 })
        // A burst: ann's root goes 3, 4, … 102 in 100 versions.
        for version in 2...101 { try await setting.publish("ann", own: Int64(version), root: Int64(version + 1)) }
        let caughtUp = try await Self.eventually { try await setting.devices("ann").values.allSatisfy { $0.sent == 102 } }
        let annDevices = try await setting.devices("ann")
        #expect(caughtUp, "\(annDevices)")
        #expect(try await Self.eventually { try await setting.devices("bob")["phone"]?.sent == 5 })
        #expect(try await Self.eventually { try await setting.devices("carol").isEmpty }, "the device APNs called gone is removed")

        for device in ["aa01", "aa02"] {
            let pushes = apns.pushes(to: device)
            #expect(pushes.first?.badge == 2 && pushes.last?.badge == 102, "\(pushes.map(\.badge))")
            #expect(pushes.count < 30, "far fewer pushes than versions: \(pushes.map(\.badge))")
            #expect(pushes.map(\.badge) == pushes.map(\.badge).sorted(), "never a number older than one sent: \(pushes.map(\.badge))")
            #expect(Set(pushes.map(\.collapseID)).count == 1 && pushes.allSatisfy { $0.topic == "com.example.app" })
        }
        #expect(apns.pushes(to: "bb01").map(\.badge) == [5], "sent once, after 429 and 503")
        #expect(apns.pushes(to: "cc01").isEmpty)
        #expect(apns.refusals.withLock { $0 }.sorted() == ["410 Unregistered", "429 TooManyRequests", "503 ServiceUnavailable"])

        // The provider token grows old: APNs calls it expired, a new one is made and the push goes.
        apns.maximumTokenAge.store(1, ordering: .relaxed)
        try await Task.sleep(for: .milliseconds(2_100))
        try await setting.publish("ann", own: 102, root: 7)
        #expect(try await Self.eventually { try await setting.devices("ann").values.allSatisfy { $0.sent == 7 } })
        #expect(apns.refusals.withLock { $0 }.contains("403 ExpiredProviderToken"))
        #expect(Set(apns.pushes(to: "aa01").map(\.token)).count == 2, "a second provider token")
        // A version read again (the feed is at least once) sends nothing new.
        let before = apns.pushes.withLock { $0.count }
        try await setting.publish("ann", own: 50, root: 51)
        try await Task.sleep(for: .seconds(2))
        #expect(apns.pushes.withLock { $0.count } == before)

        await group.triggerGracefulShutdown()
        try await running.value
        try await setting.tearDown()
    }

    @Test("reddot push run killed with SIGKILL twice during 150 versions and started again: never an older number than one sent, and the device ends on the last")
    func killedAndRestarted() async throws {
        let setting = try await Setting.make()
        let key = P256.Signing.PrivateKey()
        let apns = FakeAPNs(publicKey: key.publicKey, keyID: "ABC123DEFG", teamID: "TEAM123456")
        let (url, trust, serving) = try await apns.start(in: setting.folder, logger: setting.logger)
        defer { serving.cancel() }
        let keyFile = setting.folder.appendingPathComponent("AuthKey_ABC123DEFG.p8")
        try key.pemRepresentation.write(to: keyFile, atomically: true, encoding: .utf8)
        try await setting.register("ann", "phone", token: "aa01")
        let binary = try ReddotBinary.url.get()
        func start(_ name: String) throws -> Process {
            let process = Process()
            process.executableURL = binary
            process.arguments = [
                "push", "run", "--database-url", setting.migrated.database.url, "--brokers", setting.cluster.bootstrapServers,
                "--changes-topic", setting.topic, "--group", "push-\(setting.topic)", "--apns-key-file", keyFile.path, "--apns-key-id", "ABC123DEFG",
                "--apns-team-id", "TEAM123456", "--apns-url", url, "--trust-roots-file", trust, "--log-level", "error",
            ]
            let log = setting.folder.appendingPathComponent("\(name).err")
            _ = FileManager.default.createFile(atPath: log.path, contents: nil)
            process.standardOutput = FileHandle.nullDevice
            process.standardError = try FileHandle(forWritingTo: log)
            try process.run()
            return process
        }
        var process = try start("push-1")
        for version in 1...150 {
            try await setting.publish("ann", own: Int64(version), root: Int64(version))
            if version == 50 || version == 100 {
                // Once the device has been sent something since the last start, the process dies mid-stream.
                let sentBefore = apns.pushes(to: "aa01").count
                _ = try await Self.eventually(seconds: 30) { apns.pushes(to: "aa01").count > sentBefore }
                kill(process.processIdentifier, SIGKILL)
                _ = await ChildProcess.exitStatus(of: process)
                process = try start("push-\(version)")
            }
            if version % 10 == 0 { try await Task.sleep(for: .milliseconds(50)) }
        }
        let ended = try await Self.eventually { try await setting.devices("ann")["phone"]?.sent == 150 }
        let errors = (try? String(contentsOf: setting.folder.appendingPathComponent("push-100.err"), encoding: .utf8)) ?? ""
        let shown = try await setting.devices("ann")["phone"]
        #expect(ended, "the device shows \(String(describing: shown)); \(errors)")
        let badges = apns.pushes(to: "aa01").map(\.badge)
        #expect(badges.last == 150, "\(badges)")
        #expect(badges == badges.sorted(), "never an older number than one sent: \(badges)")
        kill(process.processIdentifier, SIGTERM)
        #expect(await ChildProcess.exitStatus(of: process) == 0)
        try await setting.tearDown()
    }

    @Test("credentials APNs refuses stop the service with its reason, not a retry loop")
    func refusedCredentials() async throws {
        let setting = try await Setting.make()
        let apns = FakeAPNs(publicKey: P256.Signing.PrivateKey().publicKey, keyID: "ABC123DEFG", teamID: "TEAM123456")
        let (url, trust, serving) = try await apns.start(in: setting.folder, logger: setting.logger)
        defer { serving.cancel() }
        let credentials = try APNsCredentials(keyPEM: P256.Signing.PrivateKey().pemRepresentation, keyID: "ABC123DEFG", teamID: "TEAM123456")
        try await setting.register("ann", "phone", token: "aa01")
        try await setting.publish("ann", own: 1, root: 2)
        let service = PushService(configuration: setting.configuration(credentials, url: url, trust: trust), pool: setting.migrated.pool, logger: setting.logger)
        let stopped = try await withThrowingTaskGroup(of: String?.self) { group in
            group.addTask {
                do {
                    try await service.run()
                    return "returned"
                } catch {
                    return "\(error)"
                }
            }
            group.addTask {
                try await Task.sleep(for: .seconds(60))
                return nil
            }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
        #expect(stopped?.contains("APNs refuses the provider credentials (InvalidProviderToken)") == true, "\(stopped ?? "still running after 60 s")")
        #expect(apns.refusals.withLock { $0 } == ["403 InvalidProviderToken"], "one try, no loop")
        try await setting.tearDown()
    }

    @Test("provider keys and ids are checked with a sentence; tokens are reused within their lifetime")
    func credentialChecks() throws {
        let key = P256.Signing.PrivateKey()
        #expect(throws: APNsCredentials.Invalid.self) { try APNsCredentials(keyPEM: "not a key", keyID: "ABC123DEFG", teamID: "TEAM123456") }
        #expect(throws: APNsCredentials.Invalid.self) { try APNsCredentials(keyPEM: key.pemRepresentation, keyID: "abc", teamID: "TEAM123456") }
        #expect(throws: APNsCredentials.Invalid.self) { try APNsCredentials(keyPEM: key.pemRepresentation, keyID: "ABC123DEFG", teamID: "team123456") }
        let credentials = try APNsCredentials(keyPEM: key.pemRepresentation, keyID: "ABC123DEFG", teamID: "TEAM123456")
        let token = credentials.token()
        #expect(credentials.token() == token)
        credentials.expire(token)
        let parts = credentials.token().split(separator: ".").map(String.init)
        #expect(parts.count == 3)
        let signature = try #require(FakeAPNs.base64URL(parts[2]))
        #expect(key.publicKey.isValidSignature(try P256.Signing.ECDSASignature(rawRepresentation: signature), for: Data("\(parts[0]).\(parts[1])".utf8)))
        #expect(FakeAPNs.json(parts[0])?["kid"] as? String == "ABC123DEFG" && FakeAPNs.json(parts[1])?["iss"] as? String == "TEAM123456")
        #expect(APNsVerdict.of(status: 410, body: #"{"reason":"Unregistered","timestamp":1700000000000}"#, retryAfter: nil) == .gone("Unregistered"))
        #expect(APNsVerdict.of(status: 400, body: #"{"reason":"BadDeviceToken"}"#, retryAfter: nil) == .gone("BadDeviceToken"))
        #expect(APNsVerdict.of(status: 400, body: #"{"reason":"BadCollapseId"}"#, retryAfter: nil) == .rejected("BadCollapseId"))
        #expect(APNsVerdict.of(status: 429, body: "", retryAfter: "7") == .retry("HTTP 429", after: .seconds(7)))
        #expect(APNsVerdict.of(status: 403, body: #"{"reason":"ExpiredProviderToken"}"#, retryAfter: nil) == .expiredToken)
        #expect(APNsVerdict.of(status: 403, body: "not json", retryAfter: nil) == .refused("HTTP 403"))
        for device in [("", "apns", "t", "a.b"), ("d", "gcm", "t", "a.b"), ("d", "apns", "", "a.b"), ("d", "apns", "t t", "a.b"), ("d", "apns", "../x", "a.b"), ("d", "apns", "a?b", "a.b"), ("d", "fcm", "a%2F", "a.b"), ("d", "apns", "t", "a b")] {
            #expect(throws: PushDevice.Invalid.self) { try PushDevice(id: device.0, platform: device.1, token: device.2, appID: device.3) }
        }
    }
}
