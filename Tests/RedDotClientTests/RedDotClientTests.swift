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
        var observation: BadgeObservation? = client.observe("root.chat.c1") { calls.add($0) }
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
            observations.append(client.observe(path) { received.add($0) })
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
        var iterator = client.badges("root.chat.c2").makeAsyncIterator()
        #expect(await iterator.next()?.icon == "hot")
        try client.receive(event("change", #"{"user":"ann","version":5,"changed":[{"path":"root.chat.c2","shown":true,"count":9,"unseen":1,"text":"9","icon":null}]}"#))
        #expect(await iterator.next()?.count == 9)
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
