@testable import BadgeCore
import Foundation
import TestSupport
import Testing

/// The parser's value for `text`, or nil if it rejected it.
private func parsed(_ text: String) -> JSONValue? {
    try? JSONParser.parse(Array(text.utf8))
}

private func parsed(_ bytes: [UInt8]) -> JSONValue? {
    try? JSONParser.parse(bytes)
}

/// Foundation's value for `bytes`, or nil if it rejected them.
private func foundation(_ bytes: [UInt8]) -> JSONValue? {
    try? JSONDecoder().decode(JSONValue.self, from: Data(bytes))
}

private func nested(_ depth: Int) -> String {
    String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
}

@Suite("JSON parsing (RFC 8259)")
struct JSONParserTests {
    @Test("literals, white space and the top level")
    func literals() {
        #expect(parsed("true") == .bool(true))
        #expect(parsed(" \t\r\nfalse\n") == .bool(false))
        #expect(parsed("null") == .null)
        #expect(parsed(#""a""#) == .string("a"))
        #expect(parsed("\u{FEFF}{}") == .object([:]))
        for text in ["", "  ", "tru", "nul", "True", "{} x", "{}{}", "[1] 2", "\u{0C}1", "1\u{0B}", "\u{FEFF}",
            "\u{FEFF}\u{FEFF}{}", " \u{FEFF}{}", "'a'", "NaN", "Infinity", "-Infinity", "undefined"]
        {
            #expect(parsed(text) == nil, "\(text.debugDescription) must be rejected")
        }
    }

    @Test("strings: every escape, surrogate pairs, no lone surrogates or control characters")
    func strings() {
        #expect(parsed(#""\"\\\/\b\f\n\r\t""#) == .string("\"\\/\u{8}\u{C}\n\r\t"))
        #expect(parsed(#""\u0041\u00e9\u20AC""#) == .string("Aé€"))
        #expect(parsed(#""\uD83D\uDE00""#) == .string("😀"))
        #expect(parsed(#""\uDBFF\uDFFF""#) == .string("\u{10FFFF}"))
        #expect(parsed(#""\u0000""#) == .string("\u{0}"))
        #expect(parsed("\"caf\u{E9} \u{1F600}\u{7F}\"") == .string("café 😀\u{7F}"))
        for text in [#""\ud800""#, #""\udc00""#, #""\ud800x""#, #""\ud800\u0041""#, #""\udc00\ud800""#,
            #""\ud800\ud800\udc00""#, #""\u12""#, #""\u12G4""#, #""\U0041""#, #""\x""#, #""\'""#, "\"a\tb\"",
            "\"a\nb\"", "\"\u{1F}\"", #""abc"#, #""\"#, #"["a\"]"#]
        {
            #expect(parsed(text) == nil, "\(text) must be rejected")
        }
    }

    @Test("numbers: integers exact, whole numbers integers, the JSON grammar only")
    func numbers() {
        let accepted: [(String, JSONValue)] = [
            ("0", .integer(0)), ("-0", .integer(0)), ("-0.0", .integer(0)), ("5.0", .integer(5)),
            ("1e2", .integer(100)), ("1E+2", .integer(100)), ("0.5E+1", .integer(5)), ("1e-400", .integer(0)),
            ("1.5", .number(1.5)), ("1e-2", .number(0.01)), ("1e30", .number(1e30)), ("-12.50", .number(-12.5)),
            ("9223372036854775807", .integer(.max)), ("-9223372036854775808", .integer(.min)),
            ("9223372036854775808", .number(9_223_372_036_854_775_808)),
            ("-9223372036854775809", .number(-9_223_372_036_854_775_808)),
            ("9223372036854775807.0", .number(9_223_372_036_854_775_808)),
            ("9007199254740993.0", .integer(9_007_199_254_740_993)), ("-9223372036854775808.0", .number(-0x1p63)),
            ("100000000000000000000000", .number(1e23)), ("4.9e-324", .number(.leastNonzeroMagnitude)),
        ]
        for (text, value) in accepted {
            #expect(parsed(text) == value, "\(text)")
        }
        for text in ["01", "-01", "00", "+1", ".5", "5.", "1.e2", "-", "--1", "1e", "1e+", "0x10", "1e400", "-1e400",
            "1" + String(repeating: "0", count: 400), "1.5.2", "1e2e3", "- 1"]
        {
            #expect(parsed(text) == nil, "\(text) must be rejected")
        }
    }

    @Test("containers: no trailing or missing commas; duplicate keys are refused")
    func containers() {
        #expect(parsed(#" { "a" : [ 1 , 2 ] , "b" : { } } "#)
            == .object(["a": .array([.integer(1), .integer(2)]), "b": .object([:])]))
        #expect(parsed(#"{"a":1,"b":2,"a":3}"#) == nil)
        for text in ["[1,]", #"{"a":1,}"#, "[1 2]", "[,1]", "[1,,2]", "{,}", #"{"a" 1}"#, "{1:2}", #"{"a":}"#,
            #"{"a"}"#, "[", "]", "{", #"{"a":1"#, "[1}", #"{"a":1]"#]
        {
            #expect(parsed(text) == nil, "\(text) must be rejected")
        }
    }

    @Test("nesting up to 512 deep is accepted; deeper is rejected without a crash")
    func depth() {
        #expect(parsed(nested(512)) != nil)
        #expect(parsed(nested(513)) == nil)
        let objects = String(repeating: #"{"a":"#, count: 513) + "1" + String(repeating: "}", count: 513)
        #expect(parsed(objects) == nil)
        #expect(parsed(String(repeating: "[", count: 100_000)) == nil)
    }

    @Test("the decoder names a trailing comma and keeps its messages")
    func decoderMessages() {
        #expect(rejection(#"{"id":"e","op":"set",}"#)?.message == "record is not valid JSON (a trailing comma)")
        #expect(rejection(#"{"id":"e",,}"#)?.message == "record is not valid JSON (a trailing comma)")
        #expect(rejection(#"{"id":"e""#)?.message == "record is not valid JSON")
        #expect(rejection("[1]")?.message == "record is an array, not a JSON object")
    }

    @Test("agrees with Foundation on thousands of random and mutated documents")
    func differential() {
        var generator = SeededRandom(seed: 0x5EED_0001)
        var documents: [[UInt8]] = []
        let seeds = [
            #"{"id": "9f1c", "op": "incr", "user": "u42", "path": "root.chat.c7", "by": 1}"#,
            #"{"id":"e","op":"set","user":"u","path":"root.a","count":5.0,"icon":"new","occurred_at":null}"#,
            #"{"id": "a01", "type": "chat.message", "users": ["u42", "u43"], "attrs": {"n": 3, "ok": true}}"#,
            #"{"id":"x\u00e9\uD83D\uDE00","audience":"all","type":"t","attrs":{"a":"\n\"\\"},"by":-1.5e-3}"#,
            #"[1, -0, 0.5, 1E+2, 12345678901234567890, true, false, null, "s", {}, [], {"k": [{}]}]"#,
        ]
        for _ in 0..<1_500 {
            documents.append(Array(Self.randomDocument(depth: 0, using: &generator).utf8))
        }
        let bases = seeds.map { Array($0.utf8) } + documents.prefix(300)
        for _ in 0..<4_000 {
            let base = bases.randomElement(using: &generator) ?? []
            documents.append(Self.mutate(base, using: &generator))
        }
        var checked = 0
        var accepted = 0
        for bytes in documents {
            guard String(validating: bytes, as: UTF8.self) != nil else { continue }
            checked += 1
            let ours = parsed(bytes)
            let theirs = foundation(bytes)
            if let ours {
                accepted += 1
                #expect(theirs == ours, "\(String(decoding: bytes, as: UTF8.self).debugDescription)")
            } else if theirs != nil {
                // Foundation is laxer only about trailing commas, UTF-16/32 guessed from zero bytes and
                // duplicate keys (it keeps the first; the parser refuses them).
                let lax = EventDecoder.hasTrailingComma(String(decoding: bytes, as: UTF8.self).utf8)
                    || bytes.contains(0) || Self.hasDuplicateKey(bytes)
                #expect(lax, "Foundation accepts \(String(decoding: bytes, as: UTF8.self).debugDescription)")
            }
        }
        #expect(checked > 4_000)
        #expect(accepted > 1_500)
    }

    /// Whether an object in `bytes` (a text Foundation accepted) repeats a key, comparing keys as
    /// Swift strings (canonical equivalence).
    private static func hasDuplicateKey(_ bytes: [UInt8]) -> Bool {
        var frames: [Set<String>] = []
        var index = 0
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                frames.append([])
                index += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                _ = frames.popLast()
                index += 1
            case UInt8(ascii: "\""):
                let start = index
                index += 1
                while index < bytes.count, bytes[index] != UInt8(ascii: "\"") {
                    index += bytes[index] == UInt8(ascii: "\\") ? 2 : 1
                }
                index += 1
                var next = index
                while next < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[next]) { next += 1 }
                guard next < bytes.count, bytes[next] == UInt8(ascii: ":"), index <= bytes.count else { continue }
                guard case .string(let key)? = parsed(Array(bytes[start..<index])) else { return true }
                if frames.isEmpty { continue }
                if !frames[frames.count - 1].insert(key).inserted { return true }
            default:
                index += 1
            }
        }
        return false
    }

    private static let alphabet = Array(#"{}[]:,"\ /0123456789.eE+-ntfrulasbxuDdcC"#.utf8) + [0, 0x09, 0x0A, 0x1F, 0x7F]

    private static func mutate(_ base: [UInt8], using generator: inout SeededRandom) -> [UInt8] {
        var bytes = base
        for _ in 0..<Int.random(in: 1...3, using: &generator) {
            let position = bytes.isEmpty ? 0 : Int.random(in: 0..<bytes.count, using: &generator)
            let byte = alphabet.randomElement(using: &generator) ?? 0x20
            switch Int.random(in: 0..<4, using: &generator) {
            case 0 where !bytes.isEmpty:
                bytes[position] = byte
            case 1 where !bytes.isEmpty:
                bytes.remove(at: position)
            case 2:
                bytes.insert(byte, at: position)
            default:
                let end = min(bytes.count, position + Int.random(in: 1...8, using: &generator))
                bytes.insert(contentsOf: bytes[position..<end], at: position)
            }
        }
        return bytes
    }

    private static func space(using generator: inout SeededRandom) -> String {
        ["", "", "", " ", "\n", "\t ", "\r\n"].randomElement(using: &generator) ?? ""
    }

    private static let numbers = [
        "0", "-0", "7", "-42", "5.0", "1.5", "-0.25", "1e2", "1E-2", "2.5e+3", "1e30", "1e-400", "1e309",
        "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
        "-9223372036854775808.0", "9007199254740993", "9007199254740993.0", "0.1e1", "123456789012345678901234567890",
        "1.0000000000000001", "4.9e-324", "2.4e-324", "1.7976931348623157e308", "0.30000000000000004",
    ]

    private static let strings = [
        "", "a", "root.chat", "caf\u{E9}", "\u{1F600}", #"\n"#, #"\"q\""#, #"\\"#, #"\/"#, #"\u0041"#, #"\u00e9"#,
        #"\uD83D\uDE00"#, #"\ud800"#, #"\b\f\r\t"#, #"\u0000"#, "e\u{301}", #"\u00E9"#,
    ]

    private static func randomDocument(depth: Int, using generator: inout SeededRandom) -> String {
        let choice = depth > 4 ? Int.random(in: 0..<5, using: &generator) : Int.random(in: 0..<8, using: &generator)
        switch choice {
        case 0: return ["true", "false", "null"].randomElement(using: &generator) ?? "null"
        case 1, 2: return numbers.randomElement(using: &generator) ?? "0"
        case 3, 4: return "\"" + (strings.randomElement(using: &generator) ?? "") + "\""
        case 5:
            var items: [String] = []
            for _ in 0..<Int.random(in: 0...4, using: &generator) {
                items.append(space(using: &generator) + randomDocument(depth: depth + 1, using: &generator))
            }
            return "[" + items.joined(separator: ",") + space(using: &generator) + "]"
        default:
            var members: [String] = []
            for _ in 0..<Int.random(in: 0...4, using: &generator) {
                let key = "\"" + (strings.randomElement(using: &generator) ?? "") + "\""
                let value = randomDocument(depth: depth + 1, using: &generator)
                members.append(space(using: &generator) + key + space(using: &generator) + ":" + value)
            }
            return "{" + members.joined(separator: ",") + space(using: &generator) + "}"
        }
    }
}
