import BadgeCore
import BadgeStore
import Foundation
import Testing

@testable import BadgeHooks

@Suite("Webhooks: signatures, subscriptions, what a record makes, retry pauses")
struct WebhookUnitTests {
    static let key = Array(0..<32).map(UInt8.init)

    @Test("the signature equals Python's hmac/hashlib over id.timestamp.body, and verifies; a tampered body, another id or key, or an old timestamp does not")
    func signature() {
        // python3: base64(hmac.new(bytes(range(32)), b'msg_1.1700000000.{"type":"badge.root"}', sha256).digest())
        let body = #"{"type":"badge.root"}"#
        let signed = WebhookSignature.sign(id: "msg_1", timestamp: 1_700_000_000, body: body, key: Self.key)
        #expect(signed == "v1,SEum0YK8bZkq7/ATZErM3NaZN2CKpJfUAs/uRCATSAs=")
        let then = Date(timeIntervalSince1970: 1_700_000_100)
        #expect(WebhookSignature.verify(header: "v1,bogus \(signed)", id: "msg_1", timestamp: 1_700_000_000, body: body, key: Self.key, now: then))
        #expect(!WebhookSignature.verify(header: signed, id: "msg_1", timestamp: 1_700_000_000, body: #"{"type":"badge.rooT"}"#, key: Self.key, now: then))
        #expect(!WebhookSignature.verify(header: signed, id: "msg_2", timestamp: 1_700_000_000, body: body, key: Self.key, now: then))
        #expect(!WebhookSignature.verify(header: signed, id: "msg_1", timestamp: 1_700_000_000, body: body, key: Array(Self.key.reversed()), now: then))
        #expect(!WebhookSignature.verify(header: "v2,\(signed.dropFirst(3))", id: "msg_1", timestamp: 1_700_000_000, body: body, key: Self.key, now: then))
        // Six minutes old, or from the future by as much: refused, though the signature is right.
        let late = Date(timeIntervalSince1970: 1_700_000_360)
        #expect(!WebhookSignature.verify(header: signed, id: "msg_1", timestamp: 1_700_000_000, body: body, key: Self.key, now: late))
        #expect(!WebhookSignature.verify(header: signed, id: "msg_1", timestamp: 1_700_000_000, body: body, key: Self.key, now: Date(timeIntervalSince1970: 1_699_999_640)))
    }

    @Test("a subscription is checked field by field, with a sentence; a made secret is a whsec_ of 32 bytes")
    func subscriptionChecks() throws {
        let secret = WebhookSubscription.makeSecret()
        #expect(WebhookSubscription.key(of: secret)?.count == 32)
        let good = try WebhookSubscription(id: "crm-1", url: "https://crm.example/hooks", secret: secret, paths: ["root.chat"], kinds: ["cleared", "cleared", "root"])
        #expect(good.kinds == [.cleared, .root])
        let (c1, chat, chatter) = (try BadgePath(validating: "root.chat.c1"), try BadgePath(validating: "root.chat"), try BadgePath(validating: "root.chatter"))
        #expect(good.covers(c1) && good.covers(chat))
        #expect(!good.covers(chatter) && !good.covers(.root))
        let cases: [(String, String, String, [String], [String], String)] = [
            ("", "https://a.example", secret, ["root"], ["root"], "id must be"),
            ("a b", "https://a.example", secret, ["root"], ["root"], "id must be"),
            ("a", "ftp://a.example", secret, ["root"], ["root"], "url must be"),
            ("a", "https://", secret, ["root"], ["root"], "url must be"),
            ("a", "https://a.example", "whsec_AAAA", ["root"], ["root"], "secret must be"),
            ("a", "https://a.example", "s3cret", ["root"], ["root"], "secret must be"),
            ("a", "https://a.example", secret, [], ["root"], "paths must"),
            ("a", "https://a.example", secret, ["chat"], ["root"], "paths:"),
            ("a", "https://a.example", secret, ["root"], [], "kinds must"),
            ("a", "https://a.example", secret, ["root"], ["read"], "kinds: \"read\""),
        ]
        for (id, url, secret, paths, kinds, said) in cases {
            #expect(throws: WebhookSubscription.Invalid.self, "\(id) \(url) \(paths) \(kinds)") {
                _ = try WebhookSubscription(id: id, url: url, secret: secret, paths: paths, kinds: kinds)
            }
            do {
                _ = try WebhookSubscription(id: id, url: url, secret: secret, paths: paths, kinds: kinds)
            } catch {
                #expect(error.description.contains(said), "\(error)")
            }
        }
    }

    static func userRecord(_ user: String, own: Int64, changed: [(String, Bool, Int64, Int64)], root: (Int64, Int64)) -> String {
        let nodes = changed.map { #"{"path":"\#($0.0)","shown":\#($0.1),"count":\#($0.2),"unseen":\#($0.3),"text":null,"icon":null}"# }
        return #"{"type":"user","user":"\#(user)","version":\#(own),"previous_version":\#(own - 1),"own_version":\#(own),"broadcast_version":0,"changed":[\#(nodes.joined(separator: ","))],"dismissed":[],"seen":[],"root":{"count":\#(root.0),"unseen":\#(root.1)},"at":"2026-11-27T10:00:00.000+00:00"}"#
    }

    static func decoded(_ json: String) throws -> ChangeRecord {
        try ChangeRecord.decode(Array(json.utf8)).get()
    }

    @Test("cleared, seen and root within the paths; a version handled before makes nothing; a broadcast goes to broadcasts subscribers")
    func planning() throws {
        let secret = WebhookSubscription.makeSecret()
        let chat = try WebhookSubscription(id: "chat", url: "https://a.example", secret: secret, paths: ["root.chat"], kinds: ["cleared", "seen", "root"])
        let all = try WebhookSubscription(id: "all", url: "https://b.example", secret: secret, paths: ["root"], kinds: ["broadcasts"])
        let records = try [
            Self.userRecord("ann", own: 1, changed: [("root", true, 3, 3), ("root.chat", true, 2, 2), ("root.chat.c1", true, 2, 2), ("root.feed", true, 1, 1)], root: (3, 3)),
            Self.userRecord("ann", own: 2, changed: [("root", true, 3, 1), ("root.chat", true, 2, 0), ("root.chat.c1", true, 2, 0)], root: (3, 1)),
            Self.userRecord("ann", own: 3, changed: [("root", true, 1, 1), ("root.chat", false, 0, 0), ("root.chat.c1", false, 0, 0)], root: (1, 1)),
            Self.userRecord("ann", own: 2, changed: [("root.chat.c1", false, 0, 0)], root: (9, 9)),
            Self.userRecord("ann", own: 4, changed: [("root", false, 0, 0), ("root.feed", false, 0, 0)], root: (0, 0)),
            #"{"type":"broadcasts","version":5,"previous_version":4,"added":[],"withdrawn":[],"at":"2026-11-27T10:00:00.000+00:00"}"#,
        ].map(Self.decoded)
        var positions: [String: WebhookStore.UserPosition] = [:]
        let made = WebhookPlanner.plan(records, positions: &positions, subscriptions: [chat, all])
        let summary = made.map { "\($0.subscription) \($0.user) \($0.kind) \(Self.data($0.payload))" }
        #expect(
            summary == [
                #"chat ann root {"own_version":1,"previous_root":null,"root":{"count":3,"unseen":3},"user":"ann","version":1}"#,
                #"chat ann seen {"nodes":[{"count":2,"path":"root.chat"},{"count":2,"path":"root.chat.c1"}],"own_version":2,"user":"ann","version":2}"#,
                #"chat ann root {"own_version":2,"previous_root":{"count":3,"unseen":3},"root":{"count":3,"unseen":1},"user":"ann","version":2}"#,
                #"chat ann cleared {"own_version":3,"paths":["root.chat","root.chat.c1"],"user":"ann","version":3}"#,
                #"chat ann root {"own_version":3,"previous_root":{"count":3,"unseen":1},"root":{"count":1,"unseen":1},"user":"ann","version":3}"#,
                #"chat ann root {"own_version":4,"previous_root":{"count":1,"unseen":1},"root":{"count":0,"unseen":0},"user":"ann","version":4}"#,
                #"all  broadcasts {"added":[],"at":"2026-11-27T10:00:00.000+00:00","previous_version":4,"type":"broadcasts","version":5,"withdrawn":[]}"#,
            ], "\(summary.joined(separator: "\n"))")
        #expect(positions["ann"] == WebhookStore.UserPosition(ownVersion: 4, root: BadgeAggregate(count: 0, unseen: 0)))
        #expect(Set(made.map(\.id)).count == made.count, "ids are distinct")
        // The same records again, from the stored positions: nothing new.
        #expect(WebhookPlanner.plan(Array(records.prefix(5)), positions: &positions, subscriptions: [chat, all]).isEmpty)
        #expect(made.allSatisfy { $0.payload.contains(#""type":"#) && $0.payload.contains(#""timestamp":"#) })
    }

    /// The `data` of a delivery's body, with sorted keys.
    static func data(_ payload: String) -> String {
        guard let object = try? JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any], let data = object["data"],
            let text = try? JSONSerialization.data(withJSONObject: data, options: [.sortedKeys, .withoutEscapingSlashes])
        else { return "unreadable: \(payload)" }
        return String(decoding: text, as: UTF8.self)
    }

    @Test("records that are not change records are refused with a reason, never trapped on")
    func unreadableRecords() {
        for text in ["", "[]", "{}", #"{"type":"user"}"#, #"{"type":"user","user":"a","version":1,"own_version":0,"changed":[],"root":{"count":0,"unseen":0}}"#,
            #"{"type":"user","user":"a","version":1,"own_version":1,"changed":[{"path":"x","shown":true,"count":1,"unseen":0}],"root":{"count":0,"unseen":0}}"#,
            #"{"type":"broadcasts"}"#, #"{"type":"other"}"#, #"{"type":"user","user":"a","version":1e99}"#,
            #"{"type":"user","user":"a","version":1,"own_version":1,"changed":[],"root":{"count":-1,"unseen":0}}"#,
            #"{"type":"user","user":"a","version":1,"own_version":1,"changed":[{"path":"root","shown":true,"count":1,"unseen":-2}],"root":{"count":1,"unseen":0}}"#]
        {
            if case .success(let record) = ChangeRecord.decode(Array(text.utf8)) { Issue.record("\(text) read as \(record)") }
        }
    }

    @Test("retry pauses: 5 s, then four times longer up to the bound; Retry-After kept within it; none after the last try")
    func retryPauses() {
        let configuration = WebhookConfiguration(kafka: .init(), maximumAttempts: 8)
        let pauses = (1...8).map { configuration.retryDelay(after: $0, retryAfter: nil) }
        #expect(pauses == [.seconds(5), .seconds(20), .seconds(80), .seconds(320), .seconds(1280), .seconds(5120), .seconds(20480), nil])
        #expect(configuration.retryDelay(after: 1, retryAfter: .seconds(120)) == .seconds(120))
        #expect(configuration.retryDelay(after: 1, retryAfter: .zero) == .seconds(1))
        #expect(configuration.retryDelay(after: 1, retryAfter: .seconds(604_800)) == .seconds(21_600))
        #expect(WebhookConfiguration(kafka: .init(), maximumAttempts: 30).retryDelay(after: 29, retryAfter: nil) == .seconds(21_600))
        #expect(WebhookConfiguration.retryAfter(" 7 ") == .seconds(7))
        for bad in [nil, "", "-1", "soon", "Wed, 21 Oct 2015 07:28:00 GMT", "99999999999999999999"] {
            #expect(WebhookConfiguration.retryAfter(bad) == nil)
        }
    }
}
