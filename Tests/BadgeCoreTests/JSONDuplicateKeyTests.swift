@testable import BadgeCore
import TestSupport
import Testing

/// The parser's value for `text`, or nil if it refused it.
private func parsed(_ text: String) -> JSONValue? {
    try? JSONParser.parse(Array(text.utf8))
}

/// The event id a refused record still names.
private func namedID(_ text: String) -> String? {
    EventIntake.eventID(in: Array(text.utf8))?.rawValue
}

@Suite("Duplicate JSON keys: refused everywhere, and the dead letter names no id")
struct DuplicateKeyTests {
    @Test("a key repeated in any object, at any depth, is refused")
    func refusedAtDepth() {
        for text in [
            #"{"a":1,"a":1}"#, #"{"a":{"b":1,"b":2}}"#, #"{"a":[{"k":1},{"k":2,"k":3}]}"#, #"[{"x":null,"x":null}]"#,
            String(repeating: #"{"a":"#, count: 100) + #"{"z":1,"z":2}"# + String(repeating: "}", count: 100),
        ] {
            #expect(parsed(text) == nil, "\(text) must be refused")
        }
        // The same key in different objects, or keys differing in case, are not duplicates.
        #expect(parsed(#"[{"a":1},{"a":2}]"#) == .array([.object(["a": .integer(1)]), .object(["a": .integer(2)])]))
        #expect(parsed(#"{"a":{"a":1}}"#) == .object(["a": .object(["a": .integer(1)])]))
        #expect(parsed(#"{"a":1,"A":2}"#) == .object(["a": .integer(1), "A": .integer(2)]))
    }

    @Test("keys are compared after unescaping, as Swift strings")
    func escapedKeys() throws {
        #expect(parsed(#"{"id":"x","\u0069d":"y"}"#) == nil)
        #expect(parsed(#"{"\u0069\u0064":"x","id":"y"}"#) == nil)
        #expect(parsed(#"{"a\/b":1,"a/b":2}"#) == nil)
        #expect(parsed(#"{"\u00e9":1,"e\u0301":2}"#) == nil)
        do throws(JSONParseError) {
            _ = try JSONParser.parse(Array(#"{"id":"x", "\u0069d":"y"}"#.utf8))
            Issue.record("parsed")
        } catch {
            #expect(error.duplicateKey == "id")
            #expect(error.offset == 11)
        }
    }

    @Test("the decoder refuses a duplicate key as malformed_json, naming the key")
    func decoderMessage() {
        let id = rejection(#"{"id":"e1","op":"set","user":"u","path":"root.a","id":"e2"}"#)
        #expect(id?.reason == .malformedJSON)
        #expect(id?.message == "record repeats the key 'id' in one object; every key must be unique")
        let nested = rejection(#"{"id":"e","type":"t","user":"u","attrs":{"n":"1","n":"2"}}"#)
        #expect(nested?.reason == .malformedJSON)
        #expect(nested?.message == "record repeats the key 'n' in one object; every key must be unique")
        let same = rejection(#"{"id":"e","op":"set","user":"u","path":"root.a","path":"root.a"}"#)
        #expect(same?.reason == .malformedJSON)
    }

    @Test("a record with a duplicate key names no event id, even when both ids agree")
    func noIDForDuplicates() {
        #expect(namedID(#"{"id":"e1","op":"set","id":"e2"}"#) == nil)
        #expect(namedID(#"{"id":"e1","id":"e1"}"#) == nil)
        #expect(namedID(#"{"id":"e1","attrs":{"n":1,"n":2}}"#) == nil)
        #expect(namedID(#"{"id":"e1","\u0069d":"e2"}"#) == nil)
    }

    @Test("the id a refused record names is the top-level id read before the first error")
    func leadingID() {
        #expect(namedID(#"{"id":"e1","op":"set",}"#) == "e1")
        #expect(namedID(#"{"id":"e1","op""#) == "e1")
        #expect(namedID(#"{"x":[1,{"y":"]"}],"id":"late","op""#) == "late")
        #expect(namedID(#"{"op":"set",,"id":"after"}"#) == nil)
        #expect(namedID(#"{"a":{"id":"inner"}}"#) == nil)
        #expect(namedID(#"[{"id":"e1"}]"#) == nil)
        #expect(namedID(#"{"\u0069d":"e1"}"#) == nil)
        #expect(namedID(#"{"id":"e\u0031"}"#) == nil)
        #expect(namedID(#"{"id":"has space"}"#) == nil)
        #expect(namedID(#"{"id":42}"#) == nil)
        #expect(EventIntake.eventID(in: Array(#"{"id":"e1","x":""#.utf8) + [0xFF, 0x22, 0x7D])?.rawValue == "e1")
        #expect(namedID("\u{FEFF}{\"id\":\"bom\"}") == "bom")
    }
}

@Suite("The intake: decode, validate, map")
struct EventIntakeTests {
    static let rules: RuleSet = {
        do {
            return try RuleSet(yaml: "rules:\n  - type: chat.message\n    op: incr\n    path: root.chat.{c}\n")
        } catch {
            preconditionFailure("bad test rules: \(error)")
        }
    }()

    @Test("without rules, check passes any content event; map refuses it as unknown_type, naming the id")
    func withoutRules() throws {
        let content = Array(#"{"id":"e1","type":"other","user":"u"}"#.utf8)
        let intake = EventIntake(rules: nil)
        #expect(try intake.check(content).get().id.rawValue == "e1")
        guard case .failure(let refused) = intake.map(content) else {
            Issue.record("mapped")
            return
        }
        #expect(refused.rejection.reason == .unknownType)
        #expect(refused.eventID?.rawValue == "e1")
        #expect(refused.description == refused.rejection.description)
    }

    @Test("with rules, check and map refuse what the rules cannot map, and map a content event")
    func withRules() throws {
        let intake = EventIntake(rules: Self.rules)
        let missing = Array(#"{"id":"e2","type":"chat.message","user":"u"}"#.utf8)
        guard case .failure(let refused) = intake.check(missing) else {
            Issue.record("checked")
            return
        }
        #expect(refused.rejection.reason == .missingAttribute)
        #expect(refused.eventID?.rawValue == "e2")
        let good = Array(#"{"id":"e3","type":"chat.message","user":"u","attrs":{"c":"c7"}}"#.utf8)
        let operation = try intake.map(good).get()
        #expect(operation.path == path("root.chat.c7"))
        #expect(operation.operation == .increment(by: 1))
        #expect(try intake.check(good).get().id.rawValue == "e3")
    }

    @Test("a decoder rejection keeps its reason and message, and the id it could read")
    func decoderRejection() {
        let text = #"{"id":"e4","op":"toggle","user":"u","path":"root.a"}"#
        guard case .failure(let refused) = EventIntake(rules: Self.rules).map(Array(text.utf8)) else {
            Issue.record("mapped")
            return
        }
        #expect(refused.rejection == rejection(text))
        #expect(refused.eventID?.rawValue == "e4")
        let large = Array(#"{"id":"big","pad":""#.utf8) + [UInt8](repeating: 0x78, count: EventDecoder.maximumRecordSize)
        guard case .failure(let tooLarge) = EventIntake(rules: nil).check(large + Array(#""}"#.utf8)) else {
            Issue.record("checked")
            return
        }
        #expect(tooLarge.rejection.reason == .tooLarge)
        #expect(tooLarge.eventID == nil)
    }
}
