import BadgeCore
import Foundation
import TestSupport
import Testing

@Suite("Event decoding (DESIGN §3)")
struct EventDecoderTests {
    @Test("the direct operations of the design decode")
    func directOperations() throws {
        let incr = try #require(event(#"{"id": "9f1c", "op": "incr", "user": "u42", "path": "root.chat.c7", "by": 1}"#))
        #expect(incr.id.rawValue == "9f1c")
        #expect(incr.audience == .users([user("u42")]))
        #expect(incr.body == .operation(path: path("root.chat.c7"), operation: .increment(by: 1)))
        let set = try #require(event(#"{"id": "9f1d", "op": "set", "user": "u42", "path": "root.promotion.item1", "count": 5}"#))
        #expect(set.body == .operation(path: path("root.promotion.item1"), operation: .set(count: 5, icon: nil)))
        let clear = try #require(event(#"{"id": "9f1e", "op": "clear", "user": "u42", "path": "root.promotion", "force": true}"#))
        #expect(clear.body == .operation(path: path("root.promotion"), operation: .clear(force: true)))
    }

    @Test("defaults: set is a dot, incr by 1, clear not forced; icon and 5.0 accepted; null is absent")
    func defaults() throws {
        let dot = try #require(event(#"{"id":"e","op":"set","user":"u","path":"root.a","icon":"new"}"#))
        #expect(dot.body == .operation(path: path("root.a"), operation: .set(count: 0, icon: try icon("new"))))
        let incr = try #require(event(#"{"id":"e","op":"incr","user":"u","path":"root.a","by":null}"#))
        #expect(incr.body == .operation(path: path("root.a"), operation: .increment(by: 1)))
        let clear = try #require(event(#"{"id":"e","op":"clear","user":"u","path":"root.a"}"#))
        #expect(clear.body == .operation(path: path("root.a"), operation: .clear(force: false)))
        let whole = try #require(event(#"{"id":"e","op":"set","user":"u","path":"root.a","count":5.0}"#))
        #expect(whole.body == .operation(path: path("root.a"), operation: .set(count: 5, icon: nil)))
        let unknown = try #require(event(#"{"id":"e","op":"set","user":"u","path":"root.a","color":"red"}"#))
        #expect(unknown.id.rawValue == "e")
    }

    @Test("content events, users deduplicated in order, broadcasts, stringified attributes")
    func contentEvents() throws {
        let chat = try #require(event(
            #"{"id": "a01", "type": "chat.message", "users": ["u42", "u43", "u42"], "attrs": {"conversation": "c7", "n": 3, "ok": true}}"#))
        #expect(chat.audience == .users([user("u42"), user("u43")]))
        #expect(chat.body == .content(type: "chat.message", attributes: ["conversation": "c7", "n": "3", "ok": "true"]))
        let feature = try #require(event(
            #"{"id": "a02", "type": "feature.launched", "audience": "all", "attrs": {"feature": "dark_mode"}}"#))
        #expect(feature.audience == .everyone)
    }

    @Test("timestamps: RFC 3339 with or without fraction, Z or offset")
    func timestamps() throws {
        let utc = try #require(event(
            #"{"id":"e","op":"set","user":"u","path":"root.a","occurred_at":"2025-03-01T12:00:00Z","expires_at":"2025-03-01T14:30:00.250+02:00"}"#))
        #expect(utc.occurredAt == Date(timeIntervalSince1970: 1_740_830_400))
        #expect(utc.expiresAt == Date(timeIntervalSince1970: 1_740_832_200.25))
        let lower = try #require(event(#"{"id":"e","op":"set","user":"u","path":"root.a","expires_at":"2024-02-29t23:59:59.5z"}"#))
        #expect(lower.expiresAt == Date(timeIntervalSince1970: 1_709_251_199.5))
        let negative = try #require(event(#"{"id":"e","op":"set","user":"u","path":"root.a","expires_at":"1970-01-01T00:00:00-01:30"}"#))
        #expect(negative.expiresAt == Date(timeIntervalSince1970: 5400))
    }

    @Test("too_large: over 64 KiB, checked before parsing")
    func tooLarge() throws {
        var bytes = Array(#"{"id":"e","op":"set","user":"u","path":"root.a","pad":""#.utf8)
        bytes += Array(repeating: UInt8(ascii: "x"), count: EventDecoder.maximumRecordSize)
        bytes += Array(#""}"#.utf8)
        let result = EventDecoder().decode(bytes)
        #expect(throws: EventRejection.self) { try result.get() }
        guard case .failure(let rejection) = result else { return }
        #expect(rejection.reason == .tooLarge)
        #expect(rejection.message.contains("65536"))
        let garbage = [UInt8](repeating: 0xFF, count: EventDecoder.maximumRecordSize + 1)
        guard case .failure(let garbageRejection) = EventDecoder().decode(garbage) else {
            Issue.record("garbage decoded")
            return
        }
        #expect(garbageRejection.reason == .tooLarge)
    }

    @Test("invalid_encoding: not UTF-8")
    func invalidEncoding() {
        var bytes = Array(#"{"id":"e","op":"set","user":"u","path":"root.a"#.utf8)
        bytes += [0xC3, 0x28]
        bytes += Array(#""}"#.utf8)
        guard case .failure(let rejection) = EventDecoder().decode(bytes) else {
            Issue.record("decoded")
            return
        }
        #expect(rejection.reason == .invalidEncoding)
    }

    @Test(
        "malformed_json: not a JSON object",
        arguments: ["", "{", "not json", #"[{"id":"e"}]"#, "42", #""a string""#, "null", #"{"id":"e",}"#, #"{"id":"e","users":["u",]}"#, #"{"id":"e"} x"#])
    func malformedJSON(text: String) {
        #expect(rejection(text)?.reason == .malformedJSON)
    }

    @Test("deep nesting is rejected, not a crash")
    func deepNesting() {
        let depth = 20_000
        let text = #"{"id":"e","x":"# + String(repeating: "[", count: depth) + String(repeating: "]", count: depth) + "}"
        let reason = rejection(text)?.reason
        #expect(reason == nil || reason == .malformedJSON)
    }

    @Test("missing_field: id, op or type, recipients, path", arguments: [
        (#"{"op":"set","user":"u","path":"root.a"}"#, "'id'"),
        (#"{"id":"e","user":"u","path":"root.a"}"#, "'op' or 'type'"),
        (#"{"id":"e","op":"set","path":"root.a"}"#, "'user', 'users' and 'audience'"),
        (#"{"id":"e","op":"set","user":"u"}"#, "'path'"),
        (#"{"id":null,"op":"set","user":"u","path":"root.a"}"#, "'id'"),
    ])
    func missingField(text: String, named: String) {
        let rejection = rejection(text)
        #expect(rejection?.reason == .missingField)
        #expect(rejection?.message.contains(named) == true, "\(rejection?.message ?? "")")
    }

    @Test("invalid_field: wrong type, range or format", arguments: [
        (#"{"id":"e","op":"set","user":"u","path":"root.a","count":-1}"#, "'count' is -1"),
        (#"{"id":"e","op":"set","user":"u","path":"root.a","count":1.5}"#, "'count' is 1.5"),
        (#"{"id":"e","op":"set","user":"u","path":"root.a","count":1e30}"#, "'count'"),
        (#"{"id":"e","op":"set","user":"u","path":"root.a","count":1000000001}"#, "'count' is 1000000001"),
        (#"{"id":"e","op":"set","user":"u","path":"root.a","count":"5"}"#, "'count' must be a number"),
        (#"{"id":"e","op":"incr","user":"u","path":"root.a","by":0}"#, "'by' is 0"),
        (#"{"id":"e","op":"set","type":"chat.message","user":"u","path":"root.a"}"#, "'op' and 'type'"),
        (#"{"id":"e","op":"set","user":"u","users":["v"],"path":"root.a"}"#, "'user' and 'users'"),
        (#"{"id":"e","op":"set","audience":"some","path":"root.a"}"#, "'audience' is 'some'"),
        (#"{"id":"e","op":"set","user":"u","path":"root.a","expires_at":"tomorrow"}"#, "'expires_at' is 'tomorrow'"),
        (#"{"id":"e","op":"set","user":"u","path":"root.a","occurred_at":"2025-02-30T00:00:00Z"}"#, "'occurred_at'"),
        (#"{"id":"e","op":"set","user":"u","path":"root.a","expires_at":"2025-03-01T12:00:00"}"#, "'expires_at'"),
        (#"{"id":"e","op":"set","user":"u","path":"root.a","icon":"New!"}"#, "'icon'"),
        (#"{"id":"e","op":"clear","user":"u","path":"root.a","force":"yes"}"#, "'force'"),
        (#"{"id":"e","op":"incr","user":"u","path":"root.a","count":3}"#, "'count' does not apply to op 'incr'"),
        (#"{"id":"e","op":"set","user":"u","path":"root.a","by":3}"#, "'by' does not apply to op 'set'"),
        (#"{"id":"e","type":"t","user":"u","path":"root.a"}"#, "'path' applies only to direct operations"),
        (#"{"id":"e","type":"t","user":"u","attrs":{"x":[1]}}"#, "attribute 'x'"),
        (#"{"id":"e","type":"t","user":"u","attrs":{"x":1.5}}"#, "attribute 'x'"),
        (#"{"id":"e","type":"t","user":"u","attrs":"x"}"#, "'attrs' must be an object"),
        (#"{"id":"e","type":"","user":"u"}"#, "'type'"),
        (#"{"id":"e","type":7,"user":"u"}"#, "'type' must be a string"),
        (#"{"id":"has space","op":"set","user":"u","path":"root.a"}"#, "'id'"),
        (#"{"id":5,"op":"set","user":"u","path":"root.a"}"#, "'id' must be a string"),
        (#"{"id":"e","op":"set","users":[],"path":"root.a"}"#, "'users' is empty"),
        (#"{"id":"e","op":"set","users":"u","path":"root.a"}"#, "'users' must be an array"),
        (#"{"id":"e","op":"set","users":["u",7],"path":"root.a"}"#, "'users' item 2"),
        (#"{"id":"e","op":5,"user":"u","path":"root.a"}"#, "'op' must be a string"),
    ])
    func invalidField(text: String, named: String) {
        let rejection = rejection(text)
        #expect(rejection?.reason == .invalidField, "\(text)")
        #expect(rejection?.message.contains(named) == true, "\(rejection?.message ?? "accepted")")
    }

    @Test("unknown_op")
    func unknownOp() {
        let rejection = rejection(#"{"id":"e","op":"bump","user":"u","path":"root.a"}"#)
        #expect(rejection?.reason == .unknownOp)
        #expect(rejection?.message == "field 'op' is 'bump'; it must be 'set', 'incr', 'decr', 'clear', 'add', 'remove', 'seen', 'mute' or 'unmute'")
    }

    @Test("invalid_path: the message is the path error", arguments: [
        "chat.c7", "root..a", "root.a*b", "root.a|b", "root.chat.*{1}", "root.café", "",
    ])
    func invalidPath(text: String) throws {
        let json = #"{"id":"e","op":"set","user":"u","path":"# + String(decoding: try JSONEncoder().encode(text), as: UTF8.self) + "}"
        let rejection = rejection(json)
        #expect(rejection?.reason == .invalidPath)
        let expected = #expect(throws: BadgePathError.self) { try BadgePath(validating: text) }
        #expect(rejection?.message == expected?.description)
    }

    @Test("invalid_user: a bad id in user or users", arguments: [
        #"{"id":"e","op":"set","user":"","path":"root.a"}"#,
        #"{"id":"e","op":"set","user":"*","path":"root.a"}"#,
        #"{"id":"e","op":"set","user":"with space","path":"root.a"}"#,
        #"{"id":"e","op":"set","users":["ok","bad\u0001"],"path":"root.a"}"#,
        #"{"id":"e","op":"set","user":"ü","path":"root.a"}"#,
    ])
    func invalidUser(text: String) {
        #expect(rejection(text)?.reason == .invalidUser, "\(text)")
    }

    @Test("too_many_users: more than 1,000 ids; exactly 1,000 is fine")
    func tooManyUsers() {
        func json(_ count: Int) -> String {
            let users = (0..<count).map { "\"u\($0)\"" }.joined(separator: ",")
            return #"{"id":"e","type":"t","users":["# + users + "]}"
        }
        #expect(rejection(json(1_001))?.reason == .tooManyUsers)
        #expect(rejection(json(1_001))?.message.contains("1001") == true)
        guard case .users(let users)? = event(json(1_000))?.audience else {
            Issue.record("1,000 users rejected")
            return
        }
        #expect(users.count == 1_000)
    }

    @Test("every rejection reason has a wire name")
    func reasonNames() {
        #expect(RejectionReason.allCases.count == 11)
        #expect(RejectionReason.missingAttribute.rawValue == "missing_attribute")
        #expect(EventRejection(reason: .tooLarge, message: "m").description == "too_large: m")
    }

    @Test("messages cut long hostile values")
    func longValues() {
        let long = String(repeating: "x", count: 5_000)
        let rejection = rejection(#"{"id":"e","op":""# + long + #"","user":"u","path":"root.a"}"#)
        #expect(rejection?.reason == .unknownOp)
        #expect((rejection?.message.count ?? .max) < 300)
    }

    @Test("random bytes and mutated records: an event read encodes and reads back the same; a refusal is one line with a reason")
    func fuzz() {
        var random = SeededRandom(seed: 42)
        let seed = Array(#"{"id":"e1","op":"set","users":["u1","u2"],"path":"root.a.b","count":3,"icon":"new","expires_at":"2025-03-01T12:00:00Z"}"#.utf8)
        var (read, refused) = (0, 0)
        func check(_ bytes: [UInt8]) {
            switch EventDecoder().decode(bytes) {
            case .success(let event):
                read += 1
                #expect(EventDecoder().decode(EventEncoder().encode(event)) == .success(event), "\(String(decoding: bytes, as: UTF8.self))")
            case .failure(let rejection):
                refused += 1
                #expect(!rejection.message.isEmpty && rejection.message.count < 300 && !rejection.message.contains("\n"), "\(rejection)")
            }
        }
        for _ in 0..<2_000 {
            var bytes = seed
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                let index = Int.random(in: 0..<bytes.count, using: &random)
                bytes[index] = UInt8.random(in: 0...255, using: &random)
            }
            check(bytes)
        }
        for _ in 0..<500 {
            check((0..<Int.random(in: 0...64, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) })
        }
        // Both sides were reached: mutations that keep a valid event, and ones that do not.
        #expect(read > 50 && refused > 500, "read \(read), refused \(refused)")
    }
}

@Suite("Event encoding")
struct EventEncoderTests {
    @Test("encoder output decodes back to the same event")
    func roundTrip() throws {
        let events = [
            BadgeEvent(
                id: try EventID(validating: "9f1c-\"quoted\"\\"), audience: .users([user("u42")]),
                body: .operation(path: path("root.chat.c7"), operation: .increment(by: 3))),
            BadgeEvent(
                id: try EventID(validating: "e2"), audience: .users([user("u1"), user("u2")]),
                occurredAt: Date(timeIntervalSince1970: 1_740_830_400.125),
                expiresAt: Date(timeIntervalSince1970: 1_740_830_400),
                body: .operation(path: .root, operation: .set(count: 0, icon: try icon("new")))),
            BadgeEvent(
                id: try EventID(validating: "e3"), audience: .everyone,
                body: .operation(path: path("root.promo"), operation: .clear(force: true))),
            BadgeEvent(
                id: try EventID(validating: "e4"), audience: .users([user("u1")]),
                body: .operation(path: path("root.promo"), operation: .clear(force: false))),
            BadgeEvent(
                id: try EventID(validating: "e5"), audience: .everyone,
                // The earliest instants read back (timestamps before 1970 are refused: issue 11).
                expiresAt: Date(timeIntervalSince1970: 0.5),
                body: .content(type: "feature.launched", attributes: ["feature": "dark_mode", "note": "a \"b\"\n\u{1}é"])),
            BadgeEvent(
                id: try EventID(validating: "e6"), audience: .users([user("u1")]),
                body: .content(type: "chat.read", attributes: [:])),
        ]
        for original in events {
            let bytes = EventEncoder().encode(original)
            let text = String(decoding: bytes, as: UTF8.self)
            #expect(!text.contains(" \""))
            #expect(try EventDecoder().decode(bytes).get() == original, "\(text)")
        }
        let compact = String(decoding: EventEncoder().encode(events[0]), as: UTF8.self)
        #expect(compact == #"{"id":"9f1c-\"quoted\"\\","op":"incr","by":3,"path":"root.chat.c7","user":"u42"}"#)
    }
}
