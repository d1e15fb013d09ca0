import BadgeAPI
import BadgeCore
import BadgeStore
import Foundation
import RedDotClient
import TestSupport
import Testing

/// RedDotClient's tree against the real query service's stream (real PostgreSQL).
@Suite("RedDotClient on a real stream", .serialized)
struct ClientAgainstServerTests {
    @Test("fed the server's stream, the client's badges equal the server's tree after every burst of changes")
    func followsTheServer() async throws {
        try await APIHarness.with { harness in
            let port = try #require(harness.client.port)
            let token = try await harness.token("ivy")
            let ivy = user("ivy")
            let client = RedDotClient(user: "ivy")
            let stream = try EventStreamClient(port: port, uri: "/v1/users/ivy/badges/stream", headers: ["Authorization": "Bearer \(token)"])
            var random = SplitMix64(seed: 11)
            var mutedOnce = false
            let paths = ["root.chat.c1", "root.chat.c2", "root.feed", "root.feed.f1.x"]
            for round in 0..<12 {
                var mutations: [BadgeMutation] = []
                for _ in 0..<(1 + random.next() % 3) {
                    let node = path(paths[Int(random.next() % UInt64(paths.count))])
                    let operation: BadgeOperation =
                        switch random.next() % 6 {
                        case 0: .clear(force: random.next() % 2 == 0)
                        case 1: .set(count: Int64(random.next() % 150), icon: nil)
                        case 2: .seen
                        case 3: random.next() % 2 == 0 ? .mute(until: nil) : .unmute
                        default: .increment(by: 1)
                        }
                    mutations.append(BadgeMutation(user: ivy, path: node, operation: operation))
                    if case .mute = operation { mutedOnce = true }
                }
                try await harness.apply(mutations)
                if round % 4 == 3 { try await harness.broadcast("b\(round)", at: "root.news", count: 1) }
                let server = try await harness.get("/v1/users/ivy/badges", token: token).tree()
                // Feed the stream's events until the client is at the server's version.
                while client.version < server.version, let event = await stream.next() {
                    try client.receive(ServerSentEvent(name: event.name, data: event.data, lastEventID: event.id))
                }
                #expect(client.version == server.version)
                #expect(client.mutes.map(\.path) == server.mutes.map(\.path.rawValue), "round \(round)")
                var shown: [String: BadgeNode] = [:]
                func visit(_ node: BadgeNode) {
                    if node.shown { shown[node.path.rawValue] = node }
                    node.children.forEach(visit)
                }
                if let tree = server.tree { visit(tree) }
                for candidate in Set(shown.keys).union(paths + ["root", "root.chat", "root.feed", "root.news"]) {
                    let badge = client.badge(candidate)
                    let node = shown[candidate]
                    #expect(badge.shown == (node != nil), "round \(round) \(candidate)")
                    #expect(badge.count == (node?.count ?? 0) && badge.unseen == (node?.unseen ?? 0), "round \(round) \(candidate)")
                    #expect(badge.text == node?.text && badge.icon == node?.icon?.rawValue, "round \(round) \(candidate)")
                }
            }
            #expect(mutedOnce, "the rounds muted a node")
        }
    }

    @Test("the client mutes and unmutes: the server's tree follows, and root is refused with the server's sentence")
    func muteAndUnmute() async throws {
        try await APIHarness.with { harness in
            let port = try #require(harness.client.port)
            let token = try await harness.token("max")
            try await harness.apply([
                BadgeMutation(user: user("max"), path: path("root.chat.c1"), operation: .increment(by: 4)),
                BadgeMutation(user: user("max"), path: path("root.inbox"), operation: .increment(by: 1)),
            ])
            let client = RedDotClient(server: try #require(URL(string: "http://127.0.0.1:\(port)")), user: "max") { token }
            let muted = try await client.mute("root.chat", until: Date(timeIntervalSinceNow: 3_600))
            #expect(muted.count == 4, "the muted subtree keeps its count")
            let tree = try await harness.get("/v1/users/max/badges", token: token).tree()
            #expect(tree.tree?.count == 1 && tree.mutes.map(\.path.rawValue) == ["root.chat"])
            let until = try #require(tree.mutes.first?.until)
            #expect(abs(until.timeIntervalSinceNow - 3_600) < 60)
            do {
                try await client.mute("root")
                Issue.record("muting root was accepted")
            } catch let error as RedDotClientError {
                #expect(error.description.contains("root"), "\(error)")
            }
            try await client.unmute("root.chat")
            #expect(try await harness.get("/v1/users/max/badges", token: token).tree().tree?.count == 5)
        }
    }
}
