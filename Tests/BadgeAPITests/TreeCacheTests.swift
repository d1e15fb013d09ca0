import BadgeCore
import BadgeStore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import LibPQ
import NIOCore
import TestSupport
import Synchronization
import Testing

@testable import BadgeAPI

@Suite("The bounded FIFO map behind the caches")
struct BoundedCacheTests {
    @Test("random inserts and removals agree with a plain model: contents, total cost, oldest evicted first")
    func againstModel() {
        for seed in UInt64(1)...UInt64(20) {
            var generator = SeededRandom(seed: seed)
            let budget = Int.random(in: 5...60, using: &generator)
            var cache = BoundedCache<Int, Int>(budget: budget)
            // The model: insertion order of live keys, their values and costs.
            var order: [Int] = []
            var model: [Int: (value: Int, cost: Int)] = [:]
            for step in 0..<2_000 {
                let key = Int.random(in: 0..<40, using: &generator)
                if Int.random(in: 0..<4, using: &generator) == 0 {
                    cache.remove(key)
                    model[key] = nil
                    order.removeAll { $0 == key }
                } else {
                    let cost = Int.random(in: 1...8, using: &generator)
                    cache.insert(step, for: key, cost: cost)
                    model[key] = nil
                    order.removeAll { $0 == key }
                    if cost > budget { continue }  // never stored, and evicts nothing
                    var total = model.values.reduce(0) { $0 + $1.cost }
                    while total + cost > budget, let oldest = order.first {
                        total -= model[oldest]!.cost
                        model[oldest] = nil
                        order.removeFirst()
                    }
                    model[key] = (step, cost)
                    order.append(key)
                }
                #expect(cache.count == model.count, "seed \(seed) step \(step)")
                #expect(cache.cost == model.values.reduce(0) { $0 + $1.cost })
                #expect(cache.cost <= budget)
            }
            for key in 0..<40 { #expect(cache[key] == model[key]?.value, "seed \(seed) key \(key)") }
        }
    }

    @Test("a zero budget holds nothing; an entry costing more than the budget is not stored")
    func limits() {
        var none = BoundedCache<String, Int>(budget: 0)
        none.insert(1, for: "a")
        #expect(none.count == 0)
        var small = BoundedCache<String, Int>(budget: 10)
        small.insert(1, for: "a", cost: 4)
        small.insert(2, for: "huge", cost: 11)
        #expect(small["a"] == 1)
        #expect(small["huge"] == nil)
    }
}

@Suite("The tree cache's coherence rules")
struct TreeCacheUnitTests {
    let alice = user("alice")
    let json = ByteBuffer(string: "{}")

    func serving(_ cache: TreeCache) -> TreeCache {
        cache.invalidateAll(listening: true)
        return cache
    }

    @Test("nothing is served or stored until the listener is connected, nor after it stopped")
    func onlyWhileListening() throws {
        let cache = TreeCache(budgetBytes: 1 << 20, maximumAge: .seconds(60))
        #expect(cache.ticket(for: alice) == nil)
        cache.invalidateAll(listening: true)
        let ticket = try #require(cache.ticket(for: alice))
        cache.store(alice, view: .test(3), json: json, ticket: ticket)
        #expect(cache.lookup(alice)?.version == 3)
        cache.invalidateAll(listening: false)
        #expect(cache.lookup(alice) == nil)
        #expect(cache.ticket(for: alice) == nil)
    }

    @Test("an answer read before a notification is not stored after it")
    func ticketsGoStale() throws {
        let cache = serving(TreeCache(budgetBytes: 1 << 20, maximumAge: .seconds(60)))
        let bob = user("bob")
        let before = try #require(cache.ticket(for: alice))
        let bobBefore = try #require(cache.ticket(for: bob))
        cache.invalidate(alice)
        cache.store(alice, view: .test(1), json: json, ticket: before)
        #expect(cache.lookup(alice) == nil)
        // A broadcast or a reconnection stales every ticket.
        cache.invalidateAll(listening: true)
        cache.store(bob, view: .test(1), json: json, ticket: bobBefore)
        #expect(cache.lookup(bob) == nil)
        // A fresh ticket stores; an older version never replaces a newer one.
        cache.store(alice, view: .test(5), json: json, ticket: try #require(cache.ticket(for: alice)))
        cache.store(alice, view: .test(4), json: json, ticket: try #require(cache.ticket(for: alice)))
        #expect(cache.lookup(alice)?.version == 5)
        cache.invalidate(alice)
        #expect(cache.lookup(alice) == nil)
    }

    @Test("a notified entry is not served but can be followed: its view and a ticket, which a later notification stales")
    func staleEntriesAreFollowed() throws {
        let cache = serving(TreeCache(budgetBytes: 1 << 20, maximumAge: .seconds(60)))
        #expect(cache.staleView(of: alice) == nil)
        cache.store(alice, view: .test(3), json: json, ticket: try #require(cache.ticket(for: alice)))
        #expect(cache.staleView(of: alice) == nil)  // current: served, not followed
        cache.invalidate(alice)
        #expect(cache.lookup(alice) == nil)
        let (stale, readAt, ticket) = try #require(cache.staleView(of: alice))
        #expect(stale.version == 3)
        // Brought current, aging from the last read of the database.
        cache.store(alice, view: .test(4), json: json, ticket: ticket, readAt: readAt)
        #expect(cache.lookup(alice)?.version == 4)
        // A notification between the follow's start and its store: nothing stored.
        cache.invalidate(alice)
        let (_, _, early) = try #require(cache.staleView(of: alice))
        cache.invalidate(alice)
        cache.store(alice, view: .test(5), json: json, ticket: early)
        #expect(cache.lookup(alice) == nil)
        #expect(cache.staleView(of: alice)?.view.version == 4)
        // A flush drops stale entries too.
        cache.invalidateAll(listening: true)
        #expect(cache.staleView(of: alice) == nil)
    }

    @Test("a client that has seen a later version, or an entry past its age, is not answered from the cache")
    func minimumVersionAndAge() async throws {
        let cache = serving(TreeCache(budgetBytes: 1 << 20, maximumAge: .milliseconds(200)))
        cache.store(alice, view: .test(7), json: json, ticket: try #require(cache.ticket(for: alice)))
        #expect(cache.lookup(alice, minimumVersion: 7)?.version == 7)
        #expect(cache.lookup(alice, minimumVersion: 8) == nil)
        try await Task.sleep(for: .milliseconds(300))
        #expect(cache.lookup(alice) == nil)
    }

    @Test("the byte budget bounds the cache; the oldest answers go first")
    func budget() throws {
        let cache = serving(TreeCache(budgetBytes: 10_000, maximumAge: .seconds(60)))
        // 1,000 bytes each: the JSON counts twice (the entry keeps the view too), plus the overhead.
        let body = ByteBuffer(string: String(repeating: "x", count: 400))
        for index in 0..<25 {
            let name = user("u\(index)")
            cache.store(name, view: .test(1), json: body, ticket: try #require(cache.ticket(for: name)))
        }
        #expect((0..<15).allSatisfy { cache.lookup(user("u\($0)")) == nil })
        #expect((15..<25).allSatisfy { cache.lookup(user("u\($0)")) != nil })
    }
}

@Suite("The tree cache behind the API (real PostgreSQL, real notifications)", .serialized)
struct TreeCacheAPITests {
    static let cacheBytes = 8 << 20

    /// GETs the whole tree until `accept` holds, for up to `limit`; returns the last answer.
    func poll(
        _ harness: APIHarness, _ uri: String, token: String, within limit: Duration = .seconds(5),
        until accept: (UserBadgeTree) -> Bool
    ) async throws -> UserBadgeTree {
        let deadline = ContinuousClock.now + limit
        var answer = try await harness.get(uri, token: token).tree()
        while !accept(answer), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
            answer = try await harness.get(uri, token: token).tree()
        }
        return answer
    }

    /// GETs the whole tree until an answer comes from the cache (a read that overlapped a
    /// notification is not stored, so the first one may not be); returns that answer.
    func cachedRead(_ harness: APIHarness, _ uri: String, token: String) async throws -> TestResponse {
        let deadline = ContinuousClock.now + .seconds(5)
        while true {
            let before = harness.api.hub.treeCacheStatistics.hits
            let answer = try await harness.get(uri, token: token)
            if harness.api.hub.treeCacheStatistics.hits > before || ContinuousClock.now > deadline { return answer }
        }
    }

    /// Waits for a first wake (up to 10 s), then until none came for 500 ms.
    static func drain(_ wakes: AsyncStream<ChangeHub.Wake>) async {
        let seen = WakeCount()
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await wake in wakes where wake == .change { seen.add() }
            }
            group.addTask {
                let deadline = ContinuousClock.now + .seconds(10)
                var quietSince = ContinuousClock.now
                var last = 0
                while ContinuousClock.now < deadline {
                    try? await Task.sleep(for: .milliseconds(50))
                    let count = seen.count
                    if count != last {
                        last = count
                        quietSince = ContinuousClock.now
                    } else if count > 0, ContinuousClock.now - quietSince > .milliseconds(500) {
                        break
                    }
                }
            }
            await group.next()
            group.cancelAll()
        }
    }

    /// A counter of wakes shared between two tasks.
    final class WakeCount: Sendable {
        private let value = Mutex(0)
        func add() { value.withLock { $0 += 1 } }
        var count: Int { value.withLock { $0 } }
    }

    @Test("a repeated read comes from the cache; a change shows once notified; a clear through the API shows at once")
    func readsAndChanges() async throws {
        try await APIHarness.with(treeCacheBytes: Self.cacheBytes) { harness in
            let dan = user("dan")
            let hub = harness.api.hub
            // The write's notification can come late on a busy machine and make a cached entry
            // stale between the two reads (a CI run, 2026-12-01): wait for it, and for quiet.
            let wakes = hub.subscribe(dan)
            try await harness.apply([BadgeMutation(user: dan, path: path("root.chat.a"), operation: .increment(by: 2))])
            await Self.drain(wakes.stream)
            wakes.cancel()
            let token = try await harness.token("dan")
            let first = try await cachedRead(harness, "/v1/users/dan/badges", token: token)
            let before = hub.treeCacheStatistics
            let second = try await harness.get("/v1/users/dan/badges", token: token)
            #expect(hub.treeCacheStatistics.hits == before.hits + 1)
            #expect(second.text == first.text)
            #expect(second.headers[.eTag] == first.headers[.eTag])
            var headers = HTTPFields()
            headers[.ifNoneMatch] = first.headers[.eTag]
            #expect(try await harness.get("/v1/users/dan/badges", token: token, headers: headers).status == .notModified)

            // A change from another writer (the rollup's path): visible once its notification is
            // in (milliseconds), not when the entry grows too old (60 s here, the default): the
            // poll gives up after 20 s, which a loaded CI machine never needed.
            let version = try first.tree().version
            try await harness.apply([BadgeMutation(user: dan, path: path("root.chat.b"), operation: .increment(by: 3))])
            let changed = try await poll(harness, "/v1/users/dan/badges", token: token, within: .seconds(20)) { $0.version > version }
            #expect(changed.tree?.count == 5)

            // A clear through this server: the next read shows it, without waiting.
            let cleared = try await harness.call(.post, "/v1/users/dan/badges/clear", token: token, body: #"{"path": "root.chat.b"}"#)
            #expect(cleared.status == .ok)
            let after = try await harness.get("/v1/users/dan/badges", token: token).tree()
            #expect(after.tree?.count == 2)
            #expect(after.version == (try cleared.tree().version))
        }
    }

    @Test("a client ahead of the cache reads PostgreSQL; a writer that does not notify is seen after the maximum age")
    func staleness() async throws {
        try await APIHarness.with(treeCacheBytes: Self.cacheBytes, treeCacheMaximumAge: .seconds(3)) { harness in
            let eve = user("eve")
            try await harness.apply([BadgeMutation(user: eve, path: path("root.a"), operation: .increment(by: 1))])
            let token = try await harness.token("eve")
            let cached = try await cachedRead(harness, "/v1/users/eve/badges", token: token).tree().version
            // Hand-made SQL: a version bump without NOTIFY.
            try await harness.execute("UPDATE user_version SET version = version + 10 WHERE user_id = $1", ["eve"])
            #expect(try await harness.get("/v1/users/eve/badges", token: token).tree().version == cached)
            // A client that saw the later version (from another server) is not sent back in time.
            var headers = HTTPFields()
            headers[.ifNoneMatch] = "\"\(cached + 10)\""
            let ahead = try await harness.get("/v1/users/eve/badges", token: token, headers: headers)
            #expect(ahead.status == .notModified)
            #expect(ahead.headers[.eTag] == "\"\(cached + 10)\"")
            // Others see it once the cached answer is older than its maximum age.
            let aged = try await poll(harness, "/v1/users/eve/badges", token: token, within: .seconds(10)) { $0.version != cached }
            #expect(aged.version == cached + 10)
        }
    }

    @Test("a broadcast, and a reconnection of the listener (notifications may be lost), empty the cache")
    func flushes() async throws {
        try await APIHarness.with(treeCacheBytes: Self.cacheBytes) { harness in
            try await harness.apply([
                BadgeMutation(user: user("fay"), path: path("root.a"), operation: .increment(by: 1)),
                BadgeMutation(user: user("gus"), path: path("root.a"), operation: .increment(by: 1)),
            ])
            let fay = try await harness.token("fay"), gus = try await harness.token("gus")
            let fayVersion = try await cachedRead(harness, "/v1/users/fay/badges", token: fay).tree().version
            let gusVersion = try await cachedRead(harness, "/v1/users/gus/badges", token: gus).tree().version

            try await harness.broadcast("cache-b1", at: "root.news", count: 1)
            let fayNews = try await poll(harness, "/v1/users/fay/badges", token: fay) { $0.version > fayVersion }
            let gusNews = try await poll(harness, "/v1/users/gus/badges", token: gus) { $0.version > gusVersion }
            #expect(fayNews.tree?.count == 2)
            #expect(gusNews.tree?.count == 2)

            // A change the listener cannot have heard of, then the listener's connection drops.
            _ = try await cachedRead(harness, "/v1/users/fay/badges", token: fay)
            try await harness.execute("UPDATE user_version SET version = version + 10 WHERE user_id = $1", ["fay"])
            #expect(try await harness.get("/v1/users/fay/badges", token: fay).tree().version == fayNews.version)
            try await harness.execute(
                """
                SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                WHERE datname = current_database() AND query = 'LISTEN \(BadgeStore.changeChannel)'
                """)
            let reconnected = try await poll(harness, "/v1/users/fay/badges", token: fay, within: .seconds(10)) {
                $0.version == fayNews.version + 10
            }
            #expect(reconnected.version == fayNews.version + 10)
        }
    }

    @Test("readers racing a writer never leave a stale tree behind in the cache")
    func racingReaders() async throws {
        try await APIHarness.with(treeCacheBytes: Self.cacheBytes) { harness in
            let hal = user("hal")
            try await harness.apply([BadgeMutation(user: hal, path: path("root.a"), operation: .increment(by: 1))])
            let token = try await harness.token("hal")
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        var last: Int64 = 0
                        for _ in 0..<60 {
                            let version = try await harness.get("/v1/users/hal/badges", token: token).tree().version
                            #expect(version >= last, "a reader went back in time")
                            last = version
                        }
                    }
                }
                group.addTask {
                    for _ in 0..<40 {
                        try await harness.apply([BadgeMutation(user: hal, path: path("root.a"), operation: .increment(by: 1))])
                    }
                }
                try await group.waitForAll()
            }
            let stored = try await harness.pool.withConnection { connection in
                try BadgeStore.readAggregates(for: hal, on: connection)
            }
            let settled = try await poll(harness, "/v1/users/hal/badges", token: token) { $0.version == stored.version }
            #expect(settled.version == stored.version)
            #expect(settled.tree?.count == 41)
            // Settled means settled: no stale answer comes back later.
            try await Task.sleep(for: .milliseconds(200))
            for _ in 0..<20 {
                #expect(try await harness.get("/v1/users/hal/badges", token: token).tree().version == stored.version)
            }
        }
    }

    @Test("a broadcast change rebases cached trees and open streams without reading them; dismissals stay dismissed")
    func broadcastsRebase() async throws {
        try await APIHarness.with(treeCacheBytes: Self.cacheBytes) { harness in
            let fay = user("fay")
            let token = try await harness.token("fay")
            try await harness.apply([BadgeMutation(user: fay, path: path("root.chat.c1"), operation: .increment(by: 2))])
            try await harness.broadcast("b1", at: "root.news", count: 1)
            _ = try await poll(harness, "/v1/users/fay/badges", token: token) { $0.tree?.count == 3 }
            // Fay dismisses b1. Its notification empties fay's cache entry whenever it arrives
            // (late on a busy machine): wait for it, and for quiet, before counting misses.
            let wakes = harness.api.hub.subscribe(fay)
            let cleared = try await harness.call(.post, "/v1/users/fay/badges/clear", token: token, body: #"{"path": "root.news"}"#)
            #expect(cleared.status == .ok)
            await Self.drain(wakes.stream)
            wakes.cancel()
            let dismissed = try await cachedRead(harness, "/v1/users/fay/badges", token: token).tree()
            #expect(dismissed.tree?.count == 2)
            let port = try #require(harness.client.port)
            let stream = try EventStreamClient(port: port, uri: "/v1/users/fay/badges/stream", headers: ["Authorization": "Bearer \(token)"])
            #expect(await stream.next()?.name == "snapshot")

            // A new broadcast: the stream gets it and the cached tree shows it, with no tree read.
            let reads = harness.api.hub.treeCacheStatistics
            try await harness.broadcast("b2", at: "root.promo", count: 2)
            let change = try #require(await stream.next())
            #expect(change.name == "change" && change.data.contains(#""path":"root.promo""#) && !change.data.contains("root.news"))
            let rebased = try await poll(harness, "/v1/users/fay/badges", token: token) { $0.version > dismissed.version }
            #expect(rebased.version == dismissed.version + 1)
            #expect(rebased.tree?.count == 4)
            #expect(rebased.tree?.children.map(\.path.rawValue) == ["root.chat", "root.promo"])
            #expect(harness.api.hub.treeCacheStatistics.misses == reads.misses, "served from the rebased cache entry")
            // What PostgreSQL says, read directly.
            let stored = try await harness.pool.withConnection { try BadgeStore.readAggregates(for: fay, on: $0) }
            #expect(stored.version == rebased.version && stored.aggregates[.root]?.count == 4)

            // b1 withdrawn for everyone: fay's version moves, her tree does not.
            try await harness.pool.withTransaction { connection in
                try BadgeStore.lockBroadcastsExclusive(on: connection)
                _ = try connection.query(
                    PGStatement(
                        "test.withdraw",
                        """
                        UPDATE broadcast SET withdrawn_at = now(), withdrawn_in = (SELECT version FROM broadcast_version) + 1
                        WHERE event_id = 'b1'
                        """, prepared: false))
                try BadgeStore.bumpBroadcastVersion(on: connection)
            }
            let after = try await poll(harness, "/v1/users/fay/badges", token: token) { $0.version > rebased.version }
            #expect(after.tree == rebased.tree)
            #expect(await stream.next(timeout: .milliseconds(700)) == nil, "nothing fay sees changed")
        }
    }
}

extension UserView {
    /// A whole-tree view at own version `version` (no broadcasts), for the cache's own tests.
    static func test(_ version: Int64) -> UserView {
        UserView(path: .root, depth: nil, userVersion: version, broadcastVersion: 0, aggregates: [:], broadcasts: [:], dismissed: [])
    }
}
