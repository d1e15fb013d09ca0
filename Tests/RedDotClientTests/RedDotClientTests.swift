import Foundation
import RedDotClient
import Synchronization
import Testing

@Suite("The client's tree and observers")
struct RedDotClientTests {
    static let snapshot = """
        {"user":"ann","version":4,"tree":{"path":"root","shown":true,"count":5,"unseen":2,"text":"5","icon":null,"children":[
          {"path":"root.chat","shown":true,"count":5,"unseen":2,"text":"5","icon":null,"children":[
            {"path":"root.chat.c1","shown":true,"count":3,"unseen":2,"text":"3","icon":null,"children":[]},
            {"path":"root.chat.c2","shown":true,"count":2,"unseen":0,"text":"2","icon":"hot","children":[]}]}]}}
        """

    func event(_ name: String, _ data: String) -> ServerSentEvent { ServerSentEvent(name: name, data: data, lastEventID: nil) }

    /// Collects what a callback receives.
    final class Calls: Sendable {
        let received = Mutex<[Badge]>([])
        func add(_ badge: Badge) { received.withLock { $0.append(badge) } }
        var all: [Badge] { received.withLock { $0 } }
    }

    @Test("observe calls back at once, then only when its node changes; a released observation stops")
    func observe() throws {
        let client = RedDotClient(user: "ann")
        let calls = Calls()
        var observation: BadgeObservation? = try client.observe("root.chat.c1") { calls.add($0) }
        #expect(calls.all == [Badge.hidden("root.chat.c1", version: 0)])
        try client.receive(event("snapshot", Self.snapshot))
        #expect(calls.all.last?.count == 3 && calls.all.last?.version == 4)
        // A change elsewhere: no call.
        try client.receive(event("change", #"{"user":"ann","version":5,"changed":[{"path":"root.chat.c2","shown":false,"count":0,"unseen":0,"text":null,"icon":null}]}"#))
        #expect(calls.all.count == 2)
        #expect(client.badge("root.chat.c2").shown == false)
        // Its own change: one call.
        try client.receive(event("change", #"{"user":"ann","version":6,"changed":[{"path":"root.chat.c1","shown":true,"count":4,"unseen":3,"text":"4","icon":null}]}"#))
        #expect(calls.all.count == 3 && calls.all.last?.count == 4)
        // An older event changes nothing: no callback goes back in version.
        try client.receive(event("change", #"{"user":"ann","version":5,"changed":[{"path":"root.chat.c1","shown":false,"count":0,"unseen":0,"text":null,"icon":null}]}"#))
        #expect(calls.all.count == 3 && client.badge("root.chat.c1").count == 4)
        _ = observation
        observation = nil
        #expect(client.observerCount == 0)
        try client.receive(event("change", #"{"user":"ann","version":7,"changed":[{"path":"root.chat.c1","shown":false,"count":0,"unseen":0,"text":null,"icon":null}]}"#))
        #expect(calls.all.count == 3)
    }

    @Test("100 observers of overlapping paths each see exactly their node's changes, in version order")
    func manyObservers() throws {
        let client = RedDotClient(user: "ann")
        let paths = (0..<10).map { "root.p\($0)" } + ["root"]
        var observations: [BadgeObservation] = []
        var calls: [(String, Calls)] = []
        for index in 0..<100 {
            let path = paths[index % paths.count]
            let received = Calls()
            observations.append(try client.observe(path) { received.add($0) })
            calls.append((path, received))
        }
        var expected: [String: [Int64]] = Dictionary(uniqueKeysWithValues: paths.map { ($0, [0]) })
        var counts: [String: Int64] = [:]
        for version in Int64(1)...40 {
            let leaf = paths[Int(version * 7 % 10)]
            counts[leaf, default: 0] += 1
            let total = counts.values.reduce(0, +)
            let data = """
                {"user":"ann","version":\(version),"changed":[
                  {"path":"root","shown":true,"count":\(total),"unseen":0,"text":"\(total)","icon":null},
                  {"path":"\(leaf)","shown":true,"count":\(counts[leaf]!),"unseen":0,"text":"\(counts[leaf]!)","icon":null}]}
                """
            try client.receive(event("change", data))
            expected[leaf, default: []].append(counts[leaf]!)
            expected["root", default: []].append(total)
        }
        for (path, received) in calls {
            #expect(received.all.map(\.count) == expected[path], "\(path)")
            #expect(received.all.map(\.version) == received.all.map(\.version).sorted())
        }
        #expect(client.observerCount == 100)
        observations.removeAll()
        #expect(client.observerCount == 0)
    }

    @Test("badges(path) is an AsyncSequence: the current badge, then each change")
    func asyncSequence() async throws {
        let client = RedDotClient(user: "ann")
        try client.receive(event("snapshot", Self.snapshot))
        var iterator = try client.badges("root.chat.c2").makeAsyncIterator()
        #expect(await iterator.next()?.icon == "hot")
        try client.receive(event("change", #"{"user":"ann","version":5,"changed":[{"path":"root.chat.c2","shown":true,"count":9,"unseen":1,"text":"9","icon":null}]}"#))
        #expect(await iterator.next()?.count == 9)
    }

    @Test("a loop over badges(path) left with break ends its observation")
    func asyncSequenceBreak() async throws {
        let client = RedDotClient(user: "ann")
        try client.receive(event("snapshot", Self.snapshot))
        for await badge in try client.badges("root.chat.c2") {
            #expect(badge.icon == "hot")
            #expect(client.observerCount == 1)
            break
        }
        #expect(client.observerCount == 0, "the sequence and its iterator are gone: no observer may stay")
    }

    @Test("observe, observeTree and badges refuse a path that is not a badge path, with the rule it broke")
    func invalidPaths() throws {
        let client = RedDotClient(user: "ann")
        for (path, words) in [
            ("chat", "did you mean 'root.chat'"), ("root..c1", "empty label"), ("root.chat room", "character ' '"), ("", "empty"),
        ] {
            do {
                _ = try client.observe(path) { _ in }
                Issue.record("observe(\(path)) was accepted")
            } catch let error as RedDotClientError {
                #expect(error.kind == .invalidPath && error.description.contains(words), "\(error)")
            }
            #expect(throws: RedDotClientError.self) { try client.observeTree(under: path) { _ in } }
            #expect(throws: RedDotClientError.self) { try client.badges(path) }
        }
        #expect(client.observerCount == 0)
        #expect(RedDotClient.pathProblem("root.chat.c1") == nil && RedDotClient.pathProblem("root") == nil)
    }

    @Test("a cache file with hostile numbers, paths or kinds is read without a trap; what is not valid is left out")
    func hostileCacheFile() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("reddot-hostile-\(UUID().uuidString)", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let server = try #require(URL(string: "http://127.0.0.1:9"))
        let options = RedDotClient.Options(cacheDirectory: folder)
        let file = try #require(RedDotClient(server: server, user: "ann", options: options).cacheFile)
        let max = Int64.max
        let min = Int64.min
        let contents = """
            {"format":2,"server":"http://127.0.0.1:9","user":"ann","version":\(max),
             "nodes":[{"path":"root","shown":true,"count":\(max),"unseen":\(min),"text":"99+","icon":null,"version":\(max)},
                      {"path":"root.a","shown":true,"count":\(min),"unseen":\(max),"text":null,"icon":null,"version":0}],
             "queued":[
               {"action_id":"x","kind":"clear","force":true,"path":"root.a","seen_version":\(min),
                "losses":{"root.a":{"count":\(min),"unseen":\(max),"hides":true},"root":{"count":\(max),"unseen":\(min),"hides":true}}},
               {"action_id":"y","kind":"clear","force":false,"path":"chat","seen_version":1,"losses":{}},
               {"action_id":"z","kind":"explode","force":false,"path":"root","seen_version":1,"losses":{}},
               {"action_id":"","kind":"seen","force":false,"path":"root","seen_version":1,"losses":{}}]}
            """
        try Data(contents.utf8).write(to: file)
        let client = RedDotClient(server: server, user: "ann", options: options)
        #expect(client.cacheError == nil)
        #expect(client.queuedActionCount == 1, "only the valid action is kept")
        #expect(client.version == max)
        _ = client.badge("root")
        _ = client.badges(under: "root")
        for format in ["3", "\"2\"", "0"] {
            try Data(contents.replacingOccurrences(of: #""format":2"#, with: #""format":\#(format)"#).utf8).write(to: file)
            let other = RedDotClient(server: server, user: "ann", options: options)
            #expect(other.version == 0 && other.queuedActionCount == 0, "format \(format) is not used")
        }
        try Data("not json".utf8).write(to: file)
        let broken = RedDotClient(server: server, user: "ann", options: options)
        #expect(broken.cacheError?.kind == .cache && broken.version == 0)
    }

    @Test("data that is not what the server sends is an error with a sentence, and changes nothing")
    func badData() throws {
        let client = RedDotClient(user: "ann")
        try client.receive(event("snapshot", Self.snapshot))
        for data in ["", "{", #"{"version":"x"}"#, #"{"version":9,"changed":[{"path":1}]}"#] {
            #expect(throws: RedDotClientError.self) { try client.receive(event("change", data)) }
        }
        #expect(client.version == 4 && client.badge("root").count == 5)
        try client.receive(event("heartbeat", "whatever"))  // unknown events are ignored
    }
}
