import BadgeCore
import BadgeStore
import Foundation
import LibPQ
@testable import RedDotClient
import Synchronization
import TestSupport
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif

/// Several processes of each kind against one database (issue 27): two `reddot ingest` in one
/// consumer group, two `reddot rollup`, two `reddot serve`, one of each killed with SIGKILL
/// while events flow and started again.
@Suite("Two processes of each kind, one of each killed and restarted", .serialized)
struct ScaleOutTests {
    static let secret = "scale-out-test-secret-0123456789abcdef"

    @Test("every tree equals the model, every event applies once, every stream's versions rise and end on the tree, across a server's death")
    func twoOfEachKind() async throws {
        let harness = try await PipelineHarness(partitions: 4)
        try await tearingDown({ await harness.tearDown() }) {
            let now = Date()

            // The events: order-free operations of 24 users, each with its time; a twentieth of them
            // published twice (the same id).
            let users = (0..<24).map { UserID(rawValue: "so_u\($0)")! }
            var generator = RandomBadgeOperations(users: users, seed: 27)
            generator.weights = .orderFree
            let mutations = generator.sequence(count: 2_400)
            var models: [UserID: BadgeTree] = [:]
            for mutation in mutations { models[mutation.user, default: BadgeTree()].apply(mutation, now: now) }
            let encoder = EventEncoder()
            var events: [(key: String, payload: String)] = []
            for (index, mutation) in mutations.enumerated() {
                let event = BadgeEvent(
                    id: EventID(rawValue: "so-e\(index)")!, audience: .users([mutation.user]), occurredAt: mutation.occurredAt,
                    expiresAt: mutation.expiresAt, body: .operation(path: mutation.path, operation: mutation.operation))
                events.append((mutation.user.rawValue, String(decoding: encoder.encode(event), as: UTF8.self)))
                if index % 20 == 7 { events.append(events[events.count - 1]) }
            }

            // Two of each kind.
            var ports = [try ServeCLITests.freePort(), try ServeCLITests.freePort()]
            while ports[1] == ports[0] { ports[1] = try ServeCLITests.freePort() }
            var environment = ProcessInfo.processInfo.environment
            environment["REDDOT_KAFKA_BROKERS"] = nil
            environment["REDDOT_JWT_HS256_SECRET"] = nil
            func ingest(_ name: String) throws -> ReddotChild {
                try ReddotChild(
                    harness.ingestArguments(group: "scale") + ["--instance-id", name], in: harness.folder, name: "\(name)-\(UUID().uuidString.prefix(6))",
                    environment: environment)
            }
            func rollup(_ name: String) throws -> ReddotChild {
                try ReddotChild(
                    ["rollup", "--database-url", harness.database.url, "--no-change-feed", "--log-level", "error"], in: harness.folder,
                    name: "\(name)-\(UUID().uuidString.prefix(6))", environment: environment)
            }
            func serve(_ index: Int) throws -> ReddotChild {
                try ReddotChild(
                    [
                        "serve", "--database-url", harness.database.url, "--port", "\(ports[index])", "--host", "127.0.0.1",
                        "--jwt-hs256-secret", Self.secret, "--log-level", "error",
                    ], in: harness.folder, name: "serve-\(index)-\(UUID().uuidString.prefix(6))", environment: environment)
            }
            var ingests = [try ingest("ingest-a"), try ingest("ingest-b")]
            var rollups = [try rollup("rollup-a"), try rollup("rollup-b")]
            var servers = [try serve(0), try serve(1)]
            defer {
                for child in ingests + rollups + servers where child.process.isRunning { kill(child.process.processIdentifier, SIGKILL) }
            }
            for port in ports { try await ServeCLITests.waitForHealth(port: port, timeout: .seconds(60)) }

            // Eight users followed by a stream each, half on each server; a stream whose server goes
            // away resumes on the other one with Last-Event-ID.
            let followed = Array(users.prefix(8))
            var tokens: [UserID: String] = [:]
            for id in followed {
                tokens[id] = try await CLITests().reddot(["token", "--subject", id.rawValue, "--jwt-hs256-secret", Self.secret]).stdout
                    .trimmingCharacters(in: .whitespacesAndNewlines)
            }
            let logs = followed.map { _ in StreamLog() }
            let streamPorts = ports
            let followers = followed.enumerated().map { index, id in
                let (token, log) = (tokens[id] ?? "", logs[index])
                return Task { await Self.follow(id, token: token, ports: streamPorts, first: index % 2, log: log) }
            }
            defer { for follower in followers { follower.cancel() } }

            // Events flow for about 25 s: early on ingest-a dies (its partitions wait for the group to
            // hand them over), then rollup-a, and, once every partition flows again, serve 0.
            var next = 0
            var slice = 0
            while next < events.count {
                let part = Array(events[next..<min(next + 12, events.count)])
                try await harness.publish(part)
                next += part.count
                slice += 1
                switch slice {
                case 15:
                    await Self.sigkill(ingests[0])
                    ingests[0] = try ingest("ingest-a")
                case 60:
                    await Self.sigkill(rollups[0])
                    rollups[0] = try rollup("rollup-a")
                case 140:
                    await Self.sigkill(servers[0])
                    servers[0] = try serve(0)
                default:
                    break
                }
                try await Task.sleep(for: .milliseconds(100))
            }

            // Every event applied once, every user rolled up.
            let distinct = mutations.count
            let applied = try await harness.waitForCount("SELECT count(*) FROM \(AppliedKeys.table)", distinct, seconds: 120)
            #expect(applied == distinct, "ingest: \(ingests.map(\.standardError))")
            #expect(try await harness.waitForCount("SELECT count(*) FROM dirty_mark", 0, seconds: 60) == 0, "rollup: \(rollups.map(\.standardError))")

            // Every tree equals the model.
            let store = BadgeStore(pool: harness.pool)
            var finalVersions: [UserID: Int64] = [:]
            for id in users {
                let stored = try await store.tree(for: id)
                #expect(stored.tree == models[id, default: BadgeTree()].node(at: .root, now: now), "user \(id)")
                finalVersions[id] = stored.version
            }

            // Every stream: versions only rise, and it ends on the user's last version with the
            // user's tree, as the surviving server answers it.
            try await ServeCLITests.waitForHealth(port: ports[0], timeout: .seconds(60))
            let deadline = ContinuousClock.now + .seconds(60)
            while ContinuousClock.now < deadline, zip(followed, logs).contains(where: { $1.lastVersion != finalVersions[$0] }) {
                try await Task.sleep(for: .milliseconds(100))
            }
            for (index, id) in followed.enumerated() {
                let log = logs[index]
                let versions = log.events.map(\.version)
                #expect(versions == versions.sorted() && Set(versions).count == versions.count, "\(id): \(versions)")
                #expect(log.lastVersion == finalVersions[id], "\(id): the stream ended at \(log.lastVersion ?? -1)")
                let (status, body) = try await ServeCLITests.get(port: ports[1], "/v1/users/\(id.rawValue)/badges", token: tokens[id])
                #expect(status == 200, "\(body)")
                let served = try StreamLog.nodes(ofTree: body)
                #expect(log.nodes == served, "\(id): the stream's tree differs from the server's")
                #expect(log.snapshots == 1, "\(id): every resume was answered from the change log, not with a snapshot")
            }
            // The streams on the server that died resumed on the other one.
            let resumed = logs.enumerated().filter { $0.offset % 2 == 0 }.map { $0.element.connections }
            #expect(resumed.allSatisfy { $0 >= 2 }, "connections per stream on server 0: \(resumed)")
            for follower in followers { follower.cancel() }
        }
    }

    private static func sigkill(_ child: ReddotChild) async {
        Glibc.kill(child.process.processIdentifier, SIGKILL)
        _ = await ChildProcess.exitStatus(of: child.process)
    }

    /// Follows `user`'s stream on `ports[first]`; after the connection ends, on the other port
    /// with `Last-Event-ID`, until cancelled.
    private static func follow(_ user: UserID, token: String, ports: [Int], first: Int, log: StreamLog) async {
        let transport = HTTPTransport()
        defer { transport.close() }
        var index = first
        var lastID: String?
        while !Task.isCancelled {
            var request = URLRequest(url: URL(string: "http://127.0.0.1:\(ports[index % ports.count])/v1/users/\(user.rawValue)/badges/stream")!)
            request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
            if let lastID { request.setValue(lastID, forHTTPHeaderField: "Last-Event-ID") }
            var parser = ServerSentEventParser(lastEventID: lastID)
            do {
                for try await part in transport.start(request) {
                    switch part {
                    case .head(let response):
                        guard response.statusCode == 200 else { throw TestSetupError("stream answered \(response.statusCode)") }
                        log.connected()
                    case .body(let data):
                        for event in parser.feed(data) {
                            try log.apply(event)
                            lastID = event.lastEventID ?? lastID
                        }
                    }
                }
            } catch {}
            index += 1
            try? await Task.sleep(for: .milliseconds(200))
        }
    }
}

/// What one stream received, applied as a client applies it: the nodes by path.
final class StreamLog: Sendable {
    struct Event: Sendable {
        var name: String
        var version: Int64
    }

    /// A node as the client shows it.
    struct Node: Sendable, Hashable {
        var shown: Bool
        var count: Int64
        var unseen: Int64
        var icon: String?
    }

    private struct State {
        var events: [Event] = []
        var nodes: [String: Node] = [:]
        var connections = 0
        var snapshots = 0
    }

    private let state = Mutex(State())

    var events: [Event] { state.withLock { $0.events } }
    var nodes: [String: Node] { state.withLock { $0.nodes } }
    var connections: Int { state.withLock { $0.connections } }
    var snapshots: Int { state.withLock { $0.snapshots } }
    var lastVersion: Int64? { state.withLock { $0.events.last?.version } }

    func connected() { state.withLock { $0.connections += 1 } }

    /// Applies a `snapshot` (the whole tree) or a `change` (the changed nodes).
    func apply(_ event: ServerSentEvent) throws {
        guard event.name == "snapshot" || event.name == "change" else { return }
        let object = try #require(try JSONSerialization.jsonObject(with: Data(event.data.utf8)) as? [String: Any], "\(event.data)")
        let version = try #require(Self.integer(object["version"]), "\(event.data)")
        let snapshot = event.name == "snapshot"
        let nodes = snapshot ? try Self.nodes(ofTree: event.data) : [:]
        let changed = (object["changed"] as? [[String: Any]] ?? []).compactMap(Self.node)
        state.withLock { state in
            state.events.append(Event(name: event.name, version: version))
            if snapshot {
                state.snapshots += 1
                state.nodes = nodes
            }
            for (path, node) in changed { state.nodes[path] = Self.visible(node) ? node : nil }
        }
    }

    /// The nodes of a tree answer (`{"tree": Node}`), flattened by path; a node that shows
    /// nothing (no badge, count and unseen 0) is left out, as a change that removes it does.
    static func nodes(ofTree text: String) throws -> [String: Node] {
        let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(text)")
        var nodes: [String: Node] = [:]
        var pending = [object["tree"] as? [String: Any]].compactMap { $0 }
        while let next = pending.popLast() {
            if let (path, node) = Self.node(next), visible(node) { nodes[path] = node }
            pending += next["children"] as? [[String: Any]] ?? []
        }
        return nodes
    }

    private static func visible(_ node: Node) -> Bool { node.shown || node.count != 0 || node.unseen != 0 }

    private static func node(_ object: [String: Any]) -> (String, Node)? {
        guard let path = object["path"] as? String, let shown = object["shown"] as? Bool,
            let count = integer(object["count"]), let unseen = integer(object["unseen"])
        else { return nil }
        return (path, Node(shown: shown, count: count, unseen: unseen, icon: object["icon"] as? String))
    }

    private static func integer(_ value: Any?) -> Int64? { ChangeFeedCLITests.integer(value) }
}
