import BadgeCore
import TestSupport
import Testing

/// The change log's node list as the change feed reads it (`OwnLayerChange.Node.decodeLog`).
@Suite("Reading the change log's nodes")
struct ChangeLogNodesTests {
    /// A record as PostgreSQL prints the log's jsonb: keys sorted its way, spaces after `:` and `,`.
    static let logged = """
        [["root", {"icon": null, "count": 3, "unseen": 1}, {"icon": null, "count": 10, "unseen": 8}], \
        ["root.chat.c1", null, {"icon": "new", "count": 7, "unseen": 7}], \
        ["root.promo", {"icon": "hot_1", "count": 0, "unseen": 0}, null]]
        """

    @Test("each node comes back with its aggregate before and after, icons and absences included")
    func readsLoggedNodes() throws {
        let nodes = try OwnLayerChange.Node.decodeLog(Self.logged)
        #expect(
            nodes == [
                OwnLayerChange.Node(
                    path: try BadgePath(validating: "root"), before: BadgeAggregate(count: 3, unseen: 1),
                    after: BadgeAggregate(count: 10, unseen: 8)),
                OwnLayerChange.Node(
                    path: try BadgePath(validating: "root.chat.c1"), before: nil,
                    after: BadgeAggregate(count: 7, icon: try BadgeIcon(validating: "new"), unseen: 7)),
                OwnLayerChange.Node(
                    path: try BadgePath(validating: "root.promo"),
                    before: BadgeAggregate(count: 0, icon: try BadgeIcon(validating: "hot_1"), unseen: 0), after: nil),
            ])
        #expect(try OwnLayerChange.Node.decodeLog("[]").isEmpty)
        // PostgreSQL's form is read from its bytes, and gives the parser's nodes.
        #expect(OwnLayerChange.Node.scanLog(Self.logged) == nodes)
        #expect(try OwnLayerChange.Node.decodeParsedLog(Self.logged) == nodes)
        #expect(OwnLayerChange.Node.scanLog(" [ ] ") == [])
    }

    @Test(
        "other JSON spellings of the nodes go to the parser and read the same",
        arguments: [
            #"[["root", {"count": 1, "unseen": 0, "icon": "\u0061"}, null]]"#, #"[["root", {"count": 1.0, "unseen": 0}, null]]"#,
            #"[["root", {"count": 1, "unseen": 0, "extra": [true]}, null]]"#, #"[["r\u006fot", {"count": 1E0, "unseen": 0}, null]]"#,
        ])
    func readsOtherSpellings(_ text: String) throws {
        #expect(OwnLayerChange.Node.scanLog(text) == nil)
        let expected = [
            OwnLayerChange.Node(
                path: .root, before: BadgeAggregate(count: 1, icon: text.contains("u0061") ? try BadgeIcon(validating: "a") : nil, unseen: 0),
                after: nil)
        ]
        #expect(try OwnLayerChange.Node.decodeLog(text) == expected)
    }

    @Test(
        "anything but the log's shape is refused with a sentence",
        arguments: [
            "", "{", "null", #"{"root": 1}"#, #"[["root", null]]"#, #"[["root", null, null, null]]"#, #"[[1, null, null]]"#,
            #"[["Root..x", null, null]]"#, #"[["root", 5, null]]"#, #"[["root", {"count": -1, "unseen": 0}, null]]"#,
            #"[["root", {"count": 1}, null]]"#, #"[["root", {"count": 1.5, "unseen": 0}, null]]"#,
            #"[["root", null, {"count": 1, "unseen": 0, "icon": "NEW!"}]]"#, #"[["root", null, {"count": 1, "unseen": 0, "icon": 3}]]"#,
            #"[["root", null, {"count": 99999999999999999999, "unseen": 0}]]"#,
        ])
    func refusesOtherShapes(_ text: String) {
        #expect(throws: ChangeLogFormatError.self) { try OwnLayerChange.Node.decodeLog(text) }
    }

    @Test("no damage to a logged record traps, and both readers take it the same: every byte changed, cut or doubled")
    func damagedRecordsNeverTrap() {
        let bytes = Array(Self.logged.utf8)
        var random = SplitMix64(seed: 25)
        var refused = 0
        for _ in 0..<3_000 {
            let text = String(decoding: random.damaged(bytes), as: UTF8.self)
            let read = Result { () throws(ChangeLogFormatError) in try OwnLayerChange.Node.decodeLog(text) }
            let parsed = Result { () throws(ChangeLogFormatError) in try OwnLayerChange.Node.decodeParsedLog(text) }
            // The byte scanner never reads what the parser would not, nor reads it otherwise.
            #expect(read == parsed, "\(text)")
            if let scanned = OwnLayerChange.Node.scanLog(text) { #expect(read == .success(scanned), "\(text)") }
            if case .failure = read { refused += 1 }
        }
        #expect(refused > 1_000)
    }
}
