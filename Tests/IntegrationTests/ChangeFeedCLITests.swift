import BadgeCore
import Foundation
import LibPQ
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The change feed end to end: `reddot ingest` and `reddot rollup` as child processes, the
/// rollup killed with SIGKILL while changes flow, and the topic read back with kcat.
@Suite("The change feed on Kafka (reddot rollup, mock cluster, kcat)", .serialized)
struct ChangeFeedCLITests {
    /// One record of the feed, as kcat printed it.
    struct Record {
        var key: String
        var object: [String: Any]
        var text: String

        var type: String { object["type"] as? String ?? "" }
        func integer(_ name: String) -> Int64? { ChangeFeedCLITests.integer(object[name]) }
    }

    static let schemaFile = Repository.root.appendingPathComponent("deploy/schema/change.schema.json")

    /// A JSON number as JSONSerialization gives it (Int, Int64, Double or NSNumber by platform).
    static func integer(_ value: Any?) -> Int64? {
        switch value {
        case let value as Int: return Int64(value)
        case let value as Int64: return value
        case let value as Double: return Int64(exactly: value)
        case let value as NSNumber: return value.int64Value
        default: return nil
        }
    }

    static func randomEvents(count: Int, users: Int, seed: UInt64) -> [(key: String, payload: String)] {
        var random = SplitMix64(seed: seed)
        let paths = ["root.chat.c1", "root.chat.c2", "root.feed", "root.promo.p1"]
        var events: [(key: String, payload: String)] = []
        for index in 0..<count {
            let path = paths[Int(random.next() % UInt64(paths.count))]
            if random.next() % 40 == 0 {
                let body = random.next() % 3 == 0 ? #""op":"clear","force":true,"path":"root""# : #""op":"set","count":2,"path":"\#(path)""#
                events.append(("*", #"{"id":"e\#(index)","audience":"all",\#(body)}"#))
                continue
            }
            let user = "u\(random.next() % UInt64(users))"
            let body: String
            switch random.next() % 8 {
            case 0: body = #""op":"set","count":\#(random.next() % 5)"#
            case 1: body = #""op":"clear""#
            case 2: body = #""op":"seen""#
            case 3: body = #""op":"add","item":"i\#(random.next() % 3)""#
            case 4: body = #""op":"remove","item":"i\#(random.next() % 3)""#
            case 5: body = #""op":"clear","force":true"#
            default: body = #""op":"incr","by":1"#
            }
            events.append((user, #"{"id":"e\#(index)","user":"\#(user)","path":"\#(path)",\#(body)}"#))
        }
        return events
    }

    @Test("every version reaches the topic, in order per user, across SIGKILLs; the records replay to every user's tree")
    func feedSurvivesKills() async throws {
        let harness = try await PipelineHarness(partitions: 2)
        let changesTopic = "reddot.changes.t\(UInt32.random(in: 0...UInt32.max))"
        try harness.cluster.createTopic(changesTopic, partitions: 3)
        let rollupArguments = [
            "rollup", "--database-url", harness.database.url, "--changes-brokers", harness.cluster.bootstrapServers,
            "--changes-topic", changesTopic, "--log-level", "error",
        ]
        let ingest = try ReddotChild(harness.ingestArguments(group: "feed"), in: harness.folder, name: "ingest")
        var rollup = try ReddotChild(rollupArguments, in: harness.folder, name: "rollup-0")
        try await tearingDown({ await harness.tearDown() }) {

            let events = Self.randomEvents(count: 12_000, users: 40, seed: 7)
            // Ingest is consuming once the first event is applied.
            try await harness.publish([events[0]])
            #expect(try await harness.waitForCount("SELECT count(*) FROM \(AppliedKeys.table)", 1, seconds: 60) == 1)
            // Changes flow for three rounds; each ends with a SIGKILL of the rollup (the feed may
            // have sent records it never marked), and a new one starts at once. A round lasts longer
            // than the lease (15 s), so each new process takes over and publishes before the next kill.
            var next = 1
            for round in 1...3 {
                let roundEnd = ContinuousClock.now + .seconds(16)
                while ContinuousClock.now < roundEnd, next < events.count {
                    let slice = Array(events[next..<min(next + 50, events.count)])
                    next += slice.count
                    try await harness.publish(slice)
                    try await Task.sleep(for: .milliseconds(200))
                }
                kill(rollup.process.processIdentifier, SIGKILL)
                _ = await ChildProcess.exitStatus(of: rollup.process)
                rollup = try ReddotChild(rollupArguments, in: harness.folder, name: "rollup-\(round)")
            }
            try await harness.publish(Array(events[next...]))
            // Everything applied, rolled up and published (a killed holder's lease runs out after 15 s).
            let applied = try await harness.waitForCount("SELECT count(*) FROM \(AppliedKeys.table)", events.count, seconds: 90)
            #expect(applied == events.count)
            #expect(try await harness.waitForCount("SELECT count(DISTINCT user_id) FROM dirty_mark", 0, seconds: 60) == 0)
            // Every version is at or below the feed's cursor and committed in its snapshot.
            let unpublished = """
                SELECT (SELECT count(*) FROM badge_change c, change_feed_lease f
                        WHERE c.seq > f.published_seq OR NOT pg_visible_in_snapshot(c.xid, f.published_snapshot))
                     + (SELECT count(*) FROM broadcast_change WHERE published_at IS NULL)
                """
            #expect(try await harness.waitForCount(unpublished, 0, seconds: 60) == 0, "\(rollup.standardError)")
            _ = try await rollup.stop()
            _ = try await ingest.stop()

            // An independent consumer reads the topic.
            let (status, output) = try await ChildProcess.run(
                "/usr/bin/env", ["kcat", "-C", "-b", harness.cluster.bootstrapServers, "-t", changesTopic, "-o", "beginning", "-e", "-q", "-f", "%p\t%k\t%s\n"],
                in: harness.folder, mergingStandardError: false)
            #expect(status == 0, "\(output.prefix(500))")
            var byPartition: [String: [Record]] = [:]
            for line in output.split(separator: "\n") {
                let fields = line.split(separator: "\t", maxSplits: 2).map(String.init)
                guard fields.count == 3, let object = try JSONSerialization.jsonObject(with: Data(fields[2].utf8)) as? [String: Any] else {
                    Issue.record("not a feed record: \(line.prefix(200))")
                    continue
                }
                byPartition[fields[0], default: []].append(Record(key: fields[1], object: object, text: fields[2]))
            }
            let all = byPartition.values.flatMap { $0 }
            try await Self.check(all, partitions: byPartition, harness: harness)

            // Every record matches the published JSON Schema.
            let distinct = Array(Set(all.map(\.text)))
            let validation = try await PublishTests.run(
                PublishTests.environmentTool, ["python3", "-c", PublishTests.schemaScript, Self.schemaFile.path],
                input: Data(distinct.joined(separator: "\n").utf8))
            try #require(validation.exitCode == 0, "python3 with the jsonschema package is needed: \(validation)")
            let verdicts = validation.stdout.split(separator: "\n").map(String.init)
            #expect(verdicts.count == distinct.count)
            for (record, verdict) in zip(distinct, verdicts) where verdict != "valid" {
                Issue.record("\(verdict) for \(record.prefix(300))")
            }
        }
    }

    /// Every version once or more (the same record each time), in order per key, no gap; the
    /// records rebuild each user's aggregates and root totals.
    static func check(_ records: [Record], partitions: [String: [Record]], harness: PipelineHarness) async throws {
        // Broadcast versions: 1…N, each record the same every time it appears.
        var broadcastRecords: [Int64: Record] = [:]
        for record in records where record.type == "broadcasts" {
            #expect(record.key == "*")
            let version = try #require(record.integer("version"))
            if let earlier = broadcastRecords[version] { #expect(earlier.text == record.text) }
            broadcastRecords[version] = record
        }
        let broadcastVersion = Int64(try await harness.count("SELECT version FROM broadcast_version"))
        #expect(broadcastRecords.keys.sorted() == Array(stride(from: Int64(1), through: broadcastVersion, by: 1)))
        // The broadcasts active at each broadcast version, replayed from the records alone.
        var active: [Int64: [Int64: Int64]] = [0: [:]]
        for version in stride(from: Int64(1), through: broadcastVersion, by: 1) {
            var set = active[version - 1] ?? [:]
            let object = broadcastRecords[version]?.object ?? [:]
            for added in object["added"] as? [[String: Any]] ?? [] {
                set[Self.integer(added["id"]) ?? -1] = Self.integer(added["count"]) ?? 0
            }
            for withdrawn in object["withdrawn"] as? [[String: Any]] ?? [] { set[Self.integer(withdrawn["id"]) ?? -1] = nil }
            active[version] = set
        }

        // Users: within a partition, first appearances in order; duplicates repeat a record exactly.
        for records in partitions.values {
            var last: [String: Int64] = [:]
            for record in records where record.type == "user" {
                let own = try #require(record.integer("own_version"))
                if let seen = last[record.key], own <= seen { continue }  // a re-send after a kill
                #expect(own == (last[record.key] ?? 0) + 1, "\(record.key): own version \(own) after \(last[record.key] ?? 0)")
                last[record.key] = own
            }
        }
        var byUser: [String: [Int64: Record]] = [:]
        for record in records where record.type == "user" {
            #expect(record.key == record.object["user"] as? String)
            let own = try #require(record.integer("own_version"))
            if let earlier = byUser[record.key]?[own] { #expect(earlier.text == record.text, "\(record.key) v\(own) sent twice, differently") }
            byUser[record.key, default: [:]][own] = record
        }
        let versions = try await harness.pool.withConnection { connection in
            try connection.query(PGStatement("test.versions", "SELECT user_id, version FROM user_version", prepared: false)).rows
                .map { (try $0.decode(0, as: String.self), try $0.decode(1, as: Int64.self)) }
        }
        #expect(versions.count == byUser.count)
        for (user, version) in versions {
            let sent = byUser[user] ?? [:]
            #expect(sent.keys.sorted() == Array(stride(from: Int64(1), through: version, by: 1)), "\(user): every version, no gap")
            // Replay: the own aggregates and the dismissals, then the root totals at each version.
            var aggregates: [String: (count: Int64, unseen: Int64)] = [:]
            var dismissed: Set<Int64> = []
            var previous: Record?
            for own in sent.keys.sorted() {
                let record = sent[own]!
                for node in record.object["changed"] as? [[String: Any]] ?? [] {
                    let path = node["path"] as? String ?? ""
                    if node["shown"] as? Bool == true {
                        aggregates[path] = (Self.integer(node["count"]) ?? 0, Self.integer(node["unseen"]) ?? 0)
                    } else {
                        aggregates[path] = nil
                    }
                }
                for id in record.object["dismissed"] as? [Any] ?? [] { dismissed.insert(Self.integer(id) ?? -1) }
                let broadcast = try #require(record.integer("broadcast_version"))
                let shared = (active[broadcast] ?? [:]).filter { !dismissed.contains($0.key) }.values.reduce(0, +)
                let root = record.object["root"] as? [String: Any]
                #expect(Self.integer(root?["count"]) == (aggregates["root"]?.count ?? 0) + shared, "\(user) v\(own) root")
                #expect(record.integer("version") == own + broadcast)
                #expect(record.integer("previous_version") == own + broadcast - 1)
                if let previous {
                    #expect((previous.integer("broadcast_version") ?? 0) <= broadcast)
                }
                previous = record
            }
            let stored = try await harness.pool.withConnection { connection in
                try connection.query(
                    PGStatement("test.aggregates", "SELECT path::text, count, unseen FROM badge_aggregate WHERE user_id = $1", prepared: false),
                    [user]
                ).rows.map { (try $0.decode(0, as: String.self), try $0.decode(1, as: Int64.self), try $0.decode(2, as: Int64.self)) }
            }
            #expect(stored.count == aggregates.count, "\(user): the replayed tree has the stored nodes")
            for (path, count, unseen) in stored {
                #expect(aggregates[path]?.count == count && aggregates[path]?.unseen == unseen, "\(user) \(path)")
            }
        }
    }
}
