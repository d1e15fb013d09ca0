@testable import BadgeAPI
import BadgeCore
@testable import BadgeStore
import Foundation
import NIOCore
import TestSupport
import Testing

/// A node is written as JSON by three hand-written writers on hot paths: the tree answer
/// (`TreeJSON`), the stream's and `?paths=` flat nodes (`FlatNode`) and the change feed's records
/// (`FeedPayload`). Each node field, the display rule ("99+") among them, must read the same in
/// all three for the same aggregate.
@Suite("One node, one JSON: tree answers, flat nodes and the change feed agree")
struct NodeJSONTests {
    /// The node fields of a JSON object, children left out.
    private func fields(_ json: Any?) -> [String: String] {
        guard let object = json as? [String: Any] else { return [:] }
        var fields: [String: String] = [:]
        for (key, value) in object where key != "children" {
            fields[key] = value is NSNull ? "null" : "\(value)"
        }
        return fields
    }

    private func object(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(text)")
    }

    @Test("random counts, unseen and icons, shown and not, at two count caps")
    func sameFields() throws {
        var random = SeededRandom(seed: 7)
        // The root: the model answers it whether or not anything shows.
        let path = BadgePath.root
        for round in 0..<400 {
            let display = BadgeDisplay(countCap: round % 2 == 0 ? 99 : 9)
            let shown = random.next() % 5 != 0
            let count = Int64(random.next() % 300)
            let aggregate = shown
                ? BadgeAggregate(count: count, icon: random.next() % 3 == 0 ? try BadgeIcon(validating: "new") : nil, unseen: Int64(random.next() % 4))
                : nil

            let flat = try object(String(buffer: try BadgeAPI.encode(FlatNode(path: path, aggregate: aggregate, display: display))))
            let node = try #require(BadgeNode.build(aggregates: aggregate.map { [path: $0] } ?? [:], at: path, depth: 0, display: display))
            var buffer = ByteBuffer()
            TreeJSON.write(node, into: &buffer)
            let tree = try object(String(buffer: buffer))
            let feed = try object(
                String(decoding: FeedPayload.user(
                    user: "u", ownVersion: 2, broadcastVersion: 0, version: 2,
                    nodes: [OwnLayerChange.Node(path: path, before: nil, after: aggregate)], dismissedJSON: "[]", seenJSON: "[]",
                    root: BadgeAggregate(count: 0), atJSON: "\"2026-11-28T00:00:00Z\"", display: display), as: UTF8.self))
            let changed = try #require((feed["changed"] as? [Any])?.first)

            #expect(fields(flat) == fields(tree), "round \(round): flat \(flat), tree \(tree)")
            #expect(fields(changed) == fields(tree), "round \(round): feed \(changed), tree \(tree)")
            #expect(fields(tree)["text"] == (shown ? display.text(for: count) ?? "null" : "null"), "round \(round)")
        }
    }
}
