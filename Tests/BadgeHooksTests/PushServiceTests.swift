import BadgeCore
import BadgeStore
import Crypto
import CryptoExtras
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

        func register(_ user: String, _ device: String, token: String, platform: String = "apns", quiet: PushDevice.QuietHours? = nil) async throws {
            let made = try PushDevice(id: device, platform: platform, token: token, appID: "com.example.app", quietHours: quiet)
            try await migrated.pool.withConnection { try PushStore.register(made, for: TestSupport.user(user), on: $0) }
        }

        func devices(_ user: String) async throws -> [String: (wanted: Int64, sent: Int64?)] {
            let rows = try await migrated.pool.withConnection { try PushStore.devices(of: TestSupport.user(user), on: $0) }
            var found: [String: (wanted: Int64, sent: Int64?)] = [:]
            for row in rows { found[row.device] = (row.wanted, row.sent) }
            return found
        }

        func configuration(_ apns: APNsCredentials?, url: String, fcm: FCMCredentials? = nil, fcmURL: String = "", trust: String) -> PushConfiguration {
            var kafka = KafkaConfiguration(bootstrapServers: cluster.bootstrapServers)
            kafka.set("session.timeout.ms", "6000")
            kafka.set("heartbeat.interval.ms", "500")
            return PushConfiguration(
                kafka: kafka, topic: topic, group: "push-\(topic)", apnsURL: url, apns: apns, fcmURL: fcmURL, fcm: fcm, trustRootsFile: trust,
                maximumRetryDelay: .seconds(30))
        }

        /// A fake APNs on loopback and credentials it takes (key id ABC123DEFG, team TEAM123456).
        func startAPNs() async throws -> (FakeAPNs, APNsCredentials, url: String, trust: String, serving: Task<Void, any Error>) {
            let key = P256.Signing.PrivateKey()
            let apns = FakeAPNs(publicKey: key.publicKey, keyID: "ABC123DEFG", teamID: "TEAM123456")
            let (url, trust, serving) = try await apns.start(in: folder, logger: logger)
            let credentials = try APNsCredentials(keyPEM: key.pemRepresentation, keyID: "ABC123DEFG", teamID: "TEAM123456")
            return (apns, credentials, url, trust, serving)
        }

        func tearDown() async throws {
            try await onThread { producer.close() }
            await migrated.drop()
            try await onThread { cluster.close() }
            try? FileManager.default.removeItem(at: folder)
        }
    }

    /// How `service` stopped by itself within 60 s: its error, or "returned"; nil if it still runs.
    static func stopped(_ service: PushService) async throws -> String? {
        try await withThrowingTaskGroup(of: String?.self) { group in
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
        let (apns, credentials, url, trust, serving) = try await setting.startAPNs()
        defer { serving.cancel() }

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
        let wantedAt = try await setting.migrated.pool.withConnection {
            try $0.query(PGStatement("test.wanted_at", "SELECT extract(epoch FROM wanted_at)::float8 FROM push_device WHERE user_id = 'bob'", prepared: false))
                .singleRow().decode(0, as: Double?.self)
        }
        #expect(wantedAt == 1_795_773_600, "the record's at, for the lag metric")
        #expect(apns.pushes(to: "cc01").isEmpty)
        #expect(apns.refusals.withLock { $0 }.sorted() == ["410 Unregistered", "429 TooManyRequests", "503 ServiceUnavailable"])
        let overHTTP2 = apns.pushes.withLock { $0.allSatisfy(\.http2) }
        #expect(overHTTP2, "every push over HTTP/2, as APNs requires")

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

    @Test(
        "a broadcast counts on the icon: a device registered gets its user's total with the broadcasts now; a broadcast withdrawn (a broadcasts record, no user record) brings every device's number down; an older user record does not bring it back"
    )
    func broadcastsOnTheIcon() async throws {
        let setting = try await Setting.make()
        let (apns, credentials, url, trust, serving) = try await setting.startAPNs()
        defer { serving.cancel() }
        let store = BadgeStore(pool: setting.migrated.pool)
        func apply(_ id: String, _ audience: Audience, _ path: String, _ operation: BadgeOperation) async throws {
            let event = MappedOperation(
                eventID: try EventID(validating: id), audience: audience, path: try BadgePath(validating: path), operation: operation, expiresAt: nil)
            try await setting.migrated.pool.withTransaction { connection in
                var outcome = BatchOutcome()
                try IngestTransaction.applyEvents([event], into: &outcome, on: connection)
            }
            while try await store.recomputeDirtyUsers(limit: 100) > 0 {}
        }
        try await apply("own-1", .users([TestSupport.user("ann")]), "root.chat.c1", .increment(by: 2))
        try await apply("own-2", .users([TestSupport.user("carol")]), "root.chat.c1", .increment(by: 1))
        try await apply("promo", .everyone, "root.promo.p1", .set(count: 3, icon: nil))
        try await setting.register("ann", "phone", token: "aa01")
        try await setting.register("bob", "phone", token: "bb01")

        let service = PushService(configuration: setting.configuration(credentials, url: url, trust: trust), pool: setting.migrated.pool, logger: setting.logger)
        let group = ServiceGroup(services: [service], gracefulShutdownSignals: [], logger: setting.logger)
        let running = Task { try await group.run() }
        #expect(try await Self.eventually { try await setting.devices("ann")["phone"]?.sent == 5 }, "2 own + 3 broadcast")
        #expect(try await Self.eventually { try await setting.devices("bob")["phone"]?.sent == 3 }, "a user with no own badge sees the broadcast")

        // Withdrawn: the feed carries a broadcasts record and no user record.
        try await apply("promo-off", .everyone, "root.promo", .clear(force: true))
        _ = try await setting.producer.send(
            KafkaOutgoingRecord(
                topic: setting.topic, key: Array("*".utf8),
                payload: Array(#"{"type":"broadcasts","version":2,"previous_version":1,"added":[],"withdrawn":["promo"],"at":"2026-11-28T10:00:00.000+00:00"}"#.utf8)))
        #expect(try await Self.eventually { try await setting.devices("ann")["phone"]?.sent == 2 })
        #expect(try await Self.eventually { try await setting.devices("bob")["phone"]?.sent == 0 })
        // A user record from before (ann's first version, with the broadcast) read late changes nothing.
        try await setting.publish("ann", own: 1, root: 5)
        try await Task.sleep(for: .seconds(2))
        #expect(try await setting.devices("ann")["phone"]?.wanted == 2)
        #expect(apns.pushes(to: "aa01").map(\.badge) == [5, 2] && apns.pushes(to: "bb01").map(\.badge) == [3, 0])
        let counted = try await setting.migrated.pool.withConnection {
            try $0.query(PGStatement("test.push_users", "SELECT string_agg(user_id, ',' ORDER BY user_id) FROM push_user", prepared: false))
                .singleRow().decode(0, as: String?.self)
        }
        #expect(counted == "ann,bob", "only users with a device are recounted, not carol")

        await group.triggerGracefulShutdown()
        try await running.value
        try await setting.tearDown()
    }

    @Test("quiet hours: a device inside them is sent nothing and waits for their end; out of them (registered again without) it gets the latest number")
    func quietHours() async throws {
        let setting = try await Setting.make()
        let (apns, credentials, url, trust, serving) = try await setting.startAPNs()
        defer { serving.cancel() }
        // A window around now in Tokyo (no clock changes), ending two hours from now.
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = try #require(TimeZone(identifier: "Asia/Tokyo"))
        let now = calendar.dateComponents([.hour, .minute], from: Date())
        let minute = (now.hour ?? 0) * 60 + (now.minute ?? 0)
        let window = try PushDevice.QuietHours(
            start: PushDevice.QuietHours.text((minute + 1440 - 60) % 1440), end: PushDevice.QuietHours.text((minute + 120) % 1440), timeZone: "Asia/Tokyo")
        try await setting.register("ann", "phone", token: "aa01", quiet: window)
        try await setting.register("ann", "tablet", token: "aa02")
        let service = PushService(configuration: setting.configuration(credentials, url: url, trust: trust), pool: setting.migrated.pool, logger: setting.logger)
        let group = ServiceGroup(services: [service], gracefulShutdownSignals: [], logger: setting.logger)
        let running = Task { try await group.run() }
        for version in 1...3 { try await setting.publish("ann", own: Int64(version), root: Int64(version)) }
        #expect(try await Self.eventually { try await setting.devices("ann")["tablet"]?.sent == 3 })
        try await Task.sleep(for: .seconds(1))
        #expect(apns.pushes(to: "aa01").isEmpty, "nothing during quiet hours")
        let waits = try await setting.migrated.pool.withConnection {
            try $0.query(
                PGStatement(
                    "test.quiet_until", "SELECT extract(epoch FROM next_attempt_at - now())::float8, attempts FROM push_device WHERE device_id = 'phone'",
                    prepared: false)
            ).singleRow()
        }
        let seconds = try waits.decode(0, as: Double.self)
        #expect(seconds > 100 * 60 && seconds <= 120 * 60, "due again when the window ends, \(seconds) s from now")
        #expect(try waits.decode(1, as: Int.self) == 0, "a deferral is not a failed try")
        // Registered again without quiet hours: due at once, with the latest number.
        try await setting.register("ann", "phone", token: "aa01")
        #expect(try await Self.eventually { try await setting.devices("ann")["phone"]?.sent == 3 })
        #expect(apns.pushes(to: "aa01").map(\.badge) == [3])
        await group.triggerGracefulShutdown()
        try await running.value
        try await setting.tearDown()
    }

    @Test("the store: a new number for a device counts as due, and as coalesced when it replaces one not yet sent; an older version changes nothing")
    func storeCoalesces() async throws {
        let setting = try await Setting.make()
        try await setting.register("ann", "phone", token: "aa01")
        let pool = setting.migrated.pool
        func follow(_ version: Int64, _ count: Int64) async throws -> (due: Int, coalesced: Int) {
            try await pool.withConnection { try PushStore.follow(["ann": (version, count, nil)], on: $0) }
        }
        #expect(try await follow(1, 1) == (1, 0))
        #expect(try await follow(2, 2) == (1, 1), "version 1 was never sent")
        #expect(try await follow(2, 9) == (0, 0), "a version seen before")
        let claimed = try await pool.withConnection { try PushStore.claim(limit: 10, lease: .seconds(30), on: $0).claimed }
        #expect(claimed.map(\.badge) == [2])
        for device in claimed { try await pool.withConnection { try PushStore.sent(device, on: $0) } }
        #expect(try await follow(3, 3) == (1, 0), "version 2 was sent")
        try await setting.tearDown()
    }

    @Test("quiet hours are read with a sentence, and their end is found across midnight and clock changes")
    func quietHoursRules() throws {
        for (start, end, zone) in [("25:00", "07:00", "UTC"), ("22:00", "22:00", "UTC"), ("22:00", "7:00", "UTC"), ("22:00", "07:00", "Mars/Olympus"),
                                   ("22:00", "07:00", "../etc/passwd"), ("22:00", "07:60", "UTC"), ("２２:00", "07:00", "UTC")] {
            #expect(throws: PushDevice.Invalid.self, "\(start) \(end) \(zone)") { try PushDevice.QuietHours(start: start, end: end, timeZone: zone) }
        }
        let night = try PushDevice.QuietHours(start: "22:00", end: "07:00", timeZone: "Europe/Berlin")
        let formatter = ISO8601DateFormatter()
        func at(_ text: String) throws -> Date { try #require(formatter.date(from: text)) }
        // 23:30 in Berlin (winter, UTC+1) is inside; it ends at 07:00 Berlin, 06:00 UTC.
        #expect(night.end(containing: try at("2026-01-10T22:30:00Z")) == (try at("2026-01-11T06:00:00Z")))
        #expect(night.end(containing: try at("2026-01-10T05:59:00Z")) == (try at("2026-01-10T06:00:00Z")))
        #expect(night.end(containing: try at("2026-01-10T06:00:00Z")) == nil, "the end itself is outside")
        #expect(night.end(containing: try at("2026-01-10T12:00:00Z")) == nil)
        // The night the clocks go forward (29 March 2026, 02:00 → 03:00): 07:00 is then UTC+2.
        #expect(night.end(containing: try at("2026-03-29T01:30:00Z")) == (try at("2026-03-29T05:00:00Z")))
        let day = try PushDevice.QuietHours(start: "09:00", end: "17:30", timeZone: "UTC")
        #expect(day.end(containing: try at("2026-01-10T12:00:00Z")) == (try at("2026-01-10T17:30:00Z")))
        #expect(day.end(containing: try at("2026-01-10T08:59:00Z")) == nil)
        let encoded = String(decoding: try JSONEncoder().encode(night), as: UTF8.self)
        #expect(encoded.contains(#""start":"22:00""#) && encoded.contains(#""end":"07:00""#) && encoded.contains(#""time_zone":"Europe\/Berlin""#), "\(encoded)")
        #expect(try JSONDecoder().decode(PushDevice.QuietHours.self, from: Data(encoded.utf8)) == night)
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
        let stopped = try await Self.stopped(service)
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
        #expect(PushVerdict.apns(status: 410, body: #"{"reason":"Unregistered","timestamp":1700000000000}"#, retryAfter: nil) == .gone("Unregistered"))
        #expect(PushVerdict.apns(status: 400, body: #"{"reason":"BadDeviceToken"}"#, retryAfter: nil) == .gone("BadDeviceToken"))
        #expect(PushVerdict.apns(status: 400, body: #"{"reason":"BadCollapseId"}"#, retryAfter: nil) == .rejected("BadCollapseId"))
        #expect(PushVerdict.apns(status: 429, body: "", retryAfter: "7") == .retry("HTTP 429", after: .seconds(7)))
        #expect(PushVerdict.apns(status: 403, body: #"{"reason":"ExpiredProviderToken"}"#, retryAfter: nil) == .expiredToken)
        #expect(PushVerdict.apns(status: 403, body: "not json", retryAfter: nil) == .refused("HTTP 403"))
        #expect(PushVerdict.apns(status: 400, body: #"{"reason":"Bad\r\nThing"}"#, retryAfter: nil) == .rejected("Bad  Thing"), "one line in logs")
        #expect(PushVerdict.apns(status: 400, body: #"{"reason":"Bad\u2028Thing"}"#, retryAfter: nil) == .rejected("Bad Thing"))
        #expect(PushService.time("2026-11-27T10:00:00.000+00:00")?.timeIntervalSince1970 == 1_795_773_600)
        #expect(PushService.time("2026-11-27T11:00:00.5+01:00")?.timeIntervalSince1970 == 1_795_773_600.5)
        for text in ["", "yesterday", "9999-01-01T00:00:00.000+00:00", "1970-01-01T00:00:00.000+00:00", String(repeating: "2", count: 100)] {
            #expect(PushService.time(text) == nil, "\(text)")
        }
        for device in [("", "apns", "t", "a.b"), ("d", "gcm", "t", "a.b"), ("d", "apns", "", "a.b"), ("d", "apns", "t t", "a.b"), ("d", "apns", "../x", "a.b"), ("d", "apns", "a?b", "a.b"), ("d", "fcm", "a%2F", "a.b"), ("d", "apns", "t", "a b")] {
            #expect(throws: PushDevice.Invalid.self) { try PushDevice(id: device.0, platform: device.1, token: device.2, appID: device.3) }
        }
    }

    @Test(
        "FCM: the right number reaches each device over HTTP/2 with an OAuth2 access token from the service account; a burst ends on the last; 429 and 503 are retried; UNREGISTERED removes the device; an access token FCM calls invalid is renewed; an APNs device without APNs credentials waits"
    )
    func fcmEndToEnd() async throws {
        let setting = try await Setting.make()
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let fcm = FakeFCM(publicKey: key.publicKey, clientEmail: "relay@demo-app.iam.gserviceaccount.com", projectID: "demo-app")
        let (url, trust, serving) = try await fcm.start(in: setting.folder, logger: setting.logger)
        defer { serving.cancel() }
        let credentials = try FCMCredentials(serviceAccountJSON: try fcm.serviceAccount(key))

        try await setting.register("ann", "pixel", token: "fcm:ann-1", platform: "fcm")
        try await setting.register("ann", "iphone", token: "aa01")
        try await setting.register("bob", "pixel", token: "fcm:bob-1", platform: "fcm")
        try await setting.register("carol", "old", token: "fcm:carol-1", platform: "fcm")
        fcm.answers.withLock { $0 = ["fcm:bob-1": [429, 503], "fcm:carol-1": [404]] }
        try await setting.publish("bob", own: 1, root: 5)
        try await setting.publish("carol", own: 1, root: 1)
        try await setting.publish("ann", own: 1, root: 2)

        let service = PushService(
            configuration: setting.configuration(nil, url: "", fcm: credentials, fcmURL: url, trust: trust), pool: setting.migrated.pool,
            logger: setting.logger)
        let group = ServiceGroup(services: [service], gracefulShutdownSignals: [], logger: setting.logger)
        let running = Task { try await group.run() }

        #expect(try await Self.eventually { try await setting.devices("ann")["pixel"]?.sent == 2 })
        for version in 2...101 { try await setting.publish("ann", own: Int64(version), root: Int64(version + 1)) }
        #expect(try await Self.eventually { try await setting.devices("ann")["pixel"]?.sent == 102 })
        #expect(try await Self.eventually { try await setting.devices("bob")["pixel"]?.sent == 5 })
        #expect(try await Self.eventually { try await setting.devices("carol").isEmpty }, "the device FCM calls UNREGISTERED is removed")
        let ann = try await setting.devices("ann")
        #expect(ann["iphone"]?.wanted == 102 && ann["iphone"]?.sent == nil, "without APNs credentials the iPhone waits: \(ann)")

        let pushes = fcm.pushes(to: "fcm:ann-1")
        #expect(pushes.first?.badge == 2 && pushes.last?.badge == 102, "\(pushes.map(\.badge))")
        #expect(pushes.count < 30, "far fewer pushes than versions: \(pushes.map(\.badge))")
        #expect(pushes.map(\.badge) == pushes.map(\.badge).sorted(), "never a number older than one sent")
        #expect(Set(pushes.map(\.collapseKey)).count == 1 && pushes.first?.collapseKey == PushService.collapseID("ann"))
        #expect(fcm.pushes(to: "fcm:bob-1").map(\.badge) == [5], "sent once, after 429 and 503")
        let overHTTP2 = fcm.pushes.withLock { $0.allSatisfy(\.http2) }
        #expect(overHTTP2, "every push over HTTP/2")
        #expect(fcm.refusals.withLock { $0 }.sorted() == ["404 UNREGISTERED", "429 QUOTA_EXCEEDED", "503 UNAVAILABLE"])
        #expect(fcm.issued.withLock { $0.count } == 1, "one access token, shared by every push while it lasts")

        // The access token stops being valid earlier than it said: FCM answers 401, a new one is had.
        fcm.tokenValidity.store(1, ordering: .relaxed)
        credentials.expire(pushes.last?.accessToken ?? "")
        try await setting.publish("ann", own: 102, root: 8)
        #expect(try await Self.eventually { try await setting.devices("ann")["pixel"]?.sent == 8 })
        try await Task.sleep(for: .milliseconds(1_100))
        try await setting.publish("ann", own: 103, root: 9)
        #expect(try await Self.eventually { try await setting.devices("ann")["pixel"]?.sent == 9 })
        #expect(fcm.refusals.withLock { $0 }.contains("401 UNAUTHENTICATED"))
        #expect(fcm.issued.withLock { $0.count } == 3, "renewed after FCM called it invalid")

        await group.triggerGracefulShutdown()
        try await running.value
        try await setting.tearDown()
    }

    @Test("FCM: a service account the token endpoint refuses stops the service with the reason, not a retry loop")
    func fcmRefusedAccount() async throws {
        let setting = try await Setting.make()
        let fcm = FakeFCM(
            publicKey: try _RSA.Signing.PrivateKey(keySize: .bits2048).publicKey, clientEmail: "relay@demo-app.iam.gserviceaccount.com", projectID: "demo-app")
        let (url, trust, serving) = try await fcm.start(in: setting.folder, logger: setting.logger)
        defer { serving.cancel() }
        // A key the endpoint does not know for this account.
        let credentials = try FCMCredentials(serviceAccountJSON: try fcm.serviceAccount(try _RSA.Signing.PrivateKey(keySize: .bits2048)))
        try await setting.register("ann", "pixel", token: "fcm:ann-1", platform: "fcm")
        try await setting.publish("ann", own: 1, root: 2)
        let service = PushService(
            configuration: setting.configuration(nil, url: "", fcm: credentials, fcmURL: url, trust: trust), pool: setting.migrated.pool,
            logger: setting.logger)
        let stopped = try await Self.stopped(service)
        #expect(
            stopped?.contains("FCM refuses the service account (the token endpoint says invalid_grant: Invalid JWT Signature.)") == true,
            "\(stopped ?? "still running after 60 s")")
        #expect(fcm.refusals.withLock { $0 } == ["400 invalid_grant"], "one try, no loop")
        #expect(fcm.pushes.withLock { $0 }.isEmpty)
        try await setting.tearDown()
    }

    @Test("FCM: service account files, token answers and FCM's errors are read with a sentence or a verdict; the message clamps the number")
    func fcmChecks() throws {
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        func account(_ change: (inout [String: Any]) -> Void) throws -> Data {
            var fields: [String: Any] = [
                "type": "service_account", "project_id": "demo-app", "private_key": key.pkcs8PEMRepresentation,
                "client_email": "relay@demo-app.iam.gserviceaccount.com", "token_uri": "https://oauth2.googleapis.com/token",
            ]
            change(&fields)
            return try JSONSerialization.data(withJSONObject: fields)
        }
        let made = try FCMCredentials(serviceAccountJSON: try account { _ in })
        #expect(made.projectID == "demo-app" && made.tokenURL == "https://oauth2.googleapis.com/token")
        let parts = made.assertion(issuedAt: Date(timeIntervalSince1970: 1_700_000_000)).split(separator: ".").map(String.init)
        let signature = try #require(FakeAPNs.base64URL(parts[2]))
        #expect(
            key.publicKey.isValidSignature(
                _RSA.Signing.RSASignature(rawRepresentation: signature), for: Data("\(parts[0]).\(parts[1])".utf8), padding: .insecurePKCS1v1_5))
        let claims = try #require(FakeAPNs.json(parts[1]))
        #expect(claims["iat"] as? Int == 1_700_000_000 && claims["exp"] as? Int == 1_700_003_600)
        #expect(claims["aud"] as? String == "https://oauth2.googleapis.com/token" && claims["iss"] as? String == "relay@demo-app.iam.gserviceaccount.com")
        let refused: [(String, Data)] = [
            ("not JSON", Data("{".utf8)),
            ("a user's credentials", try account { $0["type"] = "authorized_user" }),
            ("no project", try account { $0["project_id"] = nil }),
            ("a project id with a slash", try account { $0["project_id"] = "demo/../x" }),
            ("no email", try account { $0["client_email"] = nil }),
            ("an email with a quote", try account { $0["client_email"] = "a\"b@c" }),
            ("an http token endpoint", try account { $0["token_uri"] = "http://oauth2.googleapis.com/token" }),
            ("no key", try account { $0["private_key"] = nil }),
            ("a P-256 key", try account { $0["private_key"] = P256.Signing.PrivateKey().pemRepresentation }),
            ("a 1,024-bit key", try account { $0["private_key"] = try! _RSA.Signing.PrivateKey(unsafeKeySize: .init(bitCount: 1024)).pemRepresentation }),
        ]
        for (what, data) in refused {
            #expect(throws: FCMCredentials.Invalid.self, "\(what)") { try FCMCredentials(serviceAccountJSON: data) }
        }

        #expect(try FCMCredentials.access(status: 200, body: #"{"access_token":"ya29.x","expires_in":3599}"#).lifetime == .seconds(3599))
        #expect(try FCMCredentials.access(status: 200, body: #"{"access_token":"ya29.x","expires_in":1e300}"#).lifetime == .seconds(86_400))
        #expect(try FCMCredentials.access(status: 200, body: #"{"access_token":"ya29.x","expires_in":-5}"#).lifetime == .seconds(1))
        #expect(try FCMCredentials.access(status: 200, body: #"{"access_token":"ya29.x"}"#).lifetime == .seconds(3600))
        for body in [#"{"access_token":"a\r\nx: y"}"#, #"{"access_token":""}"#, "[]", #"{"access_token":"ya29.x","expires_in":"soon"}"#] {
            #expect(throws: FCMCredentials.TokenFailure.self, "\(body)") { try FCMCredentials.access(status: 200, body: body) }
        }
        #expect(throws: FCMCredentials.TokenFailure.refused("the token endpoint says invalid_grant: Invalid JWT Signature.")) {
            try FCMCredentials.access(status: 400, body: #"{"error":"invalid_grant","error_description":"Invalid JWT Signature."}"#)
        }
        #expect(throws: FCMCredentials.TokenFailure.unavailable("the token endpoint answers HTTP 503")) {
            try FCMCredentials.access(status: 503, body: "busy")
        }

        func fcmError(_ status: Int, _ state: String, _ code: String?) -> String {
            let details = code.map { #","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#($0)"}]"# } ?? ""
            return #"{"error":{"code":\#(status),"message":"m","status":"\#(state)"\#(details)}}"#
        }
        #expect(PushVerdict.fcm(status: 200, body: "{}", retryAfter: nil) == .sent)
        #expect(PushVerdict.fcm(status: 404, body: fcmError(404, "NOT_FOUND", "UNREGISTERED"), retryAfter: nil) == .gone("UNREGISTERED: m"))
        #expect(PushVerdict.fcm(status: 403, body: fcmError(403, "PERMISSION_DENIED", "SENDER_ID_MISMATCH"), retryAfter: nil) == .gone("SENDER_ID_MISMATCH: m"))
        #expect(PushVerdict.fcm(status: 401, body: fcmError(401, "UNAUTHENTICATED", nil), retryAfter: nil) == .expiredToken)
        #expect(PushVerdict.fcm(status: 401, body: fcmError(401, "UNAUTHENTICATED", "THIRD_PARTY_AUTH_ERROR"), retryAfter: nil) == .rejected("THIRD_PARTY_AUTH_ERROR: m"))
        #expect(PushVerdict.fcm(status: 403, body: fcmError(403, "PERMISSION_DENIED", nil), retryAfter: nil) == .refused("PERMISSION_DENIED: m"))
        #expect(PushVerdict.fcm(status: 429, body: fcmError(429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED"), retryAfter: "30") == .retry("QUOTA_EXCEEDED: m", after: .seconds(30)))
        #expect(PushVerdict.fcm(status: 502, body: "<html>", retryAfter: nil) == .retry("HTTP 502", after: nil))
        #expect(PushVerdict.fcm(status: 400, body: fcmError(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT"), retryAfter: nil) == .rejected("INVALID_ARGUMENT: m"))

        for (badge, shown) in [(Int64(-3), 0), (7, 7), (Int64.max, Int(Int32.max))] {
            let body = FCMMessage.body(token: "t", badge: badge, collapseID: "c")
            let message = try #require((try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])?["message"] as? [String: Any])
            #expect(((message["android"] as? [String: Any])?["notification"] as? [String: Any])?["notification_count"] as? Int == shown)
            #expect((((message["apns"] as? [String: Any])?["payload"] as? [String: Any])?["aps"] as? [String: Any])?["badge"] as? Int == shown)
        }
    }

    @Test("provider answers and service account files mutated at random: never a trap; reasons one line of at most 200 characters; tokens printable")
    func mutatedAnswers() throws {
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let seeds = [
            #"{"reason":"Unregistered","timestamp":1700000000000}"#,
            #"{"error":{"code":404,"message":"Requested entity was not found.","status":"NOT_FOUND","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"UNREGISTERED"}]}}"#,
            #"{"access_token":"ya29.c.abc","expires_in":3599,"token_type":"Bearer"}"#,
            #"{"error":"invalid_grant","error_description":"Invalid JWT Signature."}"#,
            String(decoding: try JSONSerialization.data(withJSONObject: [
                "type": "service_account", "project_id": "demo-app", "private_key": key.pkcs8PEMRepresentation,
                "client_email": "relay@demo-app.iam.gserviceaccount.com",
            ]), as: UTF8.self),
        ].map { Array($0.utf8) }
        var generator = SystemRandomNumberGenerator()
        let statuses = [200, 400, 401, 403, 404, 410, 429, 500, 503, 0, 999]
        let oneLine = { (reason: String) in reason.count <= 200 && !reason.contains(where: { $0.isNewline }) }
        for round in 0..<4_000 {
            var bytes = seeds[round % seeds.count]
            for _ in 0...Int.random(in: 0...6, using: &generator) where !bytes.isEmpty {
                let at = Int.random(in: 0..<bytes.count, using: &generator)
                switch Int.random(in: 0...3, using: &generator) {
                case 0: bytes[at] = UInt8.random(in: 0...255, using: &generator)
                case 1: bytes.remove(at: at)
                case 2: bytes.insert(contentsOf: Array(#"\r\n"9e999,-1,"x":[]"#.utf8).shuffled(using: &generator).prefix(4), at: at)
                default: bytes.insert(bytes[at], at: at)
                }
            }
            let body = String(decoding: bytes, as: UTF8.self)
            let status = statuses[round % statuses.count]
            for verdict in [PushVerdict.apns(status: status, body: body, retryAfter: body), PushVerdict.fcm(status: status, body: body, retryAfter: nil)] {
                switch verdict {
                case .sent, .expiredToken: break
                case .gone(let reason), .refused(let reason), .rejected(let reason), .retry(let reason, _):
                    #expect(oneLine(reason), "\(reason.debugDescription)")
                }
            }
            do {
                let access = try FCMCredentials.access(status: status, body: body)
                #expect(access.token.utf8.allSatisfy { (0x21...0x7e).contains($0) } && access.lifetime >= .seconds(1) && access.lifetime <= .seconds(86_400))
            } catch {
                if case .refused(let reason) = error { #expect(oneLine(reason)) }
            }
            if let credentials = try? FCMCredentials(serviceAccountJSON: Data(bytes)) {
                #expect(!credentials.assertion(issuedAt: Date()).hasSuffix("."), "a usable key signs")
            }
        }
    }
}
