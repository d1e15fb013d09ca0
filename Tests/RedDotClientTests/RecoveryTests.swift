import Foundation
import RedDotClient
import Synchronization
import Testing

/// How the client comes back from what an app meets in the field: a refusal it was started
/// again after, a token provider that cannot refresh offline, an event it cannot read, taps made
/// while older ones wait, callbacks from many threads, a cache file replaced.
@Suite("RedDotClient's recoveries", .serialized)
struct RecoveryTests {
    static let tree = TransportTests.tree
    static let fast = RedDotClient.Options(
        transport: .polling(TransportTests.quickPolls), reconnectDelay: .milliseconds(50), maximumReconnectDelay: .milliseconds(200))

    @Test("a client stopped by a refusal starts again with start(), as ConnectionState.failed says")
    func startAfterFailure() async throws {
        let refusing = Atomic<Bool>(true)
        let server = try ScriptedServer { _, _ in
            refusing.load(ordering: .relaxed) ? .json(401, #"{"error":{"code":"unauthorized","message":"expired"}}"#) : .json(200, Self.tree)
        }
        defer { server.stop() }
        let client = RedDotClient(server: server.url, user: "ann", options: Self.fast) { "token" }
        client.start()
        defer { client.stop() }
        #expect(await TransportTests.eventually { if case .failed = client.connectionState { true } else { false } })
        refusing.store(false, ordering: .relaxed)
        client.start()  // the app has a new token
        #expect(await TransportTests.eventually { client.badge("root.chat").count == 2 }, "requests: \(server.requests.count)")
        #expect(client.connectionState == .polling)
    }

    @Test("a token provider that fails (a refresh offline) is a passing failure: the client waits, retries, and a clear is queued")
    func tokenProviderOffline() async throws {
        let online = Atomic<Bool>(true)
        let server = try ScriptedServer { request, _ in
            request.method == "POST" ? .json(200, #"{"user":"ann","version":4,"tree":null}"#) : .json(200, Self.tree)
        }
        defer { server.stop() }
        struct Offline: Error {}
        let client = RedDotClient(server: server.url, user: "ann", options: Self.fast) {
            guard online.load(ordering: .relaxed) else { throw Offline() }
            return "token"
        }
        client.start()
        defer { client.stop() }
        #expect(await TransportTests.eventually { client.badge("root.chat").count == 2 })
        online.store(false, ordering: .relaxed)
        #expect(await TransportTests.eventually { if case .waiting = client.connectionState { true } else { false } })
        let shown = try await client.clear("root.chat")
        #expect(!shown.shown && client.queuedActionCount == 1, "the clear shows and waits in the queue, not taken back")
        if case .failed(let error) = client.connectionState { Issue.record("stopped: \(error)") }
        online.store(true, ordering: .relaxed)
        #expect(await TransportTests.eventually { client.queuedActionCount == 0 })
        #expect(server.requests.contains { $0.method == "POST" && $0.target.hasSuffix("/badges/clear") })
    }

    @Test("an event the client cannot read: it reads the whole tree, then streams from there, with growing pauses")
    func unreadableEventReadsTheTree() async throws {
        let broken = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\nretry: 10\n\nid: 4\nevent: change\ndata: {\"not\": \"a change\"}\n\n"
        let server = try ScriptedServer { request, _ in
            request.target.hasSuffix("/stream") ? ScriptedServer.Answer(bytes: broken) : .json(200, Self.tree)
        }
        defer { server.stop() }
        let options = RedDotClient.Options(reconnectDelay: .milliseconds(50), maximumReconnectDelay: .milliseconds(400))
        let client = RedDotClient(server: server.url, user: "ann", options: options)
        client.start()
        defer { client.stop() }
        #expect(await TransportTests.eventually { client.badge("root.chat").count == 2 }, "the tree from GET …/badges")
        try await Task.sleep(for: .seconds(2))
        let requests = server.requests
        #expect(requests.contains { $0.target == "/v1/users/ann/badges" })
        // Without growing pauses the stream was asked for every 50 ms or so: 40 times in 2 s.
        #expect(requests.count < 25, "\(requests.count) requests in about 2 s")
    }

    @Test("taps reach the server in the order they were made: an unmute after a queued mute waits behind it")
    func queuedOrder() async throws {
        let failing = Atomic<Int>(1)  // the first POST meets a 503
        let server = try ScriptedServer { request, _ in
            if request.method == "POST" {
                if failing.load(ordering: .relaxed) > 0 {
                    failing.subtract(1, ordering: .relaxed)
                    return .json(503, #"{"error":{"code":"unavailable","message":"busy"}}"#)
                }
                return .json(200, #"{"user":"ann","version":4,"tree":{"path":"root.chat","shown":true,"count":2,"unseen":0,"text":"2","icon":null,"children":[]}}"#)
            }
            return .json(200, Self.tree)
        }
        defer { server.stop() }
        let client = RedDotClient(server: server.url, user: "ann", options: Self.fast)
        client.start()
        defer { client.stop() }
        #expect(await TransportTests.eventually { client.badge("root.chat").count == 2 })
        _ = try await client.mute("root.chat")
        #expect(client.queuedActionCount == 1, "the mute met a 503: queued")
        _ = try await client.unmute("root.chat")
        #expect(await TransportTests.eventually { client.queuedActionCount == 0 })
        let posts = server.requests.filter { $0.method == "POST" }.map { $0.target.split(separator: "/").last.map(String.init) ?? "" }
        #expect(posts == ["mute", "mute", "unmute"], "the server's last word is the user's last tap")
    }

    @Test("callbacks from many threads come one at a time, in the order of the changes: a count never goes back")
    func callbacksInOrder() async throws {
        let client = RedDotClient(user: "ann")
        let seen = Mutex<[Int64]>([])
        let inside = Atomic<Int>(0)
        let overlapped = Atomic<Bool>(false)
        let observation = try client.observe("root.chat") { badge in
            if inside.add(1, ordering: .relaxed).newValue > 1 { overlapped.store(true, ordering: .relaxed) }
            seen.withLock { $0.append(badge.count) }
            inside.subtract(1, ordering: .relaxed)
        }
        defer { observation.cancel() }
        final class Versions: Sendable { let next = Atomic<Int64>(0) }
        let versions = Versions()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask { [client, versions] in
                    for _ in 0..<500 {
                        // Versions taken in order under one counter; the client applies only newer ones.
                        let version = versions.next.add(1, ordering: .relaxed).newValue
                        let tree = #"{"user":"ann","version":\#(version),"tree":{"path":"root","shown":true,"count":\#(version),"unseen":0,"text":null,"icon":null,"children":[{"path":"root.chat","shown":true,"count":\#(version),"unseen":0,"text":null,"icon":null,"children":[]}]}}"#
                        try? client.receive(tree: Data(tree.utf8))
                    }
                }
            }
        }
        let counts = seen.withLock { $0 }
        let overlapping = overlapped.load(ordering: .relaxed)
        #expect(!overlapping, "two callbacks ran at once")
        #expect(zip(counts, counts.dropFirst()).allSatisfy { $0 < $1 }, "went back \(zip(counts, counts.dropFirst()).count { $0 >= $1 }) times")
        #expect(counts.last == client.badge("root.chat").count, "the last callback is what the client holds")
    }

    @Test("a callback may call into the client: its change is called back after it returns, on the same thread")
    func reentrantCallback() throws {
        let client = RedDotClient(user: "ann")
        try client.receive(tree: Data(Self.tree.utf8))
        let order = Mutex<[String]>([])
        let nested = Mutex<BadgeObservation?>(nil)
        let outer = try client.observe("root.chat") { badge in
            order.withLock { $0.append("outer \(badge.count)") }
            if badge.count == 2, nested.withLock({ $0 == nil }) {
                nested.withLock { $0 = try? client.observe("root") { root in order.withLock { $0.append("inner \(root.count)") } } }
                order.withLock { $0.append("outer returns") }
            }
        }
        defer { outer.cancel() }
        #expect(order.withLock { $0 } == ["outer 2", "outer returns", "inner 2"])
    }

    @Test("a cache file that could not be read stops being an error once a save has replaced it")
    func cacheErrorClears() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("reddot-cache-\(UUID().uuidString)", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let probe = RedDotClient(server: URL(string: "http://127.0.0.1:9")!, user: "ann", options: .init(cacheDirectory: folder))
        let file = try #require(probe.cacheFile)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data("not json".utf8).write(to: file)
        let client = RedDotClient(server: URL(string: "http://127.0.0.1:9")!, user: "ann", options: .init(cacheDirectory: folder))
        #expect(client.cacheError?.kind == .cache)
        try client.receive(tree: Data(Self.tree.utf8))
        #expect(client.cacheError == nil, "\(String(describing: client.cacheError))")
        #expect(RedDotClient(server: URL(string: "http://127.0.0.1:9")!, user: "ann", options: .init(cacheDirectory: folder)).version == 3)
    }
}
