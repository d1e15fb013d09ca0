import BadgeCore
import BadgeStore
import Testing
import LibPQ
import TestSupport

/// The payloads of `NOTIFY reddot_badges`, as PostgreSQL's `json_build_object` writes them.
@Suite("Change notifications")
struct ChangeNotificationTests {
    @Test("a user's and a broadcast notification are read back; anything else is not")
    func readsWhatTheStoreWrites() {
        #expect(ChangeNotification(payload: #"{"user" : "u1", "version" : 3}"#) == .user(user("u1"), version: 3))
        #expect(ChangeNotification(payload: #"{"broadcast_version" : 7}"#) == .broadcasts(version: 7))
        #expect(ChangeNotification(payload: #"{"broadcast_version" : null}"#) == .broadcasts(version: nil))
        #expect(ChangeNotification(payload: #"{"user" : "u1", "version" : 1.5}"#) == .user(user("u1"), version: nil))
        for payload in ["", "{", "[]", #"{"user" : "*"}"#, #"{"user" : 5}"#, #"{"other" : 1}"#, #"{"user" : "a b"}"#] {
            #expect(ChangeNotification(payload: payload) == nil, "\(payload)")
        }
    }

    @Test("the forms the store writes are read from their bytes, and every damaged payload as JSONSerialization reads it")
    func scannedAsParsed() {
        let written = [#"{"user" : "u1", "version" : 3}"#, #"{"broadcast_version" : 7}"#, #"{"user":"a-b_c.d@e!","version":9223372036854775807}"#]
        for payload in written {
            #expect(ChangeNotification.scanned(payload) != nil, "\(payload)")
            #expect(ChangeNotification.scanned(payload) == ChangeNotification.parsed(payload), "\(payload)")
        }
        // Spellings left to JSONSerialization: an escape, a fraction, a sign, an exponent, another order.
        for payload in [
            #"{"user" : "u\u0031", "version" : 3}"#, #"{"user" : "u1", "version" : 3.0}"#, #"{"broadcast_version" : -1}"#,
            #"{"broadcast_version" : 1e1}"#, #"{"version" : 3, "user" : "u1"}"#,
        ] {
            #expect(ChangeNotification.scanned(payload) == nil, "\(payload)")
        }
        #expect(ChangeNotification(payload: #"{"version" : 3, "user" : "u\u0031"}"#) == .user(user("u1"), version: 3))
        var random = SplitMix64(seed: 27)
        for _ in 0..<5_000 {
            let bytes = Array(written[Int(random.next() % UInt64(written.count))].utf8)
            let payload = String(decoding: random.damaged(bytes), as: UTF8.self)
            #expect(ChangeNotification(payload: payload) == ChangeNotification.parsed(payload), "\(payload)")
        }
    }

    @Test("the rollup's notification names the user and the new version")
    func rollupNotifies() async throws {
        let fixture = try await StoreFixture.make()
        try await tearingDown({ await fixture.tearDown() }) {
            let listener = try PGConnection.connect(fixture.pool.configuration, logger: TestServer.logger)
            defer { listener.close() }
            try listener.execute(script: "LISTEN \(BadgeStore.changeChannel)", name: "test.listen")
            let ann = user("notified_ann")
            try await fixture.ingest([BadgeMutation(user: ann, path: try BadgePath(validating: "root.chat"), operation: .increment(by: 1))])
            try await fixture.drainDirtyUsers()
            var payloads: [String] = []
            for _ in 0..<50 where payloads.isEmpty {
                payloads = try listener.waitForNotifications(timeoutMilliseconds: 100).map(\.payload)
            }
            #expect(payloads.compactMap { ChangeNotification(payload: $0) } == [.user(ann, version: 1)], "\(payloads)")
        }
    }
}
