import BadgeCore
import BadgeIngest
import BadgeStore
import Foundation
import LibPQ
import TestSupport

/// A migrated throwaway database with a pool and a store on it, for one test.
struct IngestFixture: PooledFixture, Sendable {
    let database: TestDatabase
    let pool: PGPool
    let store: BadgeStore

    /// Runs `body` on a fresh migrated database, dropped afterwards even when `body` throws.
    static func with<T>(_ body: (IngestFixture) async throws -> T) async throws -> T {
        try await MigratedDatabase.with(prefix: "ingest", connections: 2) { migrated in
            try await body(IngestFixture(database: migrated.database, pool: migrated.pool, store: BadgeStore(pool: migrated.pool)))
        }
    }

    /// Commits `batch` in its own transaction, as the ingest service does.
    func commit(
        _ batch: PreparedBatch, group: String = "g", expected: [TopicPartition: Int64], newRowsFirst: Bool = true, rollUp: Bool = false
    ) async throws -> BatchOutcome {
        try await pool.withTransaction { connection in
            try IngestStore.commit(batch, group: group, expectedOffsets: expected, newRowsFirst: newRowsFirst, rollUp: rollUp, on: connection)
        }
    }

    /// Commits `batch` with the offsets stored now as the expected ones, like a consumer that
    /// owns its partitions.
    func commitOwned(_ batch: PreparedBatch, group: String = "g") async throws -> BatchOutcome {
        let partitions = Array(batch.nextOffsets.keys)
        return try await pool.withTransaction { connection in
            let expected = try IngestStore.storedOffsets(group: group, partitions: partitions, on: connection)
            return try IngestStore.commit(batch, group: group, expectedOffsets: expected, on: connection)
        }
    }

    func storedOffsets(group: String = "g", _ partitions: [TopicPartition]) async throws -> [TopicPartition: Int64] {
        try await pool.withConnection { connection in
            try IngestStore.storedOffsets(group: group, partitions: partitions, on: connection)
        }
    }

    /// Recomputes every dirty user, as rollup workers do, until none is left.
    func drainDirtyUsers() async throws {
        while try await store.recomputeDirtyUsers(limit: 500) > 0 {}
    }
}

// MARK: - records and events

let topic = "reddot.events"

func eventID(_ text: String) -> EventID {
    do { return try EventID(validating: text) } catch { preconditionFailure("bad test event id \(text)") }
}

func record(_ json: String, offset: Int64, partition: Int32 = 0, key: String? = nil, topic name: String = topic) -> IngestRecord {
    IngestRecord(topic: name, partition: partition, offset: offset, key: key.map { Array($0.utf8) }, payload: Array(json.utf8))
}

func record(bytes: [UInt8]?, offset: Int64, partition: Int32 = 0, key: [UInt8]? = nil) -> IngestRecord {
    IngestRecord(topic: topic, partition: partition, offset: offset, key: key, payload: bytes)
}

/// The direct-operation record of `mutation` with event id `id`.
func encoded(_ mutation: BadgeMutation, id: String) -> [UInt8] {
    EventEncoder().encode(
        BadgeEvent(
            id: eventID(id), audience: .users([mutation.user]), occurredAt: mutation.occurredAt, expiresAt: mutation.expiresAt,
            body: .operation(path: mutation.path, operation: mutation.operation)))
}

func mutationRecord(_ mutation: BadgeMutation, id: String, offset: Int64, partition: Int32 = 0) -> IngestRecord {
    IngestRecord(
        topic: topic, partition: partition, offset: offset, key: Array(mutation.user.rawValue.utf8),
        payload: encoded(mutation, id: id))
}

let testRules: RuleSet = {
    let yaml = """
        rules:
          - type: chat.message
            op: incr
            path: root.chat.{conversation}
          - type: feature.launched
            op: set
            icon: new
            path: root.settings.{feature}
        """
    do { return try RuleSet(yaml: yaml) } catch { preconditionFailure("bad test rules: \(error)") }
}()

/// One record for each rejection reason, with the reason it must get.
func poisonRecords(offset: Int64 = 0) -> [(record: IngestRecord, reason: RejectionReason)] {
    let manyUsers = (0...EventDecoder.maximumUsers).map { "\"u\($0)\"" }.joined(separator: ",")
    var large = Array(#"{"id":"big","op":"set","user":"u1","path":"root.a","pad":""#.utf8)
    large += [UInt8](repeating: UInt8(ascii: "x"), count: EventDecoder.maximumRecordSize)
    large += Array(#""}"#.utf8)
    let cases: [([UInt8]?, RejectionReason)] = [
        (large, .tooLarge),
        ([0x7B, 0xFF, 0xFE, 0x00, 0x7D], .invalidEncoding),
        (Array("{not json".utf8), .malformedJSON),
        (nil, .malformedJSON),
        (Array(#"{"op":"set","user":"u1","path":"root.a"}"#.utf8), .missingField),
        (Array(#"{"id":"p-field","op":"set","user":"u1","path":"root.a","count":-1}"#.utf8), .invalidField),
        (Array(#"{"id":"p-op","op":"toggle","user":"u1","path":"root.a"}"#.utf8), .unknownOp),
        (Array(#"{"id":"p-type","type":"nope","user":"u1"}"#.utf8), .unknownType),
        (Array(#"{"id":"p-path","op":"set","user":"u1","path":"root..a"}"#.utf8), .invalidPath),
        (Array(#"{"id":"p-user","op":"set","user":"","path":"root.a"}"#.utf8), .invalidUser),
        (Array(#"{"id":"p-many","op":"set","users":[\#(manyUsers)],"path":"root.a"}"#.utf8), .tooManyUsers),
        (Array(#"{"id":"p-attr","type":"chat.message","user":"u1","attrs":{}}"#.utf8), .missingAttribute),
    ]
    return cases.enumerated().map { index, entry in
        (record(bytes: entry.0, offset: offset + Int64(index), key: Array("u1".utf8)), entry.1)
    }
}

/// Commits batches one after another on partition 0 of the test topic, each record at the next
/// offset, as the consumer that owns the partition does; with `drain`, every dirty user is
/// recomputed after each batch.
final class SequentialBatches: @unchecked Sendable {
    let fixture: IngestFixture
    let newRowsFirst: Bool
    let drain: Bool
    private var offset: Int64 = 0

    init(_ fixture: IngestFixture, newRowsFirst: Bool = true, drain: Bool = false) {
        (self.fixture, self.newRowsFirst, self.drain) = (fixture, newRowsFirst, drain)
    }

    /// Events without a key.
    @discardableResult
    func commit(_ jsons: [String]) async throws -> BatchOutcome {
        try await commit(jsons.map { (key: nil, json: $0) })
    }

    /// Events with their record keys.
    @discardableResult
    func commit(_ keyed: [(key: String?, json: String)]) async throws -> BatchOutcome {
        try await commit(records: keyed.map { record($0.json, offset: next(), key: $0.key) })
    }

    /// `mutations` as events with ids `r<firstID>`, `r<firstID + 1>`, ….
    @discardableResult
    func commit(_ mutations: [BadgeMutation], firstID: Int) async throws -> BatchOutcome {
        try await commit(records: mutations.enumerated().map { mutationRecord($1, id: "r\(firstID + $0)", offset: next()) })
    }

    private func next() -> Int64 {
        defer { offset += 1 }
        return offset
    }

    private func commit(records: [IngestRecord]) async throws -> BatchOutcome {
        let first = records.first?.offset ?? offset
        let expected: [TopicPartition: Int64] = first == 0 ? [:] : [TopicPartition(topic: topic, partition: 0): first]
        let outcome = try await fixture.commit(PreparedBatch(records: records, rules: testRules), expected: expected, newRowsFirst: newRowsFirst)
        if drain { try await fixture.drainDirtyUsers() }
        return outcome
    }
}
