import Foundation
import RedDotClient
import Synchronization
import Testing

/// The client's transport against a scripted server: answers a real RedDot server never gives
/// (an empty 200, a proxy's page, a silent stream, a refused token on every request).
@Suite("RedDotClient's transport against a scripted server", .serialized)
struct TransportTests {
    static let tree = #"{"user":"ann","version":3,"tree":{"path":"root","shown":true,"count":2,"unseen":0,"text":"2","icon":null,"children":[{"path":"root.chat","shown":true,"count":2,"unseen":0,"text":"2","icon":null,"children":[]}]}}"#

    static let quickPolls = RedDotClient.Polling(interval: .milliseconds(100), toleranceWindow: .milliseconds(100))

    static func eventually(seconds: Double = 10, _ condition: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
        while ContinuousClock.now < deadline {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return condition()
    }

    /// Waits until `server` has received no request for a second (at most 30 s), and says
    /// whether it went quiet. A request a stopped client had on the wire is still read and
    /// answered by the server: the tests that bring their server back after a stop wait for
    /// that first, so that such a request meets the server still down, as it would have.
    static func quiet(_ server: ScriptedServer) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(30)
        var (count, since) = (server.requests.count, ContinuousClock.now)
        while ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(50))
            let now = server.requests.count
            if now != count {
                (count, since) = (now, ContinuousClock.now)
            } else if ContinuousClock.now - since >= .seconds(1) {
                return true
            }
        }
        return false
    }

    @Test("polling: an empty 200, a 200 that is not a tree, or a 304 never hides a dot")
    func emptyAnswersHideNothing() async throws {
        let server = try ScriptedServer { _, index in
            switch index {
            case 0: .json(200, Self.tree)
            case 1: .json(200, "")
            case 2: .json(200, "{}")
            case 3: .json(200, #"{"user":"ann","version":2,"tree":null}"#)  // older: ignored
            default: .notModified
            }
        }
        defer { server.stop() }
        // Unreadable answers are failures, retried after a backoff: a short one keeps the test short.
        let options = RedDotClient.Options(transport: .polling(Self.quickPolls), reconnectDelay: .milliseconds(50))
        let client = RedDotClient(server: server.url, user: "ann", options: options)
        let calls = ClientCalls()
        let observation = try client.observe("root.chat") { calls.add($0) }
        defer { observation.cancel() }
        let started = ContinuousClock.now
        let states = Mutex<[String]>([])
        let watcher = client.observeConnection { state in states.withLock { $0.append("\(ContinuousClock.now - started): \(state)") } }
        defer { watcher.cancel() }
        client.start()
        defer { client.stop() }
        #expect(
            await Self.eventually(seconds: 60) { server.requests.count >= 7 },
            "requests: \(server.requests.count); connection: \(states.withLock { $0 })")
        #expect(client.badge("root.chat").count == 2 && client.badge("root.chat").shown)
        #expect(calls.all.map(\.count) == [0, 2], "the empty, unreadable, older and 304 answers cost no callback")
        // Each poll after the first sent the version held.
        #expect(server.requests.dropFirst().allSatisfy { $0.headers["if-none-match"] == "\"3\"" })
    }

    @Test("a refused token: asked for once more, then the client stops with .unauthorized (no retry loop)")
    func unauthorizedStops() async throws {
        let server = try ScriptedServer { _, _ in .json(401, #"{"error":{"code":"unauthorized","message":"the token has expired"}}"#) }
        defer { server.stop() }
        let asked = Atomic<Int>(0)
        let client = RedDotClient(server: server.url, user: "ann") {
            "token-\(asked.add(1, ordering: .relaxed).newValue)"
        }
        client.start()
        defer { client.stop() }
        #expect(await Self.eventually { if case .failed = client.connectionState { true } else { false } })
        guard case .failed(let error) = client.connectionState else { return }
        #expect(error.kind == .unauthorized && error.status == 401)
        #expect(error.description.contains("the token has expired"))
        try await Task.sleep(for: .seconds(1))
        #expect(server.requests.count == 2, "one request, and one more with a token asked for anew")
        #expect(server.requests.map { $0.headers["authorization"] } == ["Bearer token-1", "Bearer token-2"])
        #expect(asked.load(ordering: .relaxed) == 2)
    }

    @Test("a stream that goes silent past the heartbeat timeout is reconnected, resuming with Last-Event-ID")
    func silentStreamReconnects() async throws {
        let stream = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\nretry: 100\n\nid: 3\nevent: snapshot\ndata: \(Self.tree)\n\n"
        let server = try ScriptedServer { _, _ in ScriptedServer.Answer(bytes: stream, holdOpen: .seconds(5)) }
        defer { server.stop() }
        let options = RedDotClient.Options(heartbeatTimeout: .seconds(1), reconnectDelay: .milliseconds(50))
        let client = RedDotClient(server: server.url, user: "ann", options: options)
        client.start()
        defer { client.stop() }
        #expect(await Self.eventually(seconds: 30) { server.requests.contains { $0.headers["last-event-id"] == "3" } })
        #expect(client.badge("root.chat").count == 2)
        let requests = server.requests
        #expect(requests.first?.headers["last-event-id"] == nil)
        #expect(requests.allSatisfy { $0.target == "/v1/users/ann/badges/stream" })
    }

    @Test("a stream answered with something else than an event stream (a proxy) falls back to polling")
    func proxyFallsBackToPolling() async throws {
        let server = try ScriptedServer { request, _ in
            request.target.hasSuffix("/stream")
                ? ScriptedServer.Answer(bytes: "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 6\r\n\r\n<html>")
                : .json(200, Self.tree)
        }
        defer { server.stop() }
        let client = RedDotClient(server: server.url, user: "ann", options: .init(fallbackPolling: Self.quickPolls))
        client.start()
        defer { client.stop() }
        #expect(await Self.eventually { client.badge("root.chat").count == 2 })
        #expect(await Self.eventually { client.connectionState == .polling })
        #expect(server.requests.first?.target == "/v1/users/ann/badges/stream")
        #expect(server.requests.dropFirst().allSatisfy { $0.target == "/v1/users/ann/badges" })
    }

    @Test("a clear the server refuses is taken back: the badges show the server's tree again, and the error is thrown")
    func refusedClearIsUndone() async throws {
        let server = try ScriptedServer { request, _ in
            request.method == "POST"
                ? .json(412, #"{"error":{"code":"version_changed","message":"version 3 is later than any this tree has had"}}"#)
                : .json(200, Self.tree)
        }
        defer { server.stop() }
        let client = RedDotClient(server: server.url, user: "ann", options: .init(transport: .polling(.init(interval: .seconds(60)))))
        let calls = ClientCalls()
        let observation = try client.observe("root.chat") { calls.add($0) }
        defer { observation.cancel() }
        client.start()
        defer { client.stop() }
        #expect(await Self.eventually { client.badge("root.chat").count == 2 })
        await #expect(throws: RedDotClientError.self) { try await client.clear("root.chat", force: true) }
        #expect(client.badge("root.chat").count == 2)
        #expect(calls.all.map(\.shown) == [false, true, false, true], "shown, hidden at once, back after the refusal")
        let post = try #require(server.requests.first { $0.method == "POST" })
        #expect(post.target == "/v1/users/ann/badges/clear")
        let body = try JSONSerialization.jsonObject(with: Data(post.body.utf8)) as? [String: Any]
        #expect(body?["seen_version"] as? Int == 3 && body?["force"] as? Bool == true && body?["path"] as? String == "root.chat")
        #expect((body?["action_id"] as? String)?.isEmpty == false)
        #expect(client.queuedActionCount == 0)
    }

    /// A server for the offline tests: 503 while `online` is false; else each POST is recorded
    /// (its target and body) and answered with `answered`, and reads get `Self.tree` until the
    /// first POST, then `after`.
    final class FlakyServer: Sendable {
        let online = Atomic<Bool>(true)
        let delivered = Mutex<[(target: String, body: String)]>([])
        let answered: String
        let after: String

        init(answered: String, after: String) {
            self.answered = answered
            self.after = after
        }

        func start() throws -> ScriptedServer {
            try ScriptedServer { request, _ in
                guard self.online.load(ordering: .relaxed) else {
                    return .json(503, #"{"error":{"code":"unavailable","message":"the database did not answer in time"}}"#)
                }
                if request.method == "POST" {
                    self.delivered.withLock { $0.append((request.target, request.body)) }
                    return .json(200, self.answered)
                }
                return .json(200, self.delivered.withLock { $0.isEmpty } ? TransportTests.tree : self.after)
            }
        }

        /// A client of `server` with its cache in `folder`, polling often and reconnecting fast.
        static func options(cache folder: URL) -> RedDotClient.Options {
            RedDotClient.Options(
                transport: .polling(TransportTests.quickPolls), cacheDirectory: folder, reconnectDelay: .milliseconds(50),
                maximumReconnectDelay: .milliseconds(200))
        }
    }

    @Test("a clear while the server cannot answer: shown at once, kept in the cache across a restart, sent once when it is back")
    func offlineClearIsQueued() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("reddot-queue-\(UUID().uuidString)", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let cleared = #"{"user":"ann","version":4,"tree":null}"#
        let script = FlakyServer(answered: cleared, after: cleared)
        let server = try script.start()
        defer { server.stop() }
        let options = FlakyServer.options(cache: folder)
        let first = RedDotClient(server: server.url, user: "ann", options: options)
        first.start()
        #expect(await Self.eventually { first.badge("root.chat").count == 2 })
        script.online.store(false, ordering: .relaxed)
        let calls = ClientCalls()
        let observation = try first.observe("root.chat") { calls.add($0) }
        let shown = try await first.clear("root.chat", force: true)
        #expect(!shown.shown && !first.badge("root.chat").shown && first.badge("root").count == 0, "shown at once, not thrown")
        #expect(calls.all.map(\.shown) == [true, false], "no rollback")
        #expect(first.queuedActionCount == 1)
        let attempt = try #require(server.requests.last { $0.method == "POST" })
        let actionID = try #require((try JSONSerialization.jsonObject(with: Data(attempt.body.utf8)) as? [String: Any])?["action_id"] as? String)
        // Retries while the server is down send the same action.
        try await Task.sleep(for: .milliseconds(500))
        #expect(server.requests.filter { $0.method == "POST" }.allSatisfy { $0.body.contains(actionID) })
        first.stop()
        observation.cancel()
        #expect(await Self.quiet(server), "a stopped client stops sending")
        #expect(first.cacheError == nil)
        let cacheFile = try #require(first.cacheFile)
        #expect(try String(contentsOf: cacheFile, encoding: .utf8).contains(actionID), "the tap is in the cache file")

        // The app restarts: the tap shows at once, from the cache.
        let second = RedDotClient(server: server.url, user: "ann", options: options)
        #expect(!second.badge("root.chat").shown && second.queuedActionCount == 1)
        #expect(second.version == 3)
        script.online.store(true, ordering: .relaxed)
        second.start()
        defer { second.stop() }
        #expect(await Self.eventually { second.queuedActionCount == 0 && second.version == 4 })
        try await Task.sleep(for: .milliseconds(500))
        let sent = script.delivered.withLock { $0.map(\.body) }
        #expect(sent.count == 1, "sent once when the server is back: \(sent)")
        let body = try JSONSerialization.jsonObject(with: Data((sent.first ?? "{}").utf8)) as? [String: Any]
        #expect(body?["action_id"] as? String == actionID && body?["seen_version"] as? Int == 3 && body?["force"] as? Bool == true)
        #expect(!second.badge("root.chat").shown)
        #expect(try !String(contentsOf: cacheFile, encoding: .utf8).contains(actionID), "the answered tap left the cache")
    }

    @Test("a mute while the server cannot answer: the ancestors drop at once, the mute is queued across a restart and sent once to …/mute")
    func offlineMuteIsQueued() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("reddot-mute-\(UUID().uuidString)", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let muted = #"{"user":"ann","version":4,"tree":{"path":"root.chat","shown":true,"count":2,"unseen":0,"text":"2","icon":null,"children":[]},"mutes":[{"path":"root.chat","until":"2030-01-01T00:00:00.000Z"}]}"#
        let after = #"{"user":"ann","version":4,"tree":{"path":"root","shown":false,"count":0,"unseen":0,"text":null,"icon":null,"children":[{"path":"root.chat","shown":true,"count":2,"unseen":0,"text":"2","icon":null,"children":[]}]},"mutes":[{"path":"root.chat","until":"2030-01-01T00:00:00.000Z"}]}"#
        let script = FlakyServer(answered: muted, after: after)
        let server = try script.start()
        defer { server.stop() }
        let options = FlakyServer.options(cache: folder)
        let first = RedDotClient(server: server.url, user: "ann", options: options)
        first.start()
        #expect(await Self.eventually { first.badge("root.chat").count == 2 })
        script.online.store(false, ordering: .relaxed)
        let until = Date(timeIntervalSince1970: 1_893_456_000)
        let shown = try await first.mute("root.chat", until: until)
        #expect(shown.count == 2 && first.badge("root").count == 0, "the chat keeps its number, the app icon drops at once")
        #expect(first.queuedActionCount == 1)
        await #expect(throws: RedDotClientError.self) { try await first.mute("root") }
        first.stop()
        #expect(await Self.quiet(server), "a stopped client stops sending")

        let second = RedDotClient(server: server.url, user: "ann", options: options)
        #expect(second.queuedActionCount == 1 && second.badge("root").count == 0, "the queued mute shows after a restart")
        script.online.store(true, ordering: .relaxed)
        second.start()
        defer { second.stop() }
        #expect(await Self.eventually { second.queuedActionCount == 0 && second.version == 4 })
        try await Task.sleep(for: .milliseconds(500))
        let sent = script.delivered.withLock { $0 }
        #expect(!sent.isEmpty && sent.allSatisfy { $0.target.hasSuffix("/badges/mute") }, "sent to …/mute: \(sent.map(\.target))")
        // Every copy that reached the server is the one queued action (one action id, which the
        // server applies once).
        let actionIDs = Set(sent.map { copy in
            (try? JSONSerialization.jsonObject(with: Data(copy.body.utf8)) as? [String: Any])?["action_id"] as? String
        })
        #expect(actionIDs.count == 1 && !actionIDs.contains(nil), "one action: \(sent.map(\.body))")
        // Once on the wire: the stopped first client's last send met the server still down
        // (`quiet`; without that wait one CI run, 2026-11-29, saw it arrive after the server came
        // back, a send it had on the wire at stop()).
        #expect(sent.count == 1, "sent once: \(sent.map(\.target))")
        let body = try JSONSerialization.jsonObject(with: Data((sent.first?.body ?? "{}").utf8)) as? [String: Any]
        #expect(body?["path"] as? String == "root.chat" && body?["until"] as? String == "2030-01-01T00:00:00.000Z")
        #expect(body?["action_id"] is String && body?["seen_version"] == nil && body?["force"] == nil)
        #expect(second.badge("root.chat").count == 2 && !second.badge("root").shown)
    }

    @Test("two accounts on one device: each user's cache is a file of its own, and each restores its own tree")
    func accountsKeepTheirOwnCache() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("reddot-accounts-\(UUID().uuidString)", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let bobTree = #"{"user":"bob","version":9,"tree":{"path":"root","shown":true,"count":7,"unseen":0,"text":"7","icon":null,"children":[{"path":"root.feed","shown":true,"count":7,"unseen":0,"text":"7","icon":null,"children":[]}]}}"#
        let server = try ScriptedServer { request, _ in .json(200, request.target.contains("/users/bob/") ? bobTree : Self.tree) }
        defer { server.stop() }
        let options = RedDotClient.Options(transport: .polling(Self.quickPolls), cacheDirectory: folder)
        for user in ["ann", "bob"] {
            let client = RedDotClient(server: server.url, user: user, options: options)
            client.start()
            #expect(await Self.eventually { client.version > 0 })
            client.stop()
            // The version shows before its save ends (a save in flight finishes after stop):
            // wait for the file, as a second start of the app would find it.
            #expect(await Self.eventually { client.cacheFile.map { FileManager.default.fileExists(atPath: $0.path) } ?? false })
        }
        func listed() -> [String] { (try? FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()) ?? [] }
        #expect(await Self.eventually { listed().count == 2 && listed().allSatisfy { $0.hasPrefix("reddot-") && $0.hasSuffix(".json") } })
        server.stop()
        let ann = RedDotClient(server: server.url, user: "ann", options: options)
        let bob = RedDotClient(server: server.url, user: "bob", options: options)
        #expect(ann.cacheFile != bob.cacheFile)
        #expect(ann.version == 3 && ann.badge("root.chat").count == 2 && !ann.badge("root.feed").shown)
        #expect(bob.version == 9 && bob.badge("root.feed").count == 7 && !bob.badge("root.chat").shown)
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        #expect(files.count == 2 && files.allSatisfy { $0.hasPrefix("reddot-") && $0.hasSuffix(".json") }, "\(files)")
        // Another server's client of the same user starts empty.
        let elsewhere = RedDotClient(server: try #require(URL(string: "http://other.example:1")), user: "ann", options: options)
        #expect(elsewhere.version == 0 && !elsewhere.badge("root.chat").shown)
    }
}

/// Collects what a callback receives.
final class ClientCalls: Sendable {
    private let received = Mutex<[Badge]>([])
    func add(_ badge: Badge) { received.withLock { $0.append(badge) } }
    var all: [Badge] { received.withLock { $0 } }
}
