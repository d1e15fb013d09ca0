import BadgeCore
import BadgeIngest
import LibPQ
import Testing
import TestSupport

/// Records that repeat a key, each with the key the dead letter's message must name, and one
/// malformed record without a repeat for contrast (it names the id read before the error).
private let duplicateRecords: [(json: String, key: String?, eventID: String?)] = [
    (#"{"id":"first","op":"incr","user":"alice","path":"root.a","id":"second"}"#, "id", nil),
    (#"{"id":"same","op":"incr","user":"alice","path":"root.a","id":"same"}"#, "id", nil),
    (#"{"id":"e1","\u0069d":"e2","op":"incr","user":"alice","path":"root.a"}"#, "id", nil),
    (#"{"id":"d1","op":"set","user":"alice","path":"root.a","count":1,"count":2}"#, "count", nil),
    (#"{"id":"d2","type":"chat.message","user":"alice","attrs":{"conversation":"c1","conversation":"c2"}}"#, "conversation", nil),
    (#"{"id":"m1","op":"incr","user":"alice","path":"root.a""#, nil, "m1"),
]

@Suite("Duplicate JSON keys through ingest: malformed_json, and the dead letter names the id the decoder saw")
struct DuplicateKeyTests {
    @Test("a prepared batch rejects every repeat as malformed_json with no event id")
    func prepared() {
        let records = duplicateRecords.enumerated().map { record($1.json, offset: Int64($0)) }
        let batch = PreparedBatch(records: records, rules: testRules)
        #expect(batch.accepted.isEmpty)
        #expect(batch.rejected.map(\.rejection.reason) == duplicateRecords.map { _ in .malformedJSON })
        #expect(batch.rejected.map(\.eventID) == duplicateRecords.map(\.eventID))
        for (rejected, expected) in zip(batch.rejected, duplicateRecords) {
            if let key = expected.key {
                #expect(rejected.rejection.message == "record repeats the key '\(key)' in one object; every key must be unique")
            }
        }
    }

    @Test("the ingest service writes them to the dead-letter table; the good record beside them applies")
    func throughIngest() async throws {
        let harness = try await IngestHarness(partitions: 1)
        try await tearingDown({ await harness.tearDown() }) {
            var published = duplicateRecords.map { (key: "alice", value: Array($0.json.utf8)) }
            published.append((key: "alice", value: Array(#"{"id":"good","op":"incr","user":"alice","path":"root.a"}"#.utf8)))
            let running = harness.start(group: "g-duplicates")
            let ends = try await harness.publish(published)
            #expect(try await harness.waitForOffsets(group: "g-duplicates", ends, seconds: 60))
            try await running.stop()

            let rows = try await harness.pool.withConnection { connection in
                try connection.query(
                    PGStatement(
                        "test.duplicates", "SELECT reason, event_id, message FROM rejected_record ORDER BY record_offset",
                        prepared: false)
                ).rows.map {
                    (try $0.decode(0, as: String.self), try $0.decode(1, as: String?.self), try $0.decode(2, as: String.self))
                }
            }
            #expect(rows.map(\.0) == duplicateRecords.map { _ in "malformed_json" })
            #expect(rows.map(\.1) == duplicateRecords.map(\.eventID))
            for (row, expected) in zip(rows, duplicateRecords) {
                if let key = expected.key { #expect(row.2.contains("'\(key)'")) }
            }
            #expect(try await harness.count("SELECT count(*)::int FROM \(AppliedKeys.table) WHERE event_id = 'good'") == 1)
            #expect(try await harness.count("SELECT count(*)::int FROM \(AppliedKeys.table)") == 1)
        }
    }
}
