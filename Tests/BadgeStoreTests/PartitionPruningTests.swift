import BadgeCore
import BadgeStore
import Foundation
import LibPQ
import Logging
import Synchronization
import TestSupport
import Testing

/// Issue 27: on the tables hash-partitioned by user, every statement of one user's work reaches
/// only that user's partition of each per-user table, so that a statement that loses its user
/// key (and would read every shard under a distributed PostgreSQL) fails here. PostgreSQL's
/// `auto_explain` sends the plan of every statement, nested ones included, with its actual
/// loops; a partition the plan pruned (at planning or at run time) shows no loop.
@Suite("Per-user statements reach one partition")
struct PartitionPruningTests {
    @Test("one user's ingest, rollup, reads and actions each scan one partition of each per-user table")
    func oneUserOnePartition() async throws {
        let (plans, migrated) = try await PlanLog.partitionedDatabase(prefix: "prune")
        try await tearingDown({ await migrated.drop() }) {
            let pool = migrated.pool
            let store = BadgeStore(pool: pool)
            let someone = user("prune_u1")
            let now = Date()

            // Every user's work; a second user in another partition, so that a statement that reads
            // every partition finds rows there too.
            func work(_ who: UserID, collect: Bool) async throws {
                if collect { try await PlanLog.explainEverything(on: pool) }
                func mapped(_ id: String, _ node: String, _ operation: BadgeOperation) throws -> MappedOperation {
                    MappedOperation(
                        eventID: try EventID(validating: "\(who.rawValue)-\(id)"), audience: .users([who]), path: path(node), operation: operation,
                        expiresAt: nil, occurredAt: now.addingTimeInterval(Double(id.dropFirst()) ?? 0))
                }
                let item = try ItemID(validating: "i1")
                let batches: [[MappedOperation]] = [
                    [try mapped("e1", "root.a.b", .increment(by: 2)), try mapped("e2", "root.a.c", .set(count: 3, icon: nil)), try mapped("e3", "root.i", .addItem(item))],
                    // Only new increments: the rollup adds them (the delta path).
                    [try mapped("e4", "root.a.b", .increment(by: 1)), try mapped("e7", "root.n", .increment(by: 1))],
                    // A duplicate (the merging write) and what needs a recount.
                    [try mapped("e1", "root.a.b", .increment(by: 2)), try mapped("e5", "root.a.c", .decrement(by: 1)), try mapped("e6", "root.i", .removeItem(item))],
                ]
                for events in batches {
                    try await pool.withTransaction { connection in
                        var outcome = BatchOutcome()
                        try IngestTransaction.applyEvents(events, into: &outcome, on: connection)
                    }
                    _ = try await pool.withTransaction { connection in try BadgeStore.recomputeAggregates(for: [who], on: connection) }
                }
                let version = try await store.tree(for: who).version
                _ = try await store.act(.seen, at: path("root.a"), for: who, seenVersion: version)
                _ = try await store.act(.clear(force: false), at: path("root.a.b"), for: who, seenVersion: nil, actionID: try ActionID(validating: "a1"))
                _ = try await store.act(.mute(until: nil), at: path("root.a"), for: who, seenVersion: nil)
                _ = try await store.act(.unmute, at: path("root.a"), for: who, seenVersion: nil)
                try await pool.withConnection { connection in
                    _ = try BadgeStore.readView(for: who, on: connection)
                    _ = try BadgeStore.readHistory(for: who, since: 0, limit: 100, on: connection)
                    _ = try BadgeStore.ownChanges(for: who, after: 0, limit: 100, on: connection)
                    _ = try BadgeStore.userExists(who, on: connection)
                }
                // A user's data on request (issue 28): the export, then the erasure.
                _ = try await store.exportUser(who)
                _ = try await store.eraseUser(who)
            }
            try await work(user("prune_u2"), collect: false)
            try await work(someone, collect: true)

            let reached = plans.partitionsReached()
            #expect(reached.statements > 20, "auto_explain sent \(reached.statements) plans")
            // The work took each way: ingest's dedupe, the delta path and the recount, a read, an
            // action, an export and an erasure.
            for marker in ["INSERT INTO applied_user_event", "spread AS (", "), own AS (", "applied_action", "jsonb_build_object(", "INSERT INTO erased_user"] {
                #expect(reached.queries.contains { $0.contains(marker) }, "no statement with \(marker) ran")
            }
            #expect(reached.partitioned > 10, "plans that reached a partition: \(reached.partitioned)")
            PlanLog.recordWide(reached.wide)
        }
    }
}

/// Issue 27: where the queue is partitioned by user, the rollup claims one partition a round.
@Suite("The rollup claims one partition of the queue a round")
struct PartitionClaimTests {
    @Test("rounds over users in every partition: each round's users share a partition, each statement of it reaches one, and the rounds bring everyone current")
    func oneRoundOnePartition() async throws {
        let (plans, migrated) = try await PlanLog.partitionedDatabase(prefix: "claim")
        try await tearingDown({ await migrated.drop() }) {
            let pool = migrated.pool
            let users = (1...40).map { user("claim_u\($0)") }
            let now = Date()
            // Each user: an increment (the delta path) and, for every third, a set (a recount).
            var events: [MappedOperation] = []
            for (index, who) in users.enumerated() {
                events.append(
                    MappedOperation(
                        eventID: try EventID(validating: "\(who.rawValue)-e1"), audience: .users([who]), path: path("root.a.b"),
                        operation: .increment(by: Int64(index + 1)), expiresAt: nil, occurredAt: now))
                if index % 3 == 0 {
                    events.append(
                        MappedOperation(
                            eventID: try EventID(validating: "\(who.rawValue)-e2"), audience: .users([who]), path: path("root.c"),
                            operation: .set(count: 2, icon: nil), expiresAt: nil, occurredAt: now))
                }
            }
            try await pool.withTransaction { [events] connection in
                var outcome = BatchOutcome()
                try IngestTransaction.applyEvents(events, into: &outcome, on: connection)
            }
            let partitionOf = Dictionary(
                uniqueKeysWithValues: try await pool.withConnection { connection in
                    try connection.query(PGStatement("test.mark_partitions", "SELECT DISTINCT user_id, tableoid::regclass::text FROM dirty_mark")).rows
                        .map { row in (try row.decode(0, as: String.self), try row.decode(1, as: String.self)) }
                })
            #expect(partitionOf.count == users.count && Set(partitionOf.values).count == 8, "\(partitionOf)")

            try await PlanLog.explainEverything(on: pool)
            let store = BadgeStore(pool: pool)
            var sweep = RollupSweep()
            var rounds: [[String]] = []
            while rounds.count < 20 {
                let round = try await store.rollupRound(limit: 100, sweep: sweep)
                sweep.merge(round.sweep)
                sweep.queue.next &+= 1
                guard !round.claimed.isEmpty else { break }
                let names = round.claimed.map(\.user.rawValue)
                rounds.append(names)
                #expect(Set(names.map { partitionOf[$0] }).count == 1, "a round's users in several partitions: \(names.map { partitionOf[$0] ?? "?" })")
                #expect(round.sweep.claimedPart == partitionOf[names[0]])
            }
            #expect(sweep.queue.names.count == 8, "\(sweep.queue.names)")
            // One round per partition, every user once.
            #expect(rounds.count == 8 && rounds.joined().sorted() == users.map(\.rawValue).sorted(), "\(rounds)")
            let reached = plans.partitionsReached()
            #expect(reached.queries.contains { $0.contains("WITH RECURSIVE sweep") } && reached.queries.contains { $0.contains("spread AS (") })
            PlanLog.recordWide(reached.wide)
            for (index, who) in users.enumerated() {
                let tree = try await store.tree(for: who).tree
                #expect(tree?.count == Int64(index + 1) + (index % 3 == 0 ? 2 : 0), "\(who.rawValue)")
            }
        }
    }
}

/// Issue 27: the senders' queues (`push_device`, `webhook_delivery`) are claimed one partition
/// at a time too.
@Suite("Push and webhook claims take one partition a claim")
struct SenderClaimPartitionTests {
    @Test("due devices and deliveries of users in every partition: each claim's rows share a partition, no claim statement reaches two, and the claims in turn take them all")
    func claimsInTurn() async throws {
        let (plans, migrated) = try await PlanLog.partitionedDatabase(prefix: "sendclaim")
        try await tearingDown({ await migrated.drop() }) {
            let pool = migrated.pool
            let users = (1...40).map { "send_u\($0)" }
            let subscription = try WebhookSubscription(
                id: "crm", url: "http://127.0.0.1:9/hook", secret: WebhookSubscription.makeSecret(), paths: ["root"], kinds: ["root"])
            try await pool.withConnection { connection in
                _ = try WebhookStore.put(subscription, on: connection)
                for name in users {
                    _ = try PushStore.register(
                        try PushDevice(id: "phone", platform: "apns", token: "t-\(name)", appID: "com.example.app"), for: user(name), on: connection)
                }
                // Each device due with a number, and a delivery for each user.
                _ = try PushStore.follow(Dictionary(uniqueKeysWithValues: users.map { ($0, (version: Int64(1), count: Int64(2), at: Date?.none)) }), on: connection)
                _ = try WebhookStore.record(
                    users.map { WebhookStore.NewDelivery(subscription: "crm", user: $0, id: "d-\($0)", kind: "badge.root", payload: "{}") },
                    positions: [:], on: connection)
            }
            func partitions(_ table: String) async throws -> [String: String] {
                Dictionary(
                    uniqueKeysWithValues: try await pool.withConnection { connection in
                        try connection.query(PGStatement("test.parts.\(table)", "SELECT user_id, tableoid::regclass::text FROM \(table)")).rows
                            .map { row in (try row.decode(0, as: String.self), try row.decode(1, as: String.self)) }
                    })
            }
            let devicePart = try await partitions("push_device"), deliveryPart = try await partitions("webhook_delivery")
            #expect(Set(devicePart.values).count == 8 && Set(deliveryPart.values).count == 8, "\(devicePart) \(deliveryPart)")

            try await PlanLog.explainEverything(on: pool)
            var pushParts = TableParts(of: "push_device"), webhookParts = TableParts(of: "webhook_delivery")
            var devices: [[String]] = [], deliveries: [[String]] = []
            for _ in 0..<12 {
                let pushed = try await pool.withConnection { [pushParts] in try PushStore.claim(limit: 100, lease: .seconds(60), parts: pushParts, on: $0) }
                let delivered = try await pool.withConnection { [webhookParts] in
                    try WebhookStore.claim(limit: 100, lease: .seconds(60), parts: webhookParts, on: $0)
                }
                pushParts.merge(pushed.parts)
                webhookParts.merge(delivered.parts)
                pushParts.next &+= 1
                webhookParts.next &+= 1
                if !pushed.claimed.isEmpty { devices.append(pushed.claimed.map(\.user)) }
                if !delivered.claimed.isEmpty { deliveries.append(delivered.claimed.map(\.user)) }
            }
            for claim in devices { #expect(Set(claim.map { devicePart[$0] }).count == 1, "a claim's devices in several partitions: \(claim)") }
            for claim in deliveries { #expect(Set(claim.map { deliveryPart[$0] }).count == 1, "a claim's deliveries in several partitions: \(claim)") }
            #expect(devices.count == 8 && devices.joined().sorted() == users.sorted(), "\(devices)")
            #expect(deliveries.count == 8 && deliveries.joined().sorted() == users.sorted(), "\(deliveries)")
            let reached = plans.partitionsReached()
            #expect(reached.queries.contains { $0.contains("wanted_version > sent_version AND next_attempt_at") })
            #expect(reached.queries.contains { $0.contains("d.state = 'pending' AND d.next_attempt_at") })
            PlanLog.recordWide(reached.wide)
        }
    }
}

@Suite("Prunes on tables partitioned by user", .serialized)
struct PrunePartitionTests {
    @Test("the retention prunes and the fold of old increments delete every old row of users in every partition, each statement in one partition")
    func prunesPartByPart() async throws {
        let (plans, migrated) = try await PlanLog.partitionedDatabase(prefix: "prunepart")
        try await tearingDown({ await migrated.drop() }) {
            let pool = migrated.pool
            let users = (1...40).map { "prune_u\($0)" }
            let old = "now() - interval '30 days'"
            try await pool.withConnection { connection in
                try connection.execute(
                    script: """
                    INSERT INTO applied_user_event (user_id, event_id, applied_at) SELECT u, 'e-' || u, \(old) FROM unnest($1::text[]) u;
                    INSERT INTO applied_action (user_id, action_id, applied_at) SELECT u, 'a-' || u, \(old) FROM unnest($1::text[]) u;
                    INSERT INTO badge_item (user_id, path, item, occurred_at, removed_at) SELECT u, 'root.x', 'i', \(old), \(old) FROM unnest($1::text[]) u;
                    INSERT INTO badge_clear_mark (user_id, path, subtree, cleared_through, marked_at) SELECT u, 'root.x', true, \(old), \(old) FROM unnest($1::text[]) u;
                    INSERT INTO erased_user (user_id, erased_at) SELECT u, \(old) FROM unnest($1::text[]) u;
                    """.replacingOccurrences(of: "$1::text[]", with: textArray(users)),
                    name: "test.prune.rows")
            }
            let tables = ["applied_user_event", "applied_action", "badge_item", "badge_clear_mark", "erased_user"]
            func rows() async throws -> [String: Int] { try await rowCounts(of: tables, in: pool) }
            #expect(try await rows() == Dictionary(uniqueKeysWithValues: tables.map { ($0, 40) }))
            let spread = try await pool.withConnection { connection in
                try connection.query(PGStatement("test.spread", "SELECT count(DISTINCT tableoid) FROM applied_user_event")).rows.first?.decode(0, as: Int64.self)
            }
            #expect(spread == 8)

            try await PlanLog.explainEverything(on: pool)
            // Chunks of 3: several statements a partition, as a real prune of many rows takes.
            let deleted = try await pool.withConnection { connection in
                try IngestTransaction.pruneAppliedEvents(olderThan: Date().addingTimeInterval(-7 * 86_400), limit: 3, on: connection)
            }
            let reached = plans.partitionsReached()  // the prunes' plans, before this test's counts
            #expect(deleted == 200)
            #expect(try await rows() == Dictionary(uniqueKeysWithValues: tables.map { ($0, 0) }))
            #expect(reached.queries.contains { $0.contains("DELETE FROM applied_user_event_p") }, "\(reached.queries.prefix(5))")
            #expect(reached.queries.contains { $0.contains("FROM badge_increment_p") }, "\(reached.queries.prefix(5))")
            PlanLog.recordWide(reached.wide)
        }
    }

    @Test("the expiry sweeper's candidates come from one partition a statement, and every expired state and ended snooze of users in all partitions is found")
    func sweeperPartByPart() async throws {
        let (plans, migrated) = try await PlanLog.partitionedDatabase(prefix: "sweeppart")
        try await tearingDown({ await migrated.drop() }) {
            let pool = migrated.pool
            let users = (1...40).map { "sweep_u\($0)" }
            let list = textArray(users)
            try await pool.withConnection { connection in
                try connection.execute(
                    script: """
                    INSERT INTO badge_state (user_id, path, count, expires_at) SELECT u, 'root.x', 1, now() - interval '1 minute' FROM unnest(\(list)) u;
                    INSERT INTO badge_mute (user_id, path, muted, until, occurred_at, woken, written_in)
                    SELECT u, 'root.y', true, now() - interval '1 minute', now() - interval '1 hour', false, 0 FROM unnest(\(list)) u;
                    """, name: "test.sweep.rows")
            }
            try await PlanLog.explainEverything(on: pool)
            let parts = try await pool.withConnection { try BadgeStore.expiryParts(on: $0) }
            #expect(parts.states.count == 8 && parts.mutes.count == 8, "\(parts)")
            var expired = 0, woken = 0
            for part in parts.states {
                expired += try await pool.withTransaction { try BadgeStore.expireBadges(limit: 100, part: part, on: $0) }
            }
            for part in parts.mutes {
                woken += try await pool.withTransaction { try BadgeStore.wakeSnoozes(limit: 100, part: part, on: $0) }
            }
            let reached = plans.partitionsReached()
            #expect(expired == 40 && woken == 40, "expired \(expired), woken \(woken)")
            #expect(reached.queries.contains { $0.contains("FROM badge_state_p") }, "\(reached.queries.prefix(5))")
            #expect(reached.queries.contains { $0.contains("FROM badge_mute_p") }, "\(reached.queries.prefix(5))")
            PlanLog.recordWide(reached.wide)
        }
    }
}

/// The plans `auto_explain` sent as notices, and which partitions each reached.
final class PlanLog: Sendable {
    private let plans = Mutex<[String]>([])

    /// A migrated database on the layout partitioned by user, with one connection whose
    /// notices go to the returned log.
    static func partitionedDatabase(prefix: String) async throws -> (PlanLog, MigratedDatabase) {
        let plans = PlanLog()
        let migrated = try await MigratedDatabase.create(
            prefix: prefix, connections: 1, layout: .partitionedByUser,
            logger: Logger(label: "reddot.test.plans") { _ in PlanLog.Handler(log: plans) })
        return (plans, migrated)
    }

    /// Records an issue for each statement that reached several partitions of a table.
    static func recordWide(_ wide: [String: Set<String>]) {
        for (query, tables) in wide.sorted(by: { $0.key < $1.key }) {
            let oneLine = query.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: " ")
            Issue.record("reaches several partitions of \(tables.sorted()): \(oneLine.prefix(1_500))")
        }
    }

    /// Has the session of `pool`'s one connection send every statement's plan, nested ones
    /// included, with actual loops, as a notice (`Handler` collects them).
    static func explainEverything(on pool: PGPool) async throws {
        try await pool.withConnection { connection in
            for setting in [
                "LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0", "SET auto_explain.log_analyze = on",
                "SET auto_explain.log_nested_statements = on", "SET auto_explain.log_format = json",
                "SET auto_explain.log_level = notice", "SET client_min_messages = notice",
                // The test's tables hold a few rows each, where the planner scans whole
                // partitions whatever the keys; with scans and joins by hash or merge off it
                // reaches rows by index, as at scale, and a statement that names its user
                // reaches one partition.
                "SET enable_seqscan = off", "SET enable_hashjoin = off", "SET enable_mergejoin = off",
            ] {
                try connection.execute(script: setting, name: "test.auto_explain")
            }
        }
    }

    /// For each statement, the per-user tables of which it ran in more than one partition.
    func partitionsReached() -> (statements: Int, partitioned: Int, wide: [String: Set<String>], queries: [String]) {
        let texts = plans.withLock { $0 }
        var wide: [String: Set<String>] = [:]
        var partitioned = 0
        var queries: [String] = []
        for text in texts {
            guard let start = text.firstIndex(of: "{"),
                let object = try? JSONSerialization.jsonObject(with: Data(text[start...].utf8)) as? [String: Any],
                let plan = object["Plan"] as? [String: Any]
            else { continue }
            let query = (object["Query Text"] as? String) ?? "?"
            queries.append(query)
            var reached: [String: Set<String>] = [:]
            Self.walk(plan) { node in
                guard let relation = node["Relation Name"] as? String, (node["Actual Loops"] as? Int ?? 0) > 0,
                    let cut = relation.range(of: "_p", options: .backwards),
                    let table = Self.userTable(String(relation[..<cut.lowerBound]))
                else { return }
                reached[table, default: []].insert(relation)
            }
            if !reached.isEmpty { partitioned += 1 }
            for (table, partitions) in reached where partitions.count > 1 {
                wide[query, default: []].insert(table)
            }
        }
        return (texts.count, partitioned, wide, queries)
    }

    /// `name` when it is a per-user table, or one slot of the dedupe generations' table (each
    /// slot counts apart: ingest looks for a key in both, each in one user's partition).
    private static func userTable(_ name: String) -> String? {
        if SchemaLayout.userTables.contains(name) { return name }
        guard let slot = name.range(of: "_slot", options: .backwards), SchemaLayout.userTables.contains(String(name[..<slot.lowerBound])),
            name[slot.upperBound...].allSatisfy(\.isNumber)
        else { return nil }
        return name
    }

    private static func walk(_ node: [String: Any], _ visit: ([String: Any]) -> Void) {
        visit(node)
        for child in node["Plans"] as? [[String: Any]] ?? [] { walk(child, visit) }
    }

    struct Handler: LogHandler {
        let log: PlanLog
        var logLevel: Logger.Level = .debug
        var metadata: Logger.Metadata = [:]

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            guard let notice = event.metadata?["db.notice"], "\(notice)".contains("\"Plan\"") else { return }
            log.plans.withLock { $0.append("\(notice)") }
        }
    }
}
