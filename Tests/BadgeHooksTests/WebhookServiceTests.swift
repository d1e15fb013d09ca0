import BadgeCore
import BadgeStore
import Foundation
import HTTPTypes
import Hummingbird
import LibPQ
import Logging
import RdKafka
import ServiceLifecycle
import Synchronization
import TestSupport
import Testing

@testable import BadgeHooks

/// An HTTP endpoint on loopback that records every delivery, verifies its signature as a
/// Standard Webhooks receiver does (401 when it fails: `/stranger` holds another key than the
/// sender's), and answers as its path says: `/ok` 200; `/flaky` 503 with `Retry-After: 1` on a
/// delivery's first try, then 200; `/down` 500 until `downIsUp`.
final class Receiver: Sendable {
    struct Got: Sendable {
        var endpoint: String
        var id: String
        var timestamp: Int64
        var signature: String
        var body: String
        var at: ContinuousClock.Instant
    }

    let got = Mutex<[Got]>([])
    let downIsUp = Atomic<Bool>(false)
    let key: [UInt8]

    init(key: [UInt8]) { self.key = key }

    func requests(_ endpoint: String) -> [Got] { got.withLock { $0.filter { $0.endpoint == endpoint } } }

    func answer(_ request: Got) -> Response {
        let earlier = got.withLock { received in
            defer { received.append(request) }
            return received.filter { $0.id == request.id }.count
        }
        let key = request.endpoint == "stranger" ? Array(self.key.reversed()) : self.key
        guard WebhookSignature.verify(header: request.signature, id: request.id, timestamp: request.timestamp, body: request.body, key: key) else {
            return Response(status: .unauthorized)
        }
        switch request.endpoint {
        case "ok": return Response(status: .ok)
        case "flaky": return earlier == 0 ? Response(status: .serviceUnavailable, headers: [.retryAfter: "1"]) : Response(status: .noContent)
        default: return downIsUp.load(ordering: .relaxed) ? Response(status: .ok) : Response(status: .internalServerError)
        }
    }

    /// Serves until the task is cancelled; returns once it listens, with its port.
    func start(logger: Logger) async throws -> (port: Int, task: Task<Void, any Error>) {
        let router = Router()
        router.post(":endpoint") { request, context -> Response in
            let body = try await request.body.collect(upTo: 1 << 20)
            let got = Got(
                endpoint: context.parameters.get("endpoint") ?? "", id: request.headers[HTTPField.Name("webhook-id")!] ?? "",
                timestamp: Int64(request.headers[HTTPField.Name("webhook-timestamp")!] ?? "") ?? 0,
                signature: request.headers[HTTPField.Name("webhook-signature")!] ?? "", body: String(buffer: body), at: .now)
            return self.answer(got)
        }
        let (stream, continuation) = AsyncStream.makeStream(of: Int.self)
        let app = Application(
            router: router, configuration: ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in continuation.yield(channel.localAddress?.port ?? 0) }, logger: logger)
        return await LoopbackTLS.run(app, ports: stream)
    }
}

@Suite("Webhooks end to end: the feed on the mock cluster, a real PostgreSQL, an endpoint on loopback")
struct WebhookServiceTests {
    static func record(_ user: String, own: Int64, changed: [(String, Bool, Int64, Int64)], root: (Int64, Int64)) -> KafkaOutgoingRecord {
        KafkaOutgoingRecord(
            topic: "", key: Array(user.utf8), payload: Array(WebhookUnitTests.userRecord(user, own: own, changed: changed, root: root).utf8))
    }

    @Test(
        "signed deliveries per subscription, each once though its record came twice; 503 + Retry-After and 500 are retried; the last try's failure is dead until replayed"
    )
    func endToEnd() async throws {
        var logger = Logger(label: "reddot.test.webhooks")
        logger.logLevel = ProcessInfo.processInfo.environment["REDDOT_TEST_LOG"].flatMap(Logger.Level.init(rawValue:)) ?? .error
        let cluster = try KafkaMockCluster(logger: logger)
        let topic = "changes-\(UInt32.random(in: 0...UInt32.max))"
        try cluster.createTopic(topic, partitions: 2)
        let migrated = try await MigratedDatabase.create(prefix: "hooks", logger: logger)
        let secret = WebhookSubscription.makeSecret()
        let key = try #require(WebhookSubscription.key(of: secret))
        let receiver = Receiver(key: key)
        let (port, serving) = try await receiver.start(logger: logger)
        defer { serving.cancel() }

        let subscriptions = try [
            WebhookSubscription(id: "crm", url: "http://127.0.0.1:\(port)/ok", secret: secret, paths: ["root.chat"], kinds: ["cleared", "root"]),
            WebhookSubscription(id: "flaky", url: "http://127.0.0.1:\(port)/flaky", secret: secret, paths: ["root"], kinds: ["root"]),
            WebhookSubscription(id: "down", url: "http://127.0.0.1:\(port)/down", secret: secret, paths: ["root"], kinds: ["root"]),
            WebhookSubscription(id: "bc", url: "http://127.0.0.1:\(port)/ok", secret: secret, paths: ["root"], kinds: ["broadcasts"]),
            WebhookSubscription(id: "stranger", url: "http://127.0.0.1:\(port)/stranger", secret: secret, paths: ["root"], kinds: ["root"]),
        ]
        try await migrated.pool.withConnection { connection in
            for subscription in subscriptions { try WebhookStore.put(subscription, on: connection) }
        }

        let producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: cluster.bootstrapServers), logger: logger)
        var records = [
            Self.record("ann", own: 1, changed: [("root", true, 2, 2), ("root.chat", true, 2, 2), ("root.chat.c1", true, 2, 2)], root: (2, 2)),
            Self.record("ann", own: 2, changed: [("root", false, 0, 0), ("root.chat", false, 0, 0), ("root.chat.c1", false, 0, 0)], root: (0, 0)),
            Self.record("ann", own: 2, changed: [("root", false, 0, 0), ("root.chat", false, 0, 0), ("root.chat.c1", false, 0, 0)], root: (0, 0)),
            Self.record("bob", own: 1, changed: [("root", true, 1, 1), ("root.feed", true, 1, 1)], root: (1, 1)),
            KafkaOutgoingRecord(topic: "", key: Array("*".utf8), payload: Array(#"{"type":"broadcasts","version":1,"previous_version":0,"added":[],"withdrawn":[],"at":"2026-11-27T10:00:00.000+00:00"}"#.utf8)),
            KafkaOutgoingRecord(topic: "", key: Array("carol".utf8), payload: nil),
            KafkaOutgoingRecord(topic: "", key: Array("x".utf8), payload: Array("not json".utf8)),
        ]
        for index in records.indices { records[index].topic = topic }
        for record in records { _ = try await producer.send(record) }

        var kafka = KafkaConfiguration(bootstrapServers: cluster.bootstrapServers)
        kafka.set("session.timeout.ms", "6000")
        kafka.set("heartbeat.interval.ms", "500")
        let configuration = WebhookConfiguration(kafka: kafka, topic: topic, group: "hooks-\(topic)", maximumAttempts: 3, firstRetryDelay: .seconds(1))
        let service = WebhookService(configuration: configuration, pool: migrated.pool, logger: logger)
        let group = ServiceGroup(services: [service], gracefulShutdownSignals: [], logger: logger)
        let running = Task { try await group.run() }

        func delivered() async throws -> [String: Int] {
            try await migrated.pool.withConnection { connection in
                var counts: [String: Int] = [:]
                for state in ["pending", "delivered", "dead"] {
                    counts[state] = try WebhookStore.list(state: state, subscription: nil, limit: 1000, on: connection).count
                }
                return counts
            }
        }
        // crm: ann's root at 1, her clear and root at 2, bob's root; flaky, down and stranger: 3 roots each; bc: 1.
        let settled = ContinuousClock.now + .seconds(60)
        var counts: [String: Int] = [:]
        while ContinuousClock.now < settled {
            counts = try await delivered()
            if counts["delivered"] == 8 && counts["dead"] == 6 { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(counts == ["pending": 0, "delivered": 8, "dead": 6], "\(counts)")

        // Every request is signed for its id, timestamp and body, with a timestamp of now; the
        // receiver that holds another key refused each (401), and they died of it.
        let all = receiver.got.withLock { $0 }
        for request in all {
            #expect(WebhookSignature.verify(header: request.signature, id: request.id, timestamp: request.timestamp, body: request.body, key: key), "\(request)")
        }
        let refused = try await migrated.pool.withConnection { try WebhookStore.list(state: "dead", subscription: "stranger", limit: 10, on: $0) }
        #expect(refused.count == 3 && refused.allSatisfy { $0.lastError == "HTTP 401" }, "\(refused)")
        let crm = receiver.requests("ok").filter { !$0.body.contains("broadcasts.changed") }
        #expect(crm.map { WebhookUnitTests.data($0.body) }.sorted() == [
            #"{"own_version":1,"previous_root":null,"root":{"count":1,"unseen":1},"user":"bob","version":1}"#,
            #"{"own_version":1,"previous_root":null,"root":{"count":2,"unseen":2},"user":"ann","version":1}"#,
            #"{"own_version":2,"paths":["root.chat","root.chat.c1"],"user":"ann","version":2}"#,
            #"{"own_version":2,"previous_root":{"count":2,"unseen":2},"root":{"count":0,"unseen":0},"user":"ann","version":2}"#,
        ].sorted(), "each once, though ann's version 2 came twice")
        #expect(receiver.requests("ok").filter { $0.body.contains(#""type":"broadcasts.changed""#) }.count == 1)
        // flaky: each delivery's second try, with the same id, waited out the Retry-After.
        let flaky = Dictionary(grouping: receiver.requests("flaky"), by: \.id)
        #expect(flaky.count == 3 && flaky.values.allSatisfy { $0.count == 2 }, "\(flaky.mapValues(\.count))")
        for tries in flaky.values where tries.count == 2 {
            #expect(tries[1].at - tries[0].at >= .milliseconds(900), "\(tries[1].at - tries[0].at)")
        }
        // down: three tries each (1 s, then 4 s apart), then dead with the reason.
        let down = Dictionary(grouping: receiver.requests("down"), by: \.id)
        #expect(down.count == 3 && down.values.allSatisfy { $0.count == 3 }, "\(down.mapValues(\.count))")
        let dead = try await migrated.pool.withConnection { try WebhookStore.list(state: "dead", subscription: "down", limit: 10, on: $0) }
        #expect(dead.count == 3 && dead.allSatisfy { $0.attempts == 3 && $0.lastError == "HTTP 500" }, "\(dead)")

        // Replayed once the endpoint is back: delivered, with the same ids.
        receiver.downIsUp.store(true, ordering: .relaxed)
        let replayed = try await migrated.pool.withConnection { try WebhookStore.replay(id: nil, user: nil, subscription: "down", on: $0) }
        #expect(replayed == 3)
        let backBy = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < backBy, try await delivered()["delivered"] != 11 { try await Task.sleep(for: .milliseconds(200)) }
        #expect(try await delivered() == ["pending": 0, "delivered": 11, "dead": 3])
        #expect(Set(receiver.requests("down").map(\.id)) == Set(down.keys))

        // A second reader of the whole feed (another group) makes nothing new.
        let again = WebhookService(
            configuration: WebhookConfiguration(kafka: kafka, topic: topic, group: "again-\(topic)", maximumAttempts: 3), pool: migrated.pool,
            logger: logger)
        let groupAgain = ServiceGroup(services: [again], gracefulShutdownSignals: [], logger: logger)
        let runningAgain = Task { try await groupAgain.run() }
        let requestsBefore = receiver.got.withLock { $0.count }
        try await Task.sleep(for: .seconds(4))
        #expect(receiver.got.withLock { $0.count } == requestsBefore)
        #expect(try await delivered() == ["pending": 0, "delivered": 11, "dead": 3])

        await groupAgain.triggerGracefulShutdown()
        await group.triggerGracefulShutdown()
        try await runningAgain.value
        try await running.value
        try await onThread { producer.close() }
        await migrated.drop()
        try await onThread { cluster.close() }
    }
}
