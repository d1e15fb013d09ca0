import BadgeCore
import BadgeStore
import Foundation
import LibPQ
import Testing
import TestSupport

/// The change feed's records as `BadgeStore.pendingFeedRecords` writes them from the change log
/// (`deploy/schema/change.schema.json`), checked against the log's own rows.
@Suite("Change-feed records from the change log")
struct FeedRecordTests {
    @Test("a record carries the version, every changed node with its display text and icon, and the root totals; escaped user ids stay JSON")
    func recordsFollowTheLog() async throws {
        let fixture = try await StoreFixture.make()
        try await tearingDown({ await fixture.tearDown() }) {
            let odd = user(#"we"ird\one"#)
            let c1 = try BadgePath(validating: "root.chat.c1"), c2 = try BadgePath(validating: "root.chat.c2")
            let promo = try BadgePath(validating: "root.promo")
            try await fixture.ingest([
                BadgeMutation(user: odd, path: c1, operation: .set(count: 7, icon: try BadgeIcon(validating: "new"))),
                BadgeMutation(user: odd, path: c2, operation: .increment(by: 3)),
                BadgeMutation(user: odd, path: promo, operation: .set(count: 2, icon: nil)),
            ])
            try await fixture.drainDirtyUsers()
            try await fixture.ingest([BadgeMutation(user: odd, path: promo, operation: .clear(force: true))])
            try await fixture.drainDirtyUsers()

            let records = try await fixture.pool.withConnection { try BadgeStore.pendingFeedRecords(limit: 100, countCap: 5, on: $0).records }
            try #require(records.count == 2)
            #expect(records.map(\.kind) == [.user, .user] && records.allSatisfy { $0.key == odd.rawValue })
            #expect(records[0].number < records[1].number)
            let first = try Self.object(records[0].payload), second = try Self.object(records[1].payload)

            #expect(first["type"] as? String == "user" && first["user"] as? String == odd.rawValue)
            #expect(Self.integer(first["own_version"]) == 1 && Self.integer(second["own_version"]) == 2)
            #expect(Self.integer(first["broadcast_version"]) == 0)
            #expect(Self.integer(first["version"]) == 1 && Self.integer(first["previous_version"]) == 0)
            #expect(Self.integer(second["version"]) == 2 && Self.integer(second["previous_version"]) == 1)
            #expect((first["dismissed"] as? [Any])?.isEmpty == true && (first["seen"] as? [Any])?.isEmpty == true)
            let at = try #require(first["at"] as? String)
            #expect((try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(at)) != nil, "\(at)")

            // The first version: every node, in path order, with texts capped at 5.
            let nodes = try #require(first["changed"] as? [[String: Any]])
            #expect(nodes.map { $0["path"] as? String ?? "" } == ["root", "root.chat", "root.chat.c1", "root.chat.c2", "root.promo"])
            let c1Node = nodes[2]
            #expect(c1Node["shown"] as? Bool == true && Self.integer(c1Node["count"]) == 7)
            #expect(c1Node["text"] as? String == "5+" && c1Node["icon"] as? String == "new")
            #expect(nodes[3]["text"] as? String == "3" && nodes[3]["icon"] is NSNull)
            #expect(nodes[0]["text"] as? String == "5+" && Self.integer(nodes[0]["count"]) == 12)
            // The second: the cleared node no longer shows; the root lost its 2.
            let removed = try #require((second["changed"] as? [[String: Any]])?.first { $0["path"] as? String == "root.promo" })
            #expect(removed["shown"] as? Bool == false && Self.integer(removed["count"]) == 0 && removed["text"] is NSNull)
            #expect(Self.integer((second["root"] as? [String: Any])?["count"]) == 10)

            // Every node and root total as the log holds them (read here by SQL, independently).
            let logged = try await fixture.pool.withConnection { connection in
                try connection.query(
                    PGStatement(
                        "test.logged_nodes",
                        """
                        SELECT c.version, n->>0, coalesce((n->2->>'count')::bigint, 0), coalesce((n->2->>'unseen')::bigint, 0),
                               n->2 <> 'null'::jsonb, c.root_count, c.root_unseen
                        FROM badge_change c, jsonb_array_elements(c.nodes) AS n WHERE c.user_id = $1
                        """, prepared: false), [odd.rawValue]
                ).rows.map {
                    (
                        version: try $0.decode(0, as: Int64.self), path: try $0.decode(1, as: String.self), count: try $0.decode(2, as: Int64.self),
                        unseen: try $0.decode(3, as: Int64.self), shown: try $0.decode(4, as: Bool.self),
                        root: (try $0.decode(5, as: Int64.self), try $0.decode(6, as: Int64.self))
                    )
                }
            }
            #expect(logged.count == nodes.count + (second["changed"] as? [Any] ?? []).count)
            for row in logged {
                let record = row.version == 1 ? first : second
                let node = (record["changed"] as? [[String: Any]])?.first { $0["path"] as? String == row.path }
                #expect(Self.integer(node?["count"]) == row.count && Self.integer(node?["unseen"]) == row.unseen, "\(row)")
                #expect(node?["shown"] as? Bool == row.shown, "\(row)")
                let root = record["root"] as? [String: Any]
                #expect(Self.integer(root?["count"]) == row.root.0 && Self.integer(root?["unseen"]) == row.root.1)
            }
        }
    }

    @Test("a version that mutes or snoozes carries the muted nodes and the root without them; the others carry no mutes")
    func recordsCarryMutes() async throws {
        let fixture = try await StoreFixture.make()
        try await tearingDown({ await fixture.tearDown() }) {
            let id = user("feed-muter")
            let chat = try BadgePath(validating: "root.chat"), promo = try BadgePath(validating: "root.promo")
            let until = Date(timeIntervalSince1970: 4_102_444_800)  // 2100-01-01T00:00:00Z
            try await fixture.ingest([
                BadgeMutation(user: id, path: try BadgePath(validating: "root.chat.c1"), operation: .increment(by: 4)),
                BadgeMutation(user: id, path: promo, operation: .set(count: 1, icon: nil)),
            ])
            try await fixture.drainDirtyUsers()
            try await fixture.ingest([BadgeMutation(user: id, path: chat, operation: .mute(until: nil))])
            try await fixture.drainDirtyUsers()
            try await fixture.ingest([BadgeMutation(user: id, path: promo, operation: .mute(until: until))])
            try await fixture.drainDirtyUsers()
            try await fixture.ingest([
                BadgeMutation(user: id, path: chat, operation: .unmute), BadgeMutation(user: id, path: promo, operation: .unmute),
            ])
            try await fixture.drainDirtyUsers()

            let records = try await fixture.pool.withConnection { try BadgeStore.pendingFeedRecords(limit: 100, countCap: 99, on: $0).records }
            let objects = try records.map { try Self.object($0.payload) }
            try #require(objects.count == 4)
            #expect(objects[0]["mutes"] == nil, "a version that changed no mute carries none")
            let muted = try #require(objects[1]["mutes"] as? [[String: Any]])
            #expect(muted.count == 1 && muted[0]["path"] as? String == "root.chat" && muted[0]["until"] is NSNull)
            #expect(Self.integer((objects[1]["root"] as? [String: Any])?["count"]) == 1, "the muted chat's 4 leave the root")
            let snoozed = try #require(objects[2]["mutes"] as? [[String: Any]])
            #expect(snoozed.map { $0["path"] as? String ?? "" } == ["root.chat", "root.promo"])
            #expect(snoozed[1]["until"] as? String == "2100-01-01T00:00:00Z")
            #expect(Self.integer((objects[2]["root"] as? [String: Any])?["count"]) == 0)
            #expect((objects[3]["mutes"] as? [Any])?.isEmpty == true, "unmuted: an empty list")
            #expect(Self.integer((objects[3]["root"] as? [String: Any])?["count"]) == 5)
        }
    }

    static func object(_ payload: [UInt8]?) throws -> [String: Any] {
        let payload = try #require(payload, "a tombstone where a record was expected")
        return try #require(
            try JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any], "\(String(decoding: payload, as: UTF8.self))")
    }

    static func integer(_ value: Any?) -> Int64? {
        switch value {
        case let value as Int: return Int64(value)
        case let value as Int64: return value
        case let value as NSNumber: return value.int64Value
        default: return nil
        }
    }
}
