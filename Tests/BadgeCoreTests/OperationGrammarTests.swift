@testable import BadgeCore
import Foundation
import TestSupport
import Testing

@Suite("One op grammar for events and rules")
struct OperationGrammarTests {
    /// The message the rules give for a rule of type `t` with `op` and the extra YAML `field: value`.
    func ruleMessage(op: String, field: String, value: String) -> String? {
        do {
            _ = try RuleSet(yaml: "rules:\n  - type: t\n    op: \(op)\n    path: root.a\n    \(field): \(value)\n")
            return nil
        } catch {
            return error.message
        }
    }

    /// The decoder's rejection of an event with `op` and the extra JSON member `field: value`.
    func eventRejection(op: String, field: String, value: String) -> EventRejection? {
        rejection(#"{"id":"e","op":"\#(op)","user":"u","path":"root.a","\#(field)":\#(value)}"#)
    }

    static let sampleValues = [
        "count": "3", "by": "2", "icon": #""new""#, "force": "true", "item": #""m1""#, "until": #""2026-12-01T08:00:00Z""#,
    ]

    /// The fields each op takes, as the event contract lists them (written out here, not read
    /// from the grammar, so that the test checks it).
    static let opFields: [String: Set<String>] = [
        "set": ["count", "icon"], "incr": ["by"], "decr": ["by"], "clear": ["force"], "add": ["item"], "remove": ["item"],
        "seen": [], "mute": ["until"], "unmute": [],
    ]

    @Test("every op refuses the fields of the other ops, in events and in rules alike")
    func foreignFields() {
        for op in OperationGrammar.Op.allCases {
            for field in OperationGrammar.fieldNames {
                let value = Self.sampleValues[field] ?? "1"
                let event = eventRejection(op: op.rawValue, field: field, value: value)
                let rule = ruleMessage(op: op.rawValue, field: field, value: value.replacingOccurrences(of: "\"", with: ""))
                #expect(op.takes(field) == Self.opFields[op.rawValue]?.contains(field), "\(op) \(field)")
                if Self.opFields[op.rawValue]?.contains(field) == true {
                    #expect(event == nil, "\(op) \(field)")
                    #expect(rule == nil, "\(op) \(field)")
                } else {
                    #expect(event?.message == "field '\(field)' does not apply to op '\(op.rawValue)'")
                    #expect(rule == "rule 1 (type 't'): '\(field)' does not apply to op '\(op.rawValue)'")
                }
            }
        }
    }

    @Test("the ranges of count and by are the same in events and rules")
    func ranges() {
        for (op, field, range) in [("set", "count", OperationGrammar.countRange), ("incr", "by", OperationGrammar.byRange)] {
            for number in [range.lowerBound - 1, range.upperBound + 1] {
                #expect(eventRejection(op: op, field: field, value: String(number))?.reason == .invalidField)
                #expect(ruleMessage(op: op, field: field, value: String(number))?.contains("it must be an integer from") == true)
            }
            for number in [range.lowerBound, range.upperBound] {
                #expect(eventRejection(op: op, field: field, value: String(number)) == nil)
                #expect(ruleMessage(op: op, field: field, value: String(number)) == nil)
            }
        }
    }

    @Test("the encoder writes each op under its grammar name")
    func encoderNames() throws {
        for operation in [
            BadgeOperation.set(count: 1, icon: nil), .increment(by: 2), .decrement(by: 3), .clear(force: true),
            .addItem(ItemID(rawValue: "m1")!), .removeItem(ItemID(rawValue: "m2")!),
        ] {
            let event = BadgeEvent(
                id: try EventID(validating: "e"), audience: .everyone, body: .operation(path: path("root.a"), operation: operation))
            let text = String(decoding: EventEncoder().encode(event), as: UTF8.self)
            #expect(text.contains(#""op":"\#(OperationGrammar.Op(operation).rawValue)""#))
        }
    }
}
