import BadgeAPI
import BadgeCore
import BadgeStore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import LibPQ
import Testing
import TestSupport

/// The query service with a real hot standby (`deploy/test.sh` streams one from a primary with
/// `pg_basebackup`): reads come from the standby, writes go to the primary, and a client never
/// sees its tree go back, even while the standby's replay is paused.
@Suite("Reads from a hot standby", .serialized)
struct ReplicaTests {
    @Test("tree reads are answered by the standby, and a stream hears of a change once the standby replays it")
    func readsComeFromTheStandby() async throws {
        try await ReplicaSetup.with { setup in
            // Written on connections of their own, closed after: a backend's statistics reach
            // the server's view when it exits, not on their own while it idles in a pool.
            let writer = PGPool(configuration: setup.primaryPool.configuration, maximumConnections: 1, logger: TestServer.logger)
            try await BadgeStore(pool: writer).apply(
                [BadgeMutation(user: user("ann"), path: path("root.chat"), operation: .increment(by: 2))], recomputeNow: true)
            writer.close()
            try await setup.waitForReplay()
            try await setup.serve { client, _ in
                let token = try await setup.token("ann")
                let primaryBefore = try await setup.settledScans(onStandby: false)
                let standbyBefore = try await setup.settledScans(onStandby: true)
                for _ in 0..<20 {
                    let response = try await client.get("/v1/users/ann/badges?path=root.chat", token: token)
                    #expect(response.status == .ok)
                    #expect(try response.tree().tree?.count == 2)
                }
                // The standby's own statistics show the reads; the primary's do not move.
                let standbyScans = try await setup.waitForScans(onStandby: true, atLeast: standbyBefore + 20)
                #expect(standbyScans >= standbyBefore + 20)
                let primaryAfter = try await setup.settledScans(onStandby: false)
                let errors = try await setup.fallbacks(reason: "error"), behind = try await setup.fallbacks(reason: "behind")
                #expect(primaryAfter == primaryBefore, "error fallbacks \(errors), behind \(behind), before \(primaryBefore), after \(primaryAfter)")

                // A stream is woken once the standby shows the change: its notification waits
                // while replay is paused (woken at once, it would read the old tree there and
                // never hear of the change again).
                let stream = try EventStreamClient(port: try #require(client.client.port), uri: "/v1/users/ann/badges/stream", headers: ["Authorization": "Bearer \(token)"])
                let snapshot = try #require(await stream.next())
                #expect(snapshot.name == "snapshot")
                try await setup.pauseReplay()
                try await setup.primary.apply([BadgeMutation(user: user("ann"), path: path("root.chat"), operation: .increment(by: 1))], recomputeNow: true)
                #expect(await stream.next(timeout: .milliseconds(500)) == nil)
                try await setup.resumeReplay()
                let change = try #require(await stream.next(timeout: .seconds(10)))
                #expect(change.name == "change")
                #expect(change.data.contains("\"count\":3"))
            }
        }
    }

    @Test("a client's read after its own clear never shows an older version, though the standby has not replayed the clear")
    func ownClearNeverGoesBack() async throws {
        try await ReplicaSetup.with { setup in
            try await setup.primary.apply([BadgeMutation(user: user("bob"), path: path("root.chat"), operation: .increment(by: 4))], recomputeNow: true)
            try await setup.waitForReplay()
            try await setup.serve { client, other in
                let token = try await setup.token("bob")
                let before = try await client.get("/v1/users/bob/badges", token: token)
                let shown = try before.tree().version
                let latestBefore = try await setup.fallbacks(reason: "latest")
                try await setup.pauseReplay()
                for round in 1...5 {
                    let cleared = try await client.call(
                        .post, "/v1/users/bob/badges/clear", token: token, body: #"{"path": "root.chat", "force": true, "action_id": "clear-\#(round)"}"#)
                    #expect(cleared.status == .ok)
                    let version = try cleared.tree().version
                    #expect(version > shown)
                    // The same server, no version sent: it remembers what its action wrote.
                    let plain = try await client.get("/v1/users/bob/badges", token: token)
                    #expect(try plain.tree().version >= version)
                    #expect(try plain.tree().tree?.count ?? 0 == 0)
                    // Another server, with the version the client got: never older.
                    let elsewhere = try await other.get("/v1/users/bob/badges", token: token, headers: [.ifNoneMatch: "\"\(version)\""])
                    let elsewhereVersion = elsewhere.status == .notModified ? version : try elsewhere.tree().version
                    #expect(elsewhereVersion >= version)
                    try await setup.primary.apply([BadgeMutation(user: user("bob"), path: path("root.chat"), operation: .increment(by: 1))], recomputeNow: true)
                }
                try await setup.resumeReplay()
                #expect(try await setup.fallbacks(reason: "latest") >= latestBefore + 5)
            }
        }
    }

    @Test("a paused standby makes reads fall back or wait, never go back")
    func lagNeverGoesBack() async throws {
        try await ReplicaSetup.with { setup in
            try await setup.primary.apply([BadgeMutation(user: user("cy"), path: path("root.chat"), operation: .increment(by: 1))], recomputeNow: true)
            try await setup.waitForReplay()
            try await setup.serve { client, _ in
                let token = try await setup.token("cy")
                let first = try await client.get("/v1/users/cy/badges", token: token)
                let v1 = try first.tree().version
                try await setup.pauseReplay()
                try await setup.primary.apply([BadgeMutation(user: user("cy"), path: path("root.chat"), operation: .increment(by: 1))], recomputeNow: true)
                let v2 = try await setup.primaryVersion(of: "cy")
                #expect(v2 > v1)
                let behindBefore = try await setup.fallbacks(reason: "behind")

                // A client that saw v2 (from another server that read the primary) is answered from the primary.
                let read = try await client.get("/v1/users/cy/badges", token: token, headers: [.ifNoneMatch: "\"\(v2)\""])
                #expect(read.status == .notModified)
                let tree = try await client.get("/v1/users/cy/badges?path=root.chat", token: token, headers: [.ifNoneMatch: "\"\(v2)\""])
                #expect(tree.status == .notModified)
                // A delta poll from v2 is not told its version is gone.
                let delta = try await client.get("/v1/users/cy/badges/changes?since=\(v2)", token: token)
                #expect(delta.status == .notModified)
                // A stream resuming at v2 gets nothing older.
                let port = try #require(client.client.port)
                let resumed = try EventStreamClient(
                    port: port, uri: "/v1/users/cy/badges/stream", headers: ["Authorization": "Bearer \(token)", "Last-Event-ID": "\(v2)"])
                #expect(await resumed.waitForHeaders())
                #expect(try await setup.fallbacks(reason: "behind") > behindBefore)

                // A long-poll from v1 waits (the standby shows nothing newer) until replay resumes.
                async let polled = client.get("/v1/users/cy/badges?wait=20s&since=\(v1)", token: token)
                try await Task.sleep(for: .milliseconds(300))
                try await setup.primary.apply([BadgeMutation(user: user("cy"), path: path("root.chat"), operation: .increment(by: 1))], recomputeNow: true)
                let v3 = try await setup.primaryVersion(of: "cy")
                try await setup.resumeReplay()
                let answered = try await polled
                #expect(answered.status == .ok)
                #expect(try answered.tree().version > v1)

                // The resumed stream moves on to v3 and never below v2.
                var ids: [Int64] = []
                while let event = await resumed.next(timeout: .seconds(10)) {
                    ids.append(try #require(event.id.flatMap { Int64($0) }))
                    if ids.last == v3 { break }
                }
                #expect(ids.last == v3)
                #expect(ids.allSatisfy { $0 > v2 })
                #expect(ids == ids.sorted())
            }
        }
    }
}

/// A migrated database on the replicated primary, pools on it and on its standby, and the
/// API over a ``ReplicatedBadgeStore`` as `reddot serve --replica-database-url` builds it.
private struct ReplicaSetup: Sendable {
    let database: TestDatabase
    let primaryPool: PGPool
    let standbyPool: PGPool
    let standbyAdmin: PGPool
    let standbyURL: String
    var primary: BadgeStore { BadgeStore(pool: primaryPool) }

    static func with(_ body: @Sendable (ReplicaSetup) async throws -> Void) async throws {
        // The metrics registry `fallbacks` reads, bootstrapped before any server makes its
        // counters (made first, they would count nowhere when this suite runs alone).
        _ = APIHarness.registry
        let (primaryAdmin, standbyAdmin) = try TestServer.replicated()
        let database = try await TestDatabase.create(prefix: "replica", server: primaryAdmin)
        let settings = BadgeStore.recommendedSessionSettings
        let primaryPool = PGPool(
            configuration: PGConfiguration(connectionString: database.url, sessionSettings: settings), maximumConnections: 4,
            logger: TestServer.logger)
        let standbyURL = database.url(on: standbyAdmin)
        let standbyPool = PGPool(
            configuration: PGConfiguration(
                connectionString: standbyURL, sessionSettings: settings + [("default_transaction_read_only", "on")]),
            maximumConnections: 4, logger: TestServer.logger)
        let admin = PGPool(configuration: PGConfiguration(connectionString: standbyAdmin), maximumConnections: 1, logger: TestServer.logger)
        let setup = ReplicaSetup(
            database: database, primaryPool: primaryPool, standbyPool: standbyPool, standbyAdmin: admin, standbyURL: standbyURL)
        do {
            // Migrated on a pool of its own, closed after: statistics of its statements must not
            // reach the server later, from an idle connection of `primaryPool`.
            let migrator = PGPool(configuration: primaryPool.configuration, maximumConnections: 1, logger: TestServer.logger)
            try await MigratedDatabase.migrate(migrator)
            migrator.close()
            try await setup.waitForReplay()
            try await body(setup)
        } catch {
            try? await setup.resumeReplay()
            await setup.close()
            throw error
        }
        try? await setup.resumeReplay()
        await setup.close()
    }

    func close() async {
        primaryPool.close()
        standbyPool.close()
        standbyAdmin.close()
        await database.drop()
    }

    /// Two API servers over the replicated store, each with its own hub whose notifications from
    /// the primary are released once the standby replays them (as `reddot serve` does with a
    /// replica), with its default interval.
    func serve(_ body: @Sendable (ReplicaServer, ReplicaServer) async throws -> Void) async throws {
        let store = ReplicatedBadgeStore(primary: primary, replica: BadgeStore(pool: standbyPool), logger: TestServer.logger)
        let interval = BadgeServerConfiguration(auth: AuthConfiguration(), database: PGConfiguration(), listenerDatabase: PGConfiguration())
            .replicaPollInterval
        let standby = PGConfiguration(connectionString: standbyURL), primary = PGConfiguration(connectionString: database.url)
        let hubs = try (0..<2).map { _ in
            ChangeHub(
                following: try ReplicaListener(primary: primary, replica: standby, interval: interval, logger: TestServer.logger),
                logger: TestServer.logger)
        }
        let auth = AuthConfiguration(hs256Secret: APIHarness.secret)
        try await APIHarness.serve(store: store, hub: hubs[0], auth: auth, publisher: nil, waitForListener: true) { _, first in
            try await APIHarness.serve(store: store, hub: hubs[1], auth: auth, publisher: nil, waitForListener: true) { _, second in
                try await body(ReplicaServer(client: first), ReplicaServer(client: second))
            }
        }
    }

    func token(_ subject: String) async throws -> String {
        try await Authenticator.makeHS256Token(secret: APIHarness.secret, subject: subject, scopes: [], expiresIn: 600)
    }

    /// Waits until the standby has replayed everything the primary wrote so far.
    func waitForReplay() async throws {
        let lsn = try await primaryPool.withConnection { connection in
            try connection.query(PGStatement("test.lsn", "SELECT pg_current_wal_insert_lsn()::text", prepared: false)).rows[0].decode(0, as: String.self)
        }
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            let caught = try await standbyAdmin.withConnection { connection in
                try connection.query(
                    PGStatement("test.replayed", "SELECT coalesce(pg_last_wal_replay_lsn() >= $1::pg_lsn, false)", prepared: false), [lsn]
                ).rows[0].decode(0, as: Bool.self)
            }
            if caught { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw APITestError("the standby did not replay to \(lsn) within 30 s")
    }

    func pauseReplay() async throws {
        try await standbyAdmin.withConnection { connection in
            try connection.execute(script: "SELECT pg_wal_replay_pause()", name: "test.pause_replay")
        }
    }

    func resumeReplay() async throws {
        try await standbyAdmin.withConnection { connection in
            try connection.execute(script: "SELECT pg_wal_replay_resume()", name: "test.resume_replay")
        }
    }

    /// The user's visible version on the primary.
    func primaryVersion(of name: String) async throws -> Int64 {
        try await primary.readView(for: user(name), within: .root, depth: nil, deadline: .now + .seconds(5)).version
    }

    /// Scans of the aggregates table in this database, by the server's own statistics.
    func aggregateScans(onStandby: Bool) async throws -> Int64 {
        let pool = onStandby ? standbyPool : primaryPool
        return try await pool.withConnection { connection in
            try connection.query(
                PGStatement(
                    "test.scans",
                    "SELECT coalesce(sum(coalesce(seq_scan, 0) + coalesce(idx_scan, 0)), 0)::bigint FROM pg_stat_user_tables WHERE relname = 'badge_aggregate'",
                    prepared: false)
            ).rows[0].decode(0, as: Int64.self)
        }
    }

    /// The scans on one server once they reach `count` (statistics are flushed about once a
    /// second), or what they are after 10 s.
    func waitForScans(onStandby: Bool, atLeast count: Int64) async throws -> Int64 {
        let deadline = ContinuousClock.now + .seconds(10)
        var scans = try await aggregateScans(onStandby: onStandby)
        while scans < count, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(200))
            scans = try await aggregateScans(onStandby: onStandby)
        }
        return scans
    }

    /// The scans on one server once two readings 1.5 s apart agree (a backend flushes its
    /// statistics about a second after it goes idle).
    func settledScans(onStandby: Bool) async throws -> Int64 {
        var scans = try await aggregateScans(onStandby: onStandby)
        for _ in 0..<10 {
            try await Task.sleep(for: .milliseconds(1_500))
            let again = try await aggregateScans(onStandby: onStandby)
            if again == scans { return scans }
            scans = again
        }
        return scans
    }

    /// `reddot_api_replica_fallbacks_total{reason}` as `/metrics` shows it (every test's servers share the registry).
    func fallbacks(reason: String) async throws -> Double {
        var bytes: [UInt8] = []
        APIHarness.registry.emit(into: &bytes)
        let text = String(decoding: bytes, as: UTF8.self)
        let prefix = "reddot_api_replica_fallbacks_total{reason=\"\(reason)\"} "
        return text.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap { Double($0.dropFirst(prefix.count)) } ?? 0
    }
}

/// One of the two API servers of a ``ReplicaSetup``.
private struct ReplicaServer: HTTPHarness {
    let client: any TestClientProtocol
}
