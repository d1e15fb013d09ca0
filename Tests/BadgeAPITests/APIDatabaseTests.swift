import BadgeAPI
import BadgeCore
import BadgeStore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import LibPQ
import TestSupport
import Testing

/// The routes whose answers depend on PostgreSQL itself: broadcasts, the schema version, an
/// unreachable database.
@Suite("The query service's routes on PostgreSQL", .serialized)
struct APIDatabaseTests {
    @Test("broadcasts show in every user's tree and ancestors, and each user clears them for themselves")
    func broadcasts() async throws {
        try await APIHarness.with { harness in
            try await harness.apply([BadgeMutation(user: user("erin"), path: path("root.settings.theme"), operation: .increment(by: 2))])
            try await harness.broadcast("b1", at: "root.settings.dark_mode", icon: "new")
            try await harness.broadcast("b2", at: "root.promo.sale", count: 3)
            let erin = try await harness.token("erin"), frank = try await harness.token("frank")

            let erinTree = try await harness.get("/v1/users/erin/badges", token: erin).tree()
            #expect(erinTree.tree?.count == 5)
            let settings = try #require(erinTree.tree?.children.first { $0.path.rawValue == "root.settings" })
            #expect(settings.count == 2)
            #expect(settings.children.map(\.path.rawValue) == ["root.settings.dark_mode", "root.settings.theme"])
            #expect(settings.children.first?.icon?.rawValue == "new")

            // A user RedDot never stored anything for sees them too.
            let frankBefore = try await harness.get("/v1/users/frank/badges", token: frank).tree()
            #expect(frankBefore.tree?.count == 3)
            #expect(frankBefore.tree?.children.map(\.path.rawValue) == ["root.promo", "root.settings"])

            let cleared = try await harness.call(
                .post, "/v1/users/frank/badges/clear", token: frank, body: #"{"path": "root.settings.dark_mode"}"#)
            let clearedAnswer = try cleared.tree()
            #expect(clearedAnswer.tree == nil)
            #expect(clearedAnswer.version > frankBefore.version)
            let frankAfter = try await harness.get("/v1/users/frank/badges", token: frank).tree()
            #expect(frankAfter.tree?.children.map(\.path.rawValue) == ["root.promo"])
            // Others keep it.
            let erinAfter = try await harness.get("/v1/users/erin/badges?path=root.settings", token: erin).tree()
            #expect(erinAfter.tree?.children.map(\.path.rawValue) == ["root.settings.dark_mode", "root.settings.theme"])
            #expect(erinAfter.version == erinTree.version)

            // A forced clear of an ancestor dismisses the broadcasts below it.
            _ = try await harness.call(.post, "/v1/users/erin/badges/clear", token: erin, body: #"{"path": "root", "force": true}"#)
            let erinEmpty = try await harness.get("/v1/users/erin/badges", token: erin).tree()
            #expect(erinEmpty.tree?.shown == false)

            // A new broadcast moves every user's version.
            try await harness.broadcast("b3", at: "root.news", count: 1)
            let erinNews = try await harness.get("/v1/users/erin/badges", token: erin).tree()
            #expect(erinNews.version > erinEmpty.version)
            #expect(erinNews.tree?.count == 1)

            // Rendered at V, a broadcast launches, a clear at V: the new broadcast was not
            // shown, so it stays; the one shown in V goes.
            let rendered = try await harness.get("/v1/users/erin/badges", token: erin).tree()
            try await harness.broadcast("b4", at: "root.news.launch", count: 2)
            let atRendered = try await harness.call(
                .post, "/v1/users/erin/badges/clear", token: erin, body: #"{"path": "root.news", "force": true, "seen_version": \#(rendered.version)}"#)
            #expect(atRendered.status == .ok, "\(atRendered.text)")
            let news = try await harness.get("/v1/users/erin/badges?path=root.news", token: erin).tree()
            #expect(news.tree?.count == 2 && news.tree?.children.map(\.path.rawValue) == ["root.news.launch"], "b3 went, b4 stays")
            // At the version that shows it, it goes too.
            _ = try await harness.call(
                .post, "/v1/users/erin/badges/clear", token: erin, body: #"{"path": "root.news", "force": true, "seen_version": \#(news.version)}"#)
            #expect(try await harness.get("/v1/users/erin/badges", token: erin).tree().tree?.shown == false)

            // An event clear that occurred before a broadcast was stored leaves it; one without a
            // time (applied now) takes it.
            try await harness.broadcast("b5", at: "root.promo.flash", count: 1)
            let earlier = BadgeMutation(
                user: user("frank"), path: path("root.promo"), operation: .clear(force: true), occurredAt: Date(timeIntervalSinceNow: -3600))
            try await harness.apply([earlier])
            let promo = try await harness.get("/v1/users/frank/badges?path=root.promo", token: frank).tree()
            #expect(promo.tree?.children.map(\.path.rawValue) == ["root.promo.flash", "root.promo.sale"], "an hour-old clear takes neither")
            try await harness.apply([BadgeMutation(user: user("frank"), path: path("root.promo"), operation: .clear(force: true))])
            #expect(try await harness.get("/v1/users/frank/badges?path=root.promo", token: frank).tree().tree == nil)
        }
    }

    @Test("seen marks broadcasts seen: unseen 0 everywhere with the broadcasts still shown; one launched after the render stays unseen")
    func seenBroadcasts() async throws {
        try await APIHarness.with { harness in
            let kai = try await harness.token("kai")
            try await harness.apply([BadgeMutation(user: user("kai"), path: path("root.chat.c1"), operation: .increment(by: 2))])
            try await harness.broadcast("s1", at: "root.settings.dark_mode", icon: "new")
            try await harness.broadcast("s2", at: "root.promo.sale", count: 3)
            let shown = try await harness.get("/v1/users/kai/badges", token: kai).tree()
            #expect(shown.tree?.count == 5 && shown.tree?.unseen == 5)
            // The bell reaches 0 with the "new feature" dot and the sale still live.
            let seen = try await harness.call(
                .post, "/v1/users/kai/badges/seen", token: kai, body: #"{"path": "root", "seen_version": \#(shown.version)}"#)
            #expect(seen.status == .ok, "\(seen.text)")
            let after = try await harness.get("/v1/users/kai/badges", token: kai).tree()
            #expect(after.version > shown.version)
            #expect(after.tree?.count == 5 && after.tree?.unseen == 0, "\(after)")
            let nodes = Self.flatten(after.tree)
            #expect(nodes["root.settings.dark_mode"]?.shown == true && nodes["root.settings.dark_mode"]?.icon?.rawValue == "new")
            #expect(nodes["root.promo.sale"]?.count == 3 && nodes["root.promo.sale"]?.unseen == 0)
            #expect(nodes.values.allSatisfy { $0.unseen == 0 })

            // Rendered at V, a broadcast launches, a seen at V: the new one stays unseen.
            try await harness.broadcast("s3", at: "root.promo.flash", count: 1)
            let late = try await harness.call(
                .post, "/v1/users/kai/badges/seen", token: kai, body: #"{"path": "root.promo", "seen_version": \#(after.version)}"#)
            #expect(late.status == .ok, "\(late.text)")
            let promo = try await harness.get("/v1/users/kai/badges?path=root.promo", token: kai).tree()
            #expect(promo.tree?.count == 4 && promo.tree?.unseen == 1, "\(promo)")
            // A clear still dismisses a seen broadcast.
            _ = try await harness.call(.post, "/v1/users/kai/badges/clear", token: kai, body: #"{"path": "root.promo", "force": true}"#)
            #expect(try await harness.get("/v1/users/kai/badges?path=root.promo", token: kai).tree().tree == nil)
            // The change log carries the seen version: a stream resuming from before it replays it.
            let history = try await harness.store.history(for: user("kai"), since: shown.version, stepwise: true, limit: 100, deadline: .now + .seconds(5))
            let afterSeen = try #require(history?.first { $0.version == after.version })
            #expect(afterSeen.aggregates[.root]?.unseen == 0 && afterSeen.aggregates[.root]?.count == 5)
            let report = try await BadgeVerifier(store: harness.store).run(repair: false)
            #expect(report.mismatches == 0)
        }
    }

    static func flatten(_ node: BadgeNode?) -> [String: BadgeNode] {
        guard let node else { return [:] }
        var nodes = [node.path.rawValue: node]
        for child in node.children { nodes.merge(flatten(child)) { first, _ in first } }
        return nodes
    }

    @Test("a clear with the version the client showed: arrivals after it stay, with their counts at every ancestor")
    func clearWhatWasSeen() async throws {
        try await APIHarness.with { harness in
            let gina = try await harness.token("gina")
            let message = { (id: String) in
                BadgeMutation(user: user("gina"), path: path("root.chat.c1"), operation: .addItem(ItemID(rawValue: id)!))
            }
            let increment = BadgeMutation(user: user("gina"), path: path("root.chat.c2"), operation: .increment(by: 1))
            try await harness.apply([message("m1"), message("m2"), increment])
            let shown = try await harness.get("/v1/users/gina/badges", token: gina).tree()
            #expect(shown.tree?.count == 3)

            // Two arrivals after the render, made visible: a message and an increment.
            try await harness.apply([message("m3"), increment])
            let cleared = try await harness.call(
                .post, "/v1/users/gina/badges/clear", token: gina,
                body: #"{"path": "root.chat", "force": true, "seen_version": \#(shown.version)}"#)
            #expect(cleared.status == .ok, "\(cleared.text)")
            // What was shown is gone; the two arrivals stay, with their count at every ancestor.
            var now = try await harness.get("/v1/users/gina/badges", token: gina).tree()
            #expect(now.version > shown.version)
            #expect(now.tree?.count == 2)
            var chat = try #require(now.tree?.children.first)
            #expect(chat.count == 2 && chat.unseen == 2)
            #expect(chat.children.map(\.path.rawValue) == ["root.chat.c1", "root.chat.c2"])
            #expect(chat.children.map(\.count) == [1, 1])

            // An arrival stored but not yet visible (waiting for the rollup) is not cleared either.
            try await harness.store.apply([message("m4")], recomputeNow: false)
            let waiting = try await harness.call(
                .post, "/v1/users/gina/badges/clear", token: gina,
                headers: [.ifMatch: "\"\(now.version)\""], body: #"{"path": "root.chat.c1"}"#)
            #expect(waiting.status == .ok, "\(waiting.text)")
            while try await harness.store.recomputeDirtyUsers(limit: 10) > 0 {}
            now = try await harness.get("/v1/users/gina/badges", token: gina).tree()
            chat = try #require(now.tree?.children.first)
            #expect(chat.children.map(\.count) == [1, 1], "m4 stays in c1, c2's increment stays")

            // A negative version is no ETag this API gave: 400, not a trap in the arithmetic.
            let negative = try await harness.call(
                .post, "/v1/users/gina/badges/clear", token: gina,
                headers: [.ifMatch: "\"-9223372036854775808\""], body: #"{"path": "root"}"#)
            #expect(negative.status == .badRequest && negative.text.contains("invalid_if_match"), "\(negative.text)")
            // The store itself takes any version: one below every other clears nothing.
            #expect(try await harness.store.act(.clear(force: true), at: .root, for: user("gina"), seenVersion: .min) == .applied(nil))
            // A version the tree never had is refused; with the version now shown, all goes.
            let future = try await harness.call(
                .post, "/v1/users/gina/badges/clear", token: gina, body: #"{"path": "root", "force": true, "seen_version": \#(now.version + 5)}"#)
            #expect(future.status == .preconditionFailed && future.text.contains("version_changed"), "\(future.text)")
            #expect(future.headers[.eTag] == "\"\(now.version)\"")
            let all = try await harness.call(
                .post, "/v1/users/gina/badges/clear", token: gina,
                headers: [.ifMatch: "\"\(now.version)\""], body: #"{"path": "root.chat", "force": true}"#)
            #expect(all.status == .ok, "\(all.text)")
            #expect(try all.tree().tree == nil)
            #expect(try all.tree().version > now.version)
            // Nothing is left waiting: the clear recomputed the user and released the mark.
            #expect(try await harness.scalar("SELECT count(DISTINCT user_id)::int FROM dirty_mark", as: Int.self) == 0)
        }
    }

    @Test("seen over HTTP: unseen drops to 0 with the counts kept; arrivals after the version seen stay unseen")
    func seenOverHTTP() async throws {
        try await APIHarness.with { harness in
            let hana = try await harness.token("hana")
            let message = { (id: String) in
                BadgeMutation(user: user("hana"), path: path("root.chat.c1"), operation: .addItem(ItemID(rawValue: id)!))
            }
            try await harness.apply([message("m1"), BadgeMutation(user: user("hana"), path: path("root.feed"), operation: .increment(by: 2))])
            let shown = try await harness.get("/v1/users/hana/badges", token: hana).tree()
            #expect(shown.tree?.unseen == 3 && shown.tree?.count == 3)
            let seen = try await harness.call(
                .post, "/v1/users/hana/badges/seen", token: hana, body: #"{"path": "root", "seen_version": \#(shown.version)}"#)
            #expect(seen.status == .ok, "\(seen.text)")
            let afterSeen = try seen.tree()
            #expect(afterSeen.tree?.count == 3 && afterSeen.tree?.unseen == 0, "\(seen.text)")

            // Arrivals after the seen are unseen, at every ancestor.
            try await harness.apply([message("m2"), BadgeMutation(user: user("hana"), path: path("root.feed"), operation: .increment(by: 1))])
            let later = try await harness.get("/v1/users/hana/badges", token: hana).tree()
            #expect(later.tree?.count == 5 && later.tree?.unseen == 2)
            #expect(later.tree?.children.map(\.unseen) == [1, 1])
            // A seen at the version shown before those arrivals leaves them unseen.
            let stale = try await harness.call(
                .post, "/v1/users/hana/badges/seen", token: hana, body: #"{"path": "root", "seen_version": \#(afterSeen.version)}"#)
            #expect(stale.status == .ok, "\(stale.text)")
            #expect(try await harness.get("/v1/users/hana/badges", token: hana).tree().tree?.unseen == 2)
            let future = try await harness.call(
                .post, "/v1/users/hana/badges/seen", token: hana, body: #"{"path": "root", "seen_version": \#(later.version + 3)}"#)
            #expect(future.status == .preconditionFailed && future.text.contains("version_changed"), "\(future.text)")
            // A seen of one branch leaves the other unseen.
            let chat = try await harness.call(
                .post, "/v1/users/hana/badges/seen", token: hana, headers: [.ifMatch: "\"\(later.version)\""], body: #"{"path": "root.chat"}"#)
            #expect(chat.status == .ok, "\(chat.text)")
            let final = try await harness.get("/v1/users/hana/badges", token: hana).tree()
            #expect(final.tree?.unseen == 1 && final.tree?.count == 5)
            // verify agrees with what the rollup wrote.
            let report = try await BadgeVerifier(store: harness.store).run(repair: false)
            #expect(report.mismatches == 0)
        }
    }

    @Test("an action id applies once: a repeated clear (no seen_version) leaves what arrived since; a refused one is not recorded")
    func repeatedActionID() async throws {
        try await APIHarness.with { harness in
            let ivan = try await harness.token("ivan")
            let increment = { (node: String) in BadgeMutation(user: user("ivan"), path: path(node), operation: .increment(by: 1)) }
            try await harness.apply([increment("root.chat.c1"), increment("root.chat.c2")])
            let body = #"{"path": "root.chat", "force": true, "action_id": "tap-1"}"#
            let first = try await harness.call(.post, "/v1/users/ivan/badges/clear", token: ivan, body: body)
            #expect(first.status == .ok && first.headers[.init("RedDot-Action-Repeated")!] == nil, "\(first.text)")
            #expect(try first.tree().tree == nil)
            try await harness.apply([increment("root.chat.c3")])
            // The answer was lost and the client sends the clear again: nothing more goes.
            let again = try await harness.call(.post, "/v1/users/ivan/badges/clear", token: ivan, body: body)
            #expect(again.status == .ok && again.headers[.init("RedDot-Action-Repeated")!] == "true", "\(again.text)")
            #expect(try again.tree().tree?.count == 1, "c3 arrived after the clear and stays")
            #expect(try await harness.get("/v1/users/ivan/badges", token: ivan).tree().tree?.count == 1)
            // Another user's action with the same id is their own.
            let jane = try await harness.token("jane")
            try await harness.apply([BadgeMutation(user: user("jane"), path: path("root.feed"), operation: .increment(by: 2))])
            let hers = try await harness.call(.post, "/v1/users/jane/badges/clear", token: jane, body: #"{"path": "root", "force": true, "action_id": "tap-1"}"#)
            #expect(try hers.status == .ok && hers.headers[.init("RedDot-Action-Repeated")!] == nil && hers.tree().tree?.shown == false, "\(hers.text)")
            // A clear refused for its version records nothing: the same id with a version the tree has applies.
            let now = try await harness.get("/v1/users/ivan/badges", token: ivan).tree()
            let refused = try await harness.call(
                .post, "/v1/users/ivan/badges/seen", token: ivan, body: #"{"path": "root", "seen_version": \#(now.version + 9), "action_id": "tap-2"}"#)
            #expect(refused.status == .preconditionFailed, "\(refused.text)")
            let seen = try await harness.call(
                .post, "/v1/users/ivan/badges/seen", token: ivan, body: #"{"path": "root", "seen_version": \#(now.version), "action_id": "tap-2"}"#)
            #expect(try seen.status == .ok && seen.headers[.init("RedDot-Action-Repeated")!] == nil && seen.tree().tree?.unseen == 0, "\(seen.text)")
            #expect(try await harness.scalar("SELECT count(*)::int FROM applied_action_generation WHERE user_id = 'ivan'", as: Int.self) == 2)
            // An id that is not one: 400 with the rule.
            let bad = try await harness.call(.post, "/v1/users/ivan/badges/clear", token: ivan, body: #"{"path": "root", "action_id": "a b"}"#)
            #expect(bad.status == .badRequest && bad.text.contains("action id"), "\(bad.text)")
            // The ids go with the users' event ids, a dedupe generation at a time: one generation
            // later tap-1 is still a repeat; two later it is gone, and applies again.
            _ = try await harness.store.pool.withConnection { connection in
                try IngestTransaction.rotateDedupeGeneration(startedBefore: Date().addingTimeInterval(60), on: connection)
            }
            let repeated = try await harness.call(.post, "/v1/users/ivan/badges/clear", token: ivan, body: body)
            #expect(repeated.status == .ok && repeated.headers[.init("RedDot-Action-Repeated")!] == "true", "\(repeated.text)")
            #expect(try await harness.scalar("SELECT count(*)::int FROM applied_action_generation WHERE user_id = 'ivan'", as: Int.self) == 2)
            _ = try await harness.store.pool.withConnection { connection in
                try IngestTransaction.rotateDedupeGeneration(startedBefore: Date().addingTimeInterval(60), on: connection)
            }
            #expect(try await harness.scalar("SELECT count(*)::int FROM applied_action_generation WHERE user_id = 'ivan'", as: Int.self) == 0)
            let anew = try await harness.call(.post, "/v1/users/ivan/badges/clear", token: ivan, body: body)
            #expect(anew.status == .ok && anew.headers[.init("RedDot-Action-Repeated")!] == nil, "\(anew.text)")
            // Ids of builds before migration 30 (in `applied_action`) are still repeats, and the
            // retention prune deletes them row by row.
            try await harness.execute("INSERT INTO applied_action (user_id, action_id, applied_at) VALUES ('ivan', 'tap-old', now()), ('ivan', 'tap-older', now() - interval '8 days')")
            let old = try await harness.call(.post, "/v1/users/ivan/badges/clear", token: ivan, body: #"{"path": "root", "action_id": "tap-old"}"#)
            #expect(old.status == .ok && old.headers[.init("RedDot-Action-Repeated")!] == "true", "\(old.text)")
            _ = try await harness.store.pool.withConnection { connection in
                try IngestTransaction.pruneAppliedEvents(olderThan: Date().addingTimeInterval(-7 * 86_400), limit: 100, on: connection)
            }
            #expect(try await harness.scalar("SELECT count(*)::int FROM applied_action", as: Int.self) == 1)
        }
    }

    @Test("readyz reports a schema behind this build")
    func schemaBehind() async throws {
        try await APIHarness.with { harness in
            let ready = try await harness.get("/readyz", token: nil)
            #expect(ready.status == .ok, "\(ready.text)")
            try await harness.execute("DELETE FROM reddot_schema_migrations WHERE version >= \(Migrator.requiredSchemaVersion)")
            let behind = try await harness.get("/readyz", token: nil)
            #expect(behind.status == .serviceUnavailable)
            #expect(behind.text.contains("run reddot migrate up"))
        }
    }

    @Test("migration 32 under a running server: its prepared statements are prepared again; a request meets at most a 503 with Retry-After, never a lasting error")
    func migrationUnderRunningServer() async throws {
        let database = try await TestDatabase.create(prefix: "apimig")
        let files = try Repository.migrationFiles()
        @Sendable func migrate(through version: Int) throws {
            let connection = try PGConnection.connect(database.configuration, logger: TestServer.logger)
            defer { connection.close() }
            _ = try Migrator(files: files.filter { $0.version <= version }, logger: TestServer.logger).up(on: connection)
        }
        do {
            try migrate(through: 31)
            try await APIHarness.with(databaseURL: database.url) { harness in
                let erin = try await harness.token("erin")
                try await harness.apply([
                    BadgeMutation(user: user("erin"), path: path("root.chat.c1"), operation: .increment(by: 3)),
                    BadgeMutation(user: user("erin"), path: path("root.news.n1"), operation: .increment(by: 2)),
                ])
                // Every connection of the server's pool prepares its statements: reads at once,
                // and an action.
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for _ in 0..<8 {
                        group.addTask {
                            let status = try await harness.get("/v1/users/erin/badges", token: erin).status
                            #expect(status == .ok)
                        }
                    }
                    try await group.waitForAll()
                }
                let seen = try await harness.call(.post, "/v1/users/erin/badges/seen", token: erin, body: #"{"path": "root.chat"}"#)
                #expect(seen.status == .ok, "\(seen.text)")

                try migrate(through: 32)

                // Each answer is the tree, or a 503 that asks to try again; a few tries each.
                func untilOK(_ request: () async throws -> TestResponse) async throws -> TestResponse {
                    for _ in 0..<40 {
                        let response = try await request()
                        if response.status == .ok { return response }
                        #expect(response.status == .serviceUnavailable && response.headers[.retryAfter] == "1", "\(response.status) \(response.text)")
                        #expect(response.errorCode == "unavailable")
                    }
                    throw APITestError("no answer after 40 tries")
                }
                for _ in 0..<8 {
                    let tree = try await untilOK { try await harness.get("/v1/users/erin/badges", token: erin) }.tree()
                    #expect(tree.tree?.count == 5 && tree.tree?.unseen == 2)
                }
                let cleared = try await untilOK {
                    try await harness.call(.post, "/v1/users/erin/badges/clear", token: erin, body: #"{"path": "root.news", "force": true}"#)
                }.tree()
                #expect(cleared.tree == nil)  // the answer is the cleared node's
                let after = try await untilOK { try await harness.get("/v1/users/erin/badges", token: erin) }.tree()
                #expect(after.tree?.count == 3 && after.version == cleared.version)
            }
        } catch {
            await database.drop()
            throw error
        }
        await database.drop()
    }

    @Test("a database outage answers 503 with Retry-After, quickly, never a hang")
    func databaseOutage() async throws {
        try await APIHarness.with(
            auth: AuthConfiguration(insecureNoAuth: true), databaseURL: "postgresql://reddot@127.0.0.1:1/none?connect_timeout=2"
        ) { harness in
            let started = ContinuousClock.now
            let response = try await harness.get("/v1/users/alice/badges", token: nil)
            #expect(response.status == .serviceUnavailable)
            #expect(response.headers[.retryAfter] == "1")
            #expect(response.errorCode == "unavailable")
            #expect(ContinuousClock.now - started < .seconds(5))
            #expect(try await harness.get("/readyz", token: nil).status == .serviceUnavailable)
            #expect(try await harness.get("/healthz", token: nil).status == .ok)
        }
    }
}
