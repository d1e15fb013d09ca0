import BadgeCore
import Foundation
import TestSupport
import Testing

@Suite("Rules")
struct RuleSetTests {
    static let yaml = """
        rules:
          - type: chat.message
            op: incr            # set | incr | clear
            path: root.chat.{conversation}
            by: 1
          - type: feature.launched
            op: set
            icon: new
            path: root.settings.{feature}
          - type: chat.read
            op: clear
            force: true
            path: root.chat.{conversation}
          - type: shop.item
            op: set
            count: 3
            path: root.shop.item_{id}.{variant}
        """

    func content(_ type: String, _ attributes: [String: String], users: [String] = ["u42"]) throws -> BadgeEvent {
        BadgeEvent(
            id: try EventID(validating: "e1"), audience: .users(users.map(user)),
            body: .content(type: type, attributes: attributes))
    }

    func mapped(_ event: BadgeEvent) throws -> MappedOperation {
        try RuleSet(yaml: Self.yaml).map(event).get()
    }

    func rejection(_ event: BadgeEvent) throws -> EventRejection? {
        if case .failure(let rejection) = try RuleSet(yaml: Self.yaml).map(event) { return rejection }
        return nil
    }

    func ruleError(_ yaml: String) -> String? {
        do {
            _ = try RuleSet(yaml: yaml)
            return nil
        } catch {
            return error.message
        }
    }

    @Test("the rules file loads with its types in order")
    func loads() throws {
        #expect(try RuleSet(yaml: Self.yaml).types == ["chat.message", "feature.launched", "chat.read", "shop.item"])
        #expect(RuleSet.empty.types.isEmpty)
        #expect(try RuleSet(yaml: "rules: []").types.isEmpty)
    }

    @Test("content events map through their rule")
    func mapping() throws {
        let chat = try mapped(try content("chat.message", ["conversation": "c7"], users: ["u42", "u43"]))
        #expect(chat.path == path("root.chat.c7"))
        #expect(chat.operation == .increment(by: 1))
        #expect(chat.mutations().map(\.user.rawValue) == ["u42", "u43"])
        #expect(chat.mutations().allSatisfy { $0.path == chat.path && $0.operation == chat.operation })
        let feature = try mapped(try content("feature.launched", ["feature": "dark_mode"]))
        #expect(feature.operation == .set(count: 0, icon: try icon("new")))
        let read = try mapped(try content("chat.read", ["conversation": "c7"]))
        #expect(read.operation == .clear(force: true))
        let item = try mapped(try content("shop.item", ["id": "42", "variant": "red", "unused": "x.y"]))
        #expect(item.path == path("root.shop.item_42.red"))
        #expect(item.operation == .set(count: 3, icon: nil))
    }

    @Test("direct operations pass through with their expiry; broadcasts make no per-user mutations")
    func passThrough() throws {
        let expiry = now.addingTimeInterval(3600)
        let direct = BadgeEvent(
            id: try EventID(validating: "e9"), audience: .everyone, expiresAt: expiry,
            body: .operation(path: path("root.promo"), operation: .set(count: 1, icon: nil)))
        let result = try RuleSet.empty.map(direct).get()
        #expect(result.path == path("root.promo"))
        #expect(result.expiresAt == expiry)
        #expect(result.eventID.rawValue == "e9")
        #expect(result.mutations().isEmpty)
    }

    @Test("unknown_type")
    func unknownType() throws {
        let rejection = try rejection(try content("chat.typing", [:]))
        #expect(rejection?.reason == .unknownType)
        #expect(rejection?.message.contains("'chat.typing'") == true)
    }

    @Test("missing_attribute names the attribute")
    func missingAttribute() throws {
        let rejection = try rejection(try content("chat.message", ["conv": "c7"]))
        #expect(rejection?.reason == .missingAttribute)
        #expect(rejection?.message.contains("'conversation'") == true)
    }

    @Test(
        "invalid_path: attribute values that are not labels",
        arguments: ["c.7", "*", "a|b", "", String(repeating: "x", count: 65), "c 7", "ç", "{x}", "a%"])
    func invalidAttribute(value: String) throws {
        let rejection = try rejection(try content("chat.message", ["conversation": value]))
        #expect(rejection?.reason == .invalidPath)
        #expect(rejection?.message.contains("attribute 'conversation'") == true)
    }

    @Test("invalid_path: a value that makes a label too long")
    func tooLongAfterTemplate() throws {
        let rejection = try rejection(try content("shop.item", ["id": String(repeating: "9", count: 60), "variant": "a"]))
        #expect(rejection?.reason == .invalidPath)
        #expect(rejection?.message.contains("the most is 64") == true)
    }

    @Test("rule file errors name the rule and the problem", arguments: [
        ("rules:\n  - type: a\n    op: bump\n    path: root.a", "rule 1 (type 'a'): unknown op 'bump'"),
        ("rules:\n  - type: a\n    op: set\n    path: chat.{x}", "rule 1 (type 'a'): path template 'chat.{x}' must start with 'root'"),
        ("rules:\n  - type: a\n    op: set\n    path: root.{x", "'{' without '}'"),
        ("rules:\n  - type: a\n    op: set\n    path: root.x}", "'}' without '{'"),
        ("rules:\n  - type: a\n    op: set\n    path: root.{}", "empty placeholder"),
        ("rules:\n  - type: a\n    op: set\n    path: root.{a.b}", "'{' without '}'"),
        ("rules:\n  - type: a\n    op: set\n    path: root.{x-y}", "in a placeholder"),
        ("rules:\n  - type: a\n    op: set\n    path: root..{x}", "empty label at position 2"),
        ("rules:\n  - type: a\n    op: set\n    path: root.a*.{x}", "the character '*'"),
        ("rules:\n  - type: a\n    op: set\n    path: '{r}.x'", "must start with 'root'"),
        ("rules:\n  - type: a\n    op: set\n    path: root.a\n  - type: a\n    op: set\n    path: root.b",
         "rule 2 (type 'a'): duplicate type; rule 1 already maps it"),
        ("rules:\n  - type: a\n    path: root.a", "rule 1 (type 'a'): missing field 'op'"),
        ("rules:\n  - op: set\n    path: root.a", "rule 1 (no type): missing field 'type'"),
        ("rules:\n  - type: a\n    op: set", "missing field 'path'"),
        ("rules:\n  - type: a\n    op: set\n    count: -1\n    path: root.a", "'count' is '-1'"),
        ("rules:\n  - type: a\n    op: incr\n    by: 0\n    path: root.a", "'by' is '0'"),
        ("rules:\n  - type: a\n    op: incr\n    by: lots\n    path: root.a", "'by' is 'lots'"),
        ("rules:\n  - type: a\n    op: set\n    icon: NEW!\n    path: root.a", "'icon'"),
        ("rules:\n  - type: a\n    op: clear\n    force: maybe\n    path: root.a", "'force' is 'maybe'"),
        ("rules:\n  - type: a\n    op: incr\n    icon: new\n    path: root.a", "'icon' does not apply to op 'incr'"),
        ("rules:\n  - type: a\n    op: set\n    path: root.a\n    colour: red", "unknown key 'colour'"),
        ("rules:\n  - type: a\n    op: set\n    path: root.a\n    op: incr", "key(s): 'op'"),
        ("rulez: []", "unknown key 'rulez'"),
        ("", "empty"),
        ("rules: 5", "'rules' must be a list"),
        ("rules: [unclosed", "not valid YAML"),
        ("- a\n- b", "must be a mapping"),
        ("rules:\n  - just a string", "rule 1: must be a mapping"),
    ])
    func ruleFileErrors(yaml: String, expected: String) {
        let message = ruleError(yaml)
        #expect(message?.contains(expected) == true, "got: \(message ?? "accepted")")
    }

    @Test("a template with too many labels is refused")
    func templateDepth() {
        let template = "root" + String(repeating: ".{x}", count: 17)
        #expect(ruleError("rules:\n  - type: a\n    op: set\n    path: \(template)")?.contains("17 labels") == true)
    }
}
