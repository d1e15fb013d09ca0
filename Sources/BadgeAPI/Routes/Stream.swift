import BadgeCore
import BadgeStore
import Foundation
import HTTPTypes
import Hummingbird

/// `GET /v1/users/{user}/badges/stream`: the user's tree as Server-Sent Events, for the user the
/// route's access check found.
struct StreamController {
    let api: BadgeAPI

    var routes: [APIRoute<APIRequestContext>] {
        [
            APIRoute(.get, "/v1/users/:user/badges/stream", access: .user(queryToken: true)) { request, context in
                let user = try context.requireUser()
                return try await api.limitingStreams(user) { try await self.stream(request, user: user) }
            }
        ]
    }

    /// `GET /v1/users/{user}/badges/stream`: Server-Sent Events.
    ///
    /// - `event: snapshot`, `id: VERSION`, data `{"user", "version", "tree"}`: first, unless the
    ///   client's `Last-Event-ID` (or `?since=`) is the current version already (a resume with
    ///   nothing missed), or a version the change log still reaches: then the missed versions
    ///   come first as `change` events, one per version, in order (up to
    ///   ``maximumReplayVersions`` back; a client further behind gets a snapshot).
    /// - `event: change`, `id: VERSION`, data `{"user", "version", "changed": [nodes]}`: the
    ///   nodes whose display changed (a node that disappeared has `shown` false, count 0), and
    ///   `"mutes"` (the muted nodes now) when they changed.
    /// - `: heartbeat` comments every heartbeat interval, so proxies keep the connection.
    ///
    /// The token may come as `?access_token=` (for browsers' EventSource).
    func stream(_ request: Request, user: UserID) async throws -> Response {
        let parameters = request.uri.queryParameters
        let path = try parameters["path"].map { text throws(APIError) in try TreeQuery.path(String(text)) } ?? .root
        // Both are checked when both are given; the header (sent by a reconnecting browser) wins.
        let resumeVersion: Int64?
        do {
            resumeVersion = try RequestValues.resumeVersion(
                since: parameters["since"].map(String.init), lastEventID: request.headers[Self.lastEventID])
        } catch {
            throw APIError(error)
        }
        // Subscribe before the first read, so that no change can fall between the two.
        let subscription = api.hub.subscribe(user)
        let generation = api.hub.logReads.generation(of: user)
        let firstView: UserView
        let first: UserBadgeTree
        let missed: [UserBadgeTree]
        do {
            firstView = try await api.readView(user, at: path, floor: ReadFloor(atLeast: resumeVersion))
            first = api.tree(user, firstView)
            missed = try await missedTrees(user, at: path, since: resumeVersion, current: first.version)
        } catch {
            subscription.cancel()
            throw error
        }
        var headers = HTTPFields()
        headers[.contentType] = "text/event-stream; charset=utf-8"
        headers[.cacheControl] = "no-store"
        headers[Self.accelBuffering] = "no"
        let heartbeat = api.configuration.heartbeatInterval
        let logger = api.logger
        return Response(
            status: .ok, headers: headers,
            body: ResponseBody { writer in
                defer { subscription.cancel() }
                // A client that goes away ends its stream at once, and gives back its slot of the
                // stream limits, rather than at the next heartbeat that fails to be written.
                do {
                    try await request.body.consumeWithCancellationOnInboundClose { _ in
                        try await withThrowingTaskGroup(of: Void.self) { group in
                            group.addTask {
                                while !Task.isCancelled {
                                    try await Task.sleep(for: heartbeat)
                                    subscription.continuation.yield(.tick)
                                }
                            }
                            defer { group.cancelAll() }
                            var follower = StreamFollower(
                                user: user, current: first, view: firstView, generation: generation, followsLog: true)
                            var opening = "retry: 2000\n\n"
                            if let last = missed.last {
                                // A resume within the change log: the missed versions, one event each.
                                for (before, after) in zip(missed, missed.dropFirst()) {
                                    opening += Self.changeEvent(from: before, to: after) ?? ""
                                }
                                // The parts of the last are not known: the next wake-up reads.
                                follower = StreamFollower(user: user, current: last, view: nil, generation: generation, followsLog: follower.followsLog)
                            } else if resumeVersion != first.version {
                                opening += Self.event("snapshot", id: first.version, data: TreeJSON.encode(first))
                            }
                            try await writer.write(ByteBuffer(string: opening))
                            for await wake in subscription.stream {
                                if wake == .tick {
                                    try await writer.write(ByteBuffer(string: ": heartbeat\n\n"))
                                    continue
                                }
                                let event: String?
                                do {
                                    event = try await follower.next(
                                        after: wake, hub: api.hub, read: { try await api.readView(user, at: path) }, render: { api.tree(user, $0) })
                                } catch {
                                    logger.info("stream read failed; waiting for the next change", metadata: [RedDotLogKey.error: "\(error)"])
                                    continue
                                }
                                guard let event else { continue }
                                try await writer.write(ByteBuffer(string: event))
                            }
                        }
                    }
                } catch is CancellationError {
                    return
                }
                try await writer.finish(nil)
            })
    }

    /// The `change` event from one tree to the next; nil when what the stream shows (its nodes
    /// and mutes) did not change (a change elsewhere in the user's tree moves the version of a
    /// subtree stream).
    static func changeEvent(from before: UserBadgeTree, to after: UserBadgeTree) -> String? {
        let changed = changedNodes(from: before.tree, to: after.tree)
        let mutes = before.mutes == after.mutes ? nil : after.mutes
        guard !changed.isEmpty || mutes != nil else { return nil }
        return event(
            "change", id: after.version,
            data: TreeJSON.encode(TreeChange(user: after.user, version: after.version, changed: changed, mutes: mutes)))
    }

    /// The most versions a stream replays on resume; a client further behind gets a snapshot.
    static let maximumReplayVersions = 1_000

    /// The trees (at `path`) at every version from `since` to now, in order, for a stream that
    /// resumes from `since` (its `Last-Event-ID`); empty when there is nothing to replay (no
    /// resume, nothing missed, or the change log does not reach back: then a snapshot).
    private func missedTrees(_ user: UserID, at path: BadgePath, since: Int64?, current: Int64) async throws -> [UserBadgeTree] {
        guard let since, since < current else { return [] }
        // Up to the version the stream starts from (read from the primary when a replica lags).
        let history = try await api.storage { deadline in
            try await api.store.history(
                for: user, since: since, stepwise: true, limit: Self.maximumReplayVersions, floor: .version(current), deadline: deadline)
        }
        guard let history, history.count > 1 else { return [] }
        api.replays.increment()
        let display = api.configuration.display
        return history.map {
            UserBadgeTree(
                user: user, version: $0.version, aggregates: $0.aggregates, at: path, depth: nil, display: display,
                mutes: $0.mutes.filter { $0.concerns(path) })
        }
    }

    static let lastEventID = HTTPField.Name("Last-Event-ID")!
    static let accelBuffering = HTTPField.Name("X-Accel-Buffering")!

    static func event(_ name: String, id: Int64, data: ByteBuffer) -> String {
        var json = String(buffer: data)
        while json.hasSuffix("\n") { json.removeLast() }
        return "id: \(id)\nevent: \(name)\ndata: \(json)\n\n"
    }

    /// Every node whose display differs between two trees, sorted by path; a node that is
    /// gone appears with `shown` false.
    static func changedNodes(from old: BadgeNode?, to new: BadgeNode?) -> [FlatNode] {
        let before = flatten(old), after = flatten(new)
        var changed: [FlatNode] = []
        for (path, node) in after where before[path] != node {
            changed.append(node)
        }
        for path in before.keys where after[path] == nil {
            changed.append(FlatNode(path: path, aggregate: nil, display: BadgeDisplay()))
        }
        return changed.sorted { $0.path < $1.path }
    }

    private static func flatten(_ node: BadgeNode?) -> [BadgePath: FlatNode] {
        var nodes: [BadgePath: FlatNode] = [:]
        func visit(_ node: BadgeNode) {
            if node.shown { nodes[node.path] = FlatNode(node) }
            node.children.forEach(visit)
        }
        if let node { visit(node) }
        return nodes
    }
}

/// The data of a `change` event.
struct TreeChange: Encodable {
    var user: UserID
    var version: Int64
    var changed: [FlatNode]
    /// The muted nodes after the change, when they changed (left out otherwise).
    var mutes: [MutedNode]?
}
