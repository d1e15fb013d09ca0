import BadgeCore
import Foundation
import TestSupport
import Testing

@Suite("Item and decrement events, and rules that make them")
struct ItemEventTests {
    @Test("add, remove and decr decode with their fields; the encoder writes them back")
    func decode() throws {
        let add = try #require(event(#"{"id":"e1","op":"add","user":"u42","path":"root.chat.c7","item":"m123","occurred_at":"2026-11-23T10:00:00Z"}"#))
        #expect(add.body == .operation(path: path("root.chat.c7"), operation: .addItem(ItemID(rawValue: "m123")!)))
        #expect(add.occurredAt == Date(timeIntervalSince1970: 1_795_428_000))
        let remove = try #require(event(#"{"id":"e2","op":"remove","user":"u42","path":"root.chat.c7","item":"m123"}"#))
        #expect(remove.body == .operation(path: path("root.chat.c7"), operation: .removeItem(ItemID(rawValue: "m123")!)))
        let decr = try #require(event(#"{"id":"e3","op":"decr","user":"u42","path":"root.chat.c7","by":2}"#))
        #expect(decr.body == .operation(path: path("root.chat.c7"), operation: .decrement(by: 2)))
        for decoded in [add, remove, decr] {
            #expect(EventDecoder().decode(EventEncoder().encode(decoded)) == .success(decoded))
        }
    }

    @Test("a missing or invalid item, and items or decr for a broadcast, are invalid_field with a reason")
    func rejections() {
        let missing = rejection(#"{"id":"e","op":"add","user":"u","path":"root.a"}"#)
        #expect(missing?.reason == .invalidField)
        #expect(missing?.message == "field 'item' is required for op 'add'")
        let spaced = rejection(#"{"id":"e","op":"remove","user":"u","path":"root.a","item":"m 1"}"#)
        #expect(spaced?.reason == .invalidField)
        #expect(spaced?.message.contains("an item id is 1-128 visible ASCII characters") == true)
        let long = rejection(#"{"id":"e","op":"add","user":"u","path":"root.a","item":"\#(String(repeating: "x", count: 129))"}"#)
        #expect(long?.message.contains("has 129 characters; the most is 128") == true)
        let broadcast = rejection(#"{"id":"e","op":"add","audience":"all","path":"root.a","item":"m1"}"#)
        #expect(broadcast?.reason == .invalidField)
        #expect(broadcast?.message == "op 'add' is per user; a broadcast ('audience': 'all') takes 'set', 'incr' or 'clear'")
        #expect(rejection(#"{"id":"e","op":"decr","audience":"all","path":"root.a"}"#)?.reason == .invalidField)
        #expect(rejection(#"{"id":"e","op":"decr","user":"u","path":"root.a","by":0}"#)?.reason == .invalidField)
    }

    @Test("a rule's item is filled from the attributes; a missing attribute or a bad result is rejected")
    func ruleItems() throws {
        let rules = try RuleSet(yaml: """
            rules:
              - type: chat.message
                op: add
                item: "{message}"
                path: root.chat.{conversation}
              - type: message.read
                op: remove
                item: "msg-{message}"
                path: root.chat.{conversation}
            """)
        let message = try #require(event(#"{"id":"a1","type":"chat.message","users":["u42","u43"],"attrs":{"conversation":"c7","message":"m9"},"occurred_at":"2026-11-23T10:00:00Z"}"#))
        let mapped = try rules.map(message).get()
        #expect(mapped.operation == .addItem(ItemID(rawValue: "m9")!))
        #expect(mapped.path == path("root.chat.c7"))
        #expect(mapped.mutations().map(\.occurredAt) == [message.occurredAt, message.occurredAt])
        let read = try #require(event(#"{"id":"a2","type":"message.read","user":"u42","attrs":{"conversation":"c7","message":9}}"#))
        #expect(try rules.map(read).get().operation == .removeItem(ItemID(rawValue: "msg-9")!))
        let noMessage = try #require(event(#"{"id":"a3","type":"chat.message","user":"u42","attrs":{"conversation":"c7"}}"#))
        guard case .failure(let missing) = rules.map(noMessage) else { Issue.record("mapped without the attribute"); return }
        #expect(missing.reason == .missingAttribute)
        #expect(missing.message.contains("needs the attribute 'message'"))
        let spaced = try #require(event(#"{"id":"a4","type":"chat.message","user":"u42","attrs":{"conversation":"c7","message":"a b"}}"#))
        guard case .failure(let invalid) = rules.map(spaced) else { Issue.record("mapped a bad item"); return }
        #expect(invalid.reason == .invalidField)
        let broadcast = try #require(event(#"{"id":"a5","type":"chat.message","audience":"all","attrs":{"conversation":"c7","message":"m1"}}"#))
        guard case .failure(let refused) = rules.map(broadcast) else { Issue.record("mapped an item broadcast"); return }
        #expect(refused.reason == .invalidField)
    }

    @Test("a malformed item template is refused when the rules load, naming the rule")
    func malformedTemplates() {
        for (template, problem) in [("{message", "has a '{' without '}'"), ("m}", "has a '}' without '{'"), ("{}", "has an empty placeholder '{}'"), ("{a-b}", "in a placeholder")] {
            do {
                _ = try RuleSet(yaml: "rules:\n  - type: t\n    op: add\n    item: \"\(template)\"\n    path: root.a\n")
                Issue.record("\(template) loaded")
            } catch {
                #expect(error.message.hasPrefix("rule 1 (type 't'): item template") && error.message.contains(problem), "\(error.message)")
            }
        }
    }

    @Test("command-line fields go through the same grammar, with flag names in messages")
    func flags() throws {
        #expect(try BadgeOperation.named("decr", OperationFields(by: 3)) == .decrement(by: 3))
        #expect(try BadgeOperation.named("add", OperationFields(item: "m1")) == .addItem(ItemID(rawValue: "m1")!))
        #expect(throws: OperationFieldsError.self) { try BadgeOperation.named("add", OperationFields()) }
        do {
            _ = try BadgeOperation.named("set", OperationFields(by: 2))
            Issue.record("set took --by")
        } catch {
            #expect(error.description == "--by does not apply to op 'set'")
        }
        do {
            _ = try BadgeOperation.named("bump", OperationFields())
            Issue.record("an unknown op")
        } catch {
            #expect(error.description == "--op 'bump' is not an op; the ops are 'set', 'incr', 'decr', 'clear', 'add', 'remove', 'seen', 'mute' or 'unmute'")
        }
    }
}
