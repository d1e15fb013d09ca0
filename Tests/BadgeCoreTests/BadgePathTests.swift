@testable import BadgeCore
import Foundation
import TestSupport
import Testing

@Suite("Badge paths")
struct BadgePathTests {
    @Test("valid paths keep their labels and depth")
    func validPaths() throws {
        let chat = path("root.chat.c7")
        #expect(chat.rawValue == "root.chat.c7")
        #expect(chat.labels == ["root", "chat", "c7"])
        #expect(chat.depth == 2)
        #expect(chat.description == "root.chat.c7")
        #expect(BadgePath.root.depth == 0)
        #expect(BadgePath.root.rawValue == "root")
        #expect(path("root") == .root)
        #expect(path("root.A_z_09").labels.last == "A_z_09")
    }

    @Test("parent and ancestors")
    func parentsAndAncestors() throws {
        let deep = path("root.a.b.c")
        #expect(deep.parent == path("root.a.b"))
        #expect(deep.ancestors == [.root, path("root.a"), path("root.a.b")])
        #expect(BadgePath.root.parent == nil)
        #expect(BadgePath.root.ancestors.isEmpty)
    }

    @Test("isWithin is self or descendant, label-wise")
    func within() throws {
        let chat = path("root.chat")
        #expect(path("root.chat.c7").isWithin(chat))
        #expect(chat.isWithin(chat))
        #expect(chat.isWithin(.root))
        #expect(!(path("root.chatter").isWithin(chat)))
        #expect(!chat.isWithin(path("root.chat.c7")))
        #expect(!(path("root.other").isWithin(chat)))
    }

    @Test("appending validates the label and the depth")
    func appending() throws {
        let chat = try BadgePath.root.appending(label: "chat")
        #expect(chat == path("root.chat"))
        #expect(throws: BadgePathError.self) { try chat.appending(label: "a.b") }
        #expect(throws: BadgePathError.self) { try chat.appending(label: "") }
        var deep = BadgePath.root
        for _ in 0..<BadgePath.maximumDepth { deep = try deep.appending(label: "x") }
        #expect(throws: BadgePathError.tooDeep(path: deep.rawValue + ".x", depth: 17)) {
            try deep.appending(label: "x")
        }
    }

    @Test("an empty path is rejected")
    func empty() {
        #expect(throws: BadgePathError.empty) { try BadgePath(validating: "") }
        #expect(BadgePathError.empty.description.contains("empty"))
    }

    @Test("a path must start with root")
    func mustStartWithRoot() {
        #expect(throws: BadgePathError.mustStartWithRoot(path: "chat.c7")) { try BadgePath(validating: "chat.c7") }
        #expect(throws: BadgePathError.mustStartWithRoot(path: "Root.a")) { try BadgePath(validating: "Root.a") }
        #expect(throws: BadgePathError.mustStartWithRoot(path: "rootx")) { try BadgePath(validating: "rootx") }
        #expect(throws: BadgePathError.mustStartWithRoot(path: ".root")) { try BadgePath(validating: ".root") }
        #expect(
            BadgePathError.mustStartWithRoot(path: "chat.c7").description == "path 'chat.c7' must start with 'root'")
    }

    @Test("empty labels are rejected with their position")
    func emptyLabels() {
        #expect(throws: BadgePathError.emptyLabel(path: "root..a", position: 2)) { try BadgePath(validating: "root..a") }
        #expect(throws: BadgePathError.emptyLabel(path: "root.", position: 2)) { try BadgePath(validating: "root.") }
        #expect(throws: BadgePathError.emptyLabel(path: "root.a.", position: 3)) { try BadgePath(validating: "root.a.") }
        #expect(
            BadgePathError.emptyLabel(path: "root..a", position: 2).description
                == "path 'root..a' has an empty label at position 2")
    }

    @Test(
        "ltree query characters, spaces and other characters are rejected",
        arguments: ["*", "|", "!", "@", "%", "{", "}", "~", "?", "&", "-", " ", "'", "\"", "/", "\\", "(", "$", ":"])
    func queryCharacters(character: String) throws {
        let text = "root.a\(character)b"
        let error = try #require(throws: BadgePathError.self) { try BadgePath(validating: text) }
        guard case .invalidCharacter(let errorPath, let position, let label, let scalar) = error else {
            Issue.record("expected invalidCharacter, got \(error)")
            return
        }
        #expect(errorPath == text)
        #expect(position == 2)
        #expect(label == "a\(character)b")
        #expect(String(scalar) == character)
        #expect(error.description.contains("labels may contain only A-Z, a-z, 0-9 and _"))
    }

    @Test("the invalid character message names path, character, position and label")
    func invalidCharacterMessage() {
        let error = #expect(throws: BadgePathError.self) { try BadgePath(validating: "root.a*b") }
        #expect(
            error?.description
                == "path 'root.a*b' has the character '*' at position 2 (label 'a*b'); "
                + "labels may contain only A-Z, a-z, 0-9 and _")
    }

    @Test("unicode is rejected, including look-alikes and combining marks", arguments: ["café", "ａ", "a\u{301}", "😀", "é"])
    func unicode(label: String) {
        #expect(throws: BadgePathError.self) { try BadgePath(validating: "root.\(label)") }
    }

    @Test("labels are at most 64 characters")
    func labelLength() throws {
        let longest = String(repeating: "x", count: 64)
        #expect(path("root.\(longest)").labels.last == longest)
        let tooLong = "root.a." + String(repeating: "x", count: 65)
        #expect(throws: BadgePathError.labelTooLong(path: tooLong, position: 3, length: 65)) {
            try BadgePath(validating: tooLong)
        }
        let error = BadgePathError.labelTooLong(path: tooLong, position: 3, length: 65)
        #expect(error.description.contains("65 characters at position 3"))
        #expect(error.description.contains("the most is 64"))
    }

    @Test("at most 16 labels after root")
    func depthLimit() throws {
        let sixteen = "root" + String(repeating: ".a", count: 16)
        #expect(path(sixteen).depth == 16)
        let seventeen = sixteen + ".a"
        #expect(throws: BadgePathError.tooDeep(path: seventeen, depth: 17)) { try BadgePath(validating: seventeen) }
        #expect(
            BadgePathError.tooDeep(path: seventeen, depth: 17).description
                == "path '\(seventeen)' has 17 labels after root; the most is 16")
    }

    @Test("messages quote hostile input safely: control characters escaped, long input cut")
    func safeQuoting() {
        let hostile = "root.a\nb"
        let error = #expect(throws: BadgePathError.self) { try BadgePath(validating: hostile) }
        let message = error?.description ?? ""
        #expect(!message.contains("\n"))
        #expect(message.contains("a\\nb"))
        let bidi = "root.a\u{202E}b"
        let bidiMessage = (#expect(throws: BadgePathError.self) { try BadgePath(validating: bidi) })?.description ?? ""
        #expect(!bidiMessage.unicodeScalars.contains("\u{202E}"))
        #expect(bidiMessage.contains("\\u{202E}"))
        let huge = "root." + String(repeating: "x", count: 10_000) + "*"
        let hugeMessage = (#expect(throws: BadgePathError.self) { try BadgePath(validating: huge) })?.description ?? ""
        #expect(hugeMessage.count < 400)
        #expect(hugeMessage.contains("…"))
    }

    @Test("order is label by label in byte order, a prefix first (ltree order)")
    func order() throws {
        let texts = ["root.b", "root.a.b", "root", "root.a", "root.a0", "root.B", "root.a_", "root.aa", "root.a.a"]
        let sorted = texts.map(path).sorted().map(\.rawValue)
        #expect(sorted == ["root", "root.B", "root.a", "root.a.a", "root.a.b", "root.a0", "root.a_", "root.aa", "root.b"])
    }

    @Test("Codable as a single validated string")
    func codable() throws {
        let encoded = try JSONEncoder().encode([path("root.chat")])
        #expect(String(decoding: encoded, as: UTF8.self) == #"["root.chat"]"#)
        #expect(try JSONDecoder().decode([BadgePath].self, from: encoded) == [path("root.chat")])
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode([BadgePath].self, from: Data(#"["root.*"]"#.utf8))
        }
    }
}

@Suite("BadgePath's one-pass check")
struct BadgePathFastCheckTests {
    @Test("accepts exactly what the rule-by-rule check accepts, with the same labels; orders and nests paths by their bytes")
    func agreesWithTheRules() {
        let alphabet: [String] = ["root", "root", ".", ".", "a", "Z", "9", "_", "chat", "x", "-", " ", "é", "ｒ", "..", "\u{301}", "r", "oot"]
        var generator = SystemRandomNumberGenerator()
        var cases = ["", "root", "root.", ".root", "rootx", "root.a", "Root", "root..a", "root.a.", "rooot",
                     "root." + String(repeating: "a", count: 64), "root." + String(repeating: "a", count: 65),
                     (["root"] + Array(repeating: "a", count: 16)).joined(separator: "."),
                     (["root"] + Array(repeating: "a", count: 17)).joined(separator: ".")]
        for _ in 0..<20_000 {
            cases.append((0..<Int.random(in: 1...12, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! }.joined())
        }
        var previous = BadgePath.root
        for text in cases {
            if let path = try? BadgePath(validating: text) {
                // Path order is the byte order of the texts (PostgreSQL's ltree order).
                #expect((previous < path) == previous.rawValue.utf8.lexicographicallyPrecedes(path.rawValue.utf8))
                #expect(path.isWithin(previous) == (path == previous || path.rawValue.utf8.starts(with: (previous.rawValue + ".").utf8)))
                previous = path
            }
            let fast = BadgePath.labelCountOfValidPath(text)
            let rules = try? BadgePath.checkedLabels(text)
            #expect(fast == rules?.count, "\(text.debugDescription)")
            if let path = try? BadgePath(validating: text) {
                #expect(path.rawValue == text)
                #expect(path.labels == rules)
                #expect(path.depth == (rules?.count ?? 0) - 1)
                #expect(path.parent == rules.flatMap { $0.count > 1 ? BadgePath(trustedLabels: Array($0.dropLast())) : nil })
                #expect(path.ancestors.map(\.rawValue) == (1..<(rules?.count ?? 1)).map { rules![..<$0].joined(separator: ".") })
            }
        }
    }
}
