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
            let paths = ["root.chat.c1", "root.chat.c2", "root.feed", "root.feed.f1.x"]
            for round in 0..<12 {
                var mutations: [BadgeMutation] = []
                for _ in 0..<(1 + random.next() % 3) {
                    let node = path(paths[Int(random.next() % UInt64(paths.count))])
                    let operation: BadgeOperation =
                        switch random.next() % 4 {
                        case 0: .clear(force: random.next() % 2 == 0)
                        case 1: .set(count: Int64(random.next() % 150), icon: nil)
                        case 2: .seen
                        default: .increment(by: 1)
                        }
                    mutations.append(BadgeMutation(user: ivy, path: node, operation: operation))
                }
                try await harness.apply(mutations)
                if round % 4 == 3 { try await harness.broadcast("b\(round)", at: "root.news", count: 1) }
                let server = try await harness.get("/v1/users/ivy/badges", token: token).tree()
                // Feed the stream's events until the client is at the server's version.
                while client.version < server.version, let event = await stream.next() {
                    try client.receive(ServerSentEvent(name: event.name, data: event.data, lastEventID: event.id))
                }
                #expect(client.version == server.version)
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
        }
    }
}
