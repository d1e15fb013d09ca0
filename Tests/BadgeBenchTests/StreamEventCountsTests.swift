@testable import BadgeBench
import BadgeCore
import TestSupport
import Testing

/// The bench's stream client reads an event's leaf counts from its bytes when they are in the
/// server's plain form, and with `JSONDecoder` otherwise: the two readers must agree on every
/// event the first reads, and the first must read what the server writes.
@Suite("A stream event's counts, read from its bytes and by JSONDecoder")
struct StreamEventCountsTests {
    /// An event as the server writes it (sorted keys; a tree's children before its fields), with
    /// random nodes, some of the bench's leaves among them.
    private func event(_ random: inout SeededRandom, texts: [String]) -> String {
        func string(_ text: String) -> String { "\"" + text + "\"" }
        func fields(_ path: String) -> String {
            let icon = random.next() % 3 == 0 ? string("dot") : "null"
            let text = random.next() % 4 == 0 ? texts[Int(random.next() % UInt64(texts.count))] : "null"
            let shown = random.next() % 2 == 0 ? "true" : "false"
            return "\"count\":\(random.next() % 100_000),\"icon\":\(icon),\"path\":\(string(path)),\"shown\":\(shown),"
                + "\"text\":\(text),\"unseen\":\(random.next() % 50)}"
        }
        func path() -> String {
            switch random.next() % 4 {
            case 0: "root"
            case 1: "root.bench"
            case 2: "root.other.p\(random.next() % 5)"
            default: "root.bench.p\(random.next() % 12)"
            }
        }
        func tree(_ path: String, depth: Int) -> String {
            let children = depth < 3 ? (0..<Int(random.next() % 4)).map { index in tree("\(path).p\(index)", depth: depth + 1) } : []
            return "{\"children\":[" + children.joined(separator: ",") + "]," + fields(path)
        }
        let version = random.next() % 1_000_000
        let mutes = random.next() % 3 == 0 ? ",\"mutes\":[{\"path\":\"root.bench\",\"until\":null}]" : ""
        if random.next() % 3 == 0 {
            let root = random.next() % 5 == 0 ? "null" : tree(random.next() % 2 == 0 ? "root" : "root.bench", depth: 0)
            return "{\"mutes\":[],\"tree\":\(root),\"user\":\"u\(random.next() % 100)\",\"version\":\(version)}\n"
        }
        let changed = (0..<Int(random.next() % 6)).map { _ in "{" + fields(path()) }
        return "{\"changed\":[" + changed.joined(separator: ",") + "]\(mutes),\"user\":\"u7\",\"version\":\(version)}\n"
    }

    private func same(_ left: [(path: Int, count: Int64)]?, _ right: [(path: Int, count: Int64)]?) -> Bool {
        switch (left, right) {
        case (nil, nil): true
        case (let left?, let right?): left.map(\.path) == right.map(\.path) && left.map(\.count) == right.map(\.count)
        default: false
        }
    }

    @Test("the server's form is read from its bytes, as JSONDecoder reads it")
    func serverForm() throws {
        var random = SeededRandom(seed: 7)
        var leaves = 0
        for _ in 0..<2_000 {
            let bytes = Array(event(&random, texts: ["\"new\"", "\"two words\""]).utf8)
            let scanned = try #require(StreamEventCounts.scanned(bytes), "\(String(decoding: bytes, as: UTF8.self))")
            #expect(same(scanned, StreamEventCounts.decoded(bytes)), "\(String(decoding: bytes, as: UTF8.self))")
            leaves += scanned.count
        }
        #expect(leaves > 1_000)
    }

    @Test("other text goes to JSONDecoder: escapes, text beyond ASCII, other numbers")
    func otherText() {
        let events = [
            #"{"changed":[{"count":3,"path":"root.bench.p1","text":"say \"hi\""}],"version":4}"#,
            #"{"changed":[{"count":3,"path":"root.bench.p1","text":"日本"}],"version":4}"#,
            #"{"changed":[{"count":3.0,"path":"root.bench.p1"}],"version":4}"#,
            #"{"changed":[{"count":3,"path":"root.bench.p1","unseen":-1}],"version":4}"#,
            #"{"changed":[{"count":3,"path":"root.bench.p1","count":4}],"version":4}"#,
        ]
        for text in events {
            let bytes = Array(text.utf8)
            #expect(StreamEventCounts.scanned(bytes) == nil, "\(text)")
            #expect(same(StreamEventCounts.read(bytes), StreamEventCounts.decoded(bytes)), "\(text)")
        }
        let escaped = Array(events[0].utf8)
        #expect(StreamEventCounts.read(escaped)?.map(\.count) == [3])
        // Both refuse an event without a version, or a node without a count.
        for text in [#"{"changed":[]}"#, #"{"changed":[{"path":"root.bench.p1"}],"version":1}"#, "", "[]"] {
            #expect(StreamEventCounts.read(Array(text.utf8)) == nil, "\(text)")
        }
    }

    @Test("damaged events: whatever the bytes reader reads, JSONDecoder reads the same")
    func damaged() {
        var random = SeededRandom(seed: 11)
        var scannedCount = 0
        for _ in 0..<20_000 {
            var bytes = Array(event(&random, texts: ["\"a\\\"b\"", "\"x\""]).utf8)
            for _ in 0..<Int(1 + random.next() % 3) { bytes = random.damaged(bytes) }
            guard let scanned = StreamEventCounts.scanned(bytes) else { continue }
            scannedCount += 1
            #expect(same(scanned, StreamEventCounts.decoded(bytes)), "\(String(decoding: bytes, as: UTF8.self))")
        }
        #expect(scannedCount > 1_000)
    }
}
