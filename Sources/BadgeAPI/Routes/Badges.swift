import BadgeCore
import BadgeStore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// `/v1/users/{user}/badges`: tree reads and long-polls, and the actions (clear, seen, mute,
/// unmute), for the user the route's access check found.
struct BadgesController {
    let api: BadgeAPI

    var routes: [APIRoute<APIRequestContext>] {
        [
            APIRoute(.get, "/v1/users/:user/badges", access: .user(queryToken: false)) { request, context in
                let user = try context.requireUser()
                // Checked before a slot is taken: a bad query is a 400, never a 429.
                let query = try TreeQuery(request.uri.queryParameters, maximumWait: api.configuration.maximumWait)
                // A long-poll (`?wait=`) holds a slot like a stream.
                guard query.wait != nil else { return try await self.getBadges(request, query: query, user: user) }
                return try await api.limitingStreams(user) { try await self.getBadges(request, query: query, user: user) }
            },
            APIRoute(.post, "/v1/users/:user/badges/clear", access: .user(queryToken: false)) { request, context in
                try await self.act(.clear, request, user: try context.requireUser())
            },
            APIRoute(.post, "/v1/users/:user/badges/seen", access: .user(queryToken: false)) { request, context in
                try await self.act(.seen, request, user: try context.requireUser())
            },
            APIRoute(.post, "/v1/users/:user/badges/mute", access: .user(queryToken: false)) { request, context in
                try await self.act(.mute, request, user: try context.requireUser())
            },
            APIRoute(.post, "/v1/users/:user/badges/unmute", access: .user(queryToken: false)) { request, context in
                try await self.act(.unmute, request, user: try context.requireUser())
            },
        ]
    }

    /// `GET …/badges` for an authorized `user`.
    private func getBadges(_ request: Request, query: TreeQuery, user: UserID) async throws -> Response {
        let ifNoneMatch = EntityTags(request.headers[.ifNoneMatch])
        if let wait = query.wait {
            // Unchanged while the version is `since`, or, without it, any version If-None-Match
            // names (a client may list several tags).
            if let since = query.since {
                return try await longPoll(user: user, query: query, since: since, wait: wait) { $0 == since }
            }
            guard let ifNoneMatch, let since = ifNoneMatch.firstVersion else {
                throw APIError.badRequest("invalid_query", "wait needs since=VERSION (or If-None-Match)")
            }
            return try await longPoll(user: user, query: query, since: since, wait: wait) { ifNoneMatch.matches($0) }
        }
        let answer = try await read(user: user, query: query, atLeast: ifNoneMatch?.firstVersion)
        return try respond(answer, ifNoneMatch: ifNoneMatch)
    }

    /// A tree answer: its version, and the JSON written only when it is sent (a 304 costs no
    /// encoding).
    private struct Answer {
        var version: Int64
        var encode: @Sendable () throws -> ByteBuffer
        /// The view it shows (a tree or subtree answer), for a long-poll to rebase on a
        /// broadcast change without reading again.
        var view: UserView? = nil
    }

    /// `atLeast`: a version the client has seen; a cached answer older than that is not used,
    /// nor is a version this server wrote for the user lately. With `latest` (the read after
    /// an action), what the primary has, when the store's reads may lag.
    private func read(user: UserID, query: TreeQuery, atLeast: Int64? = nil, latest: Bool = false) async throws -> Answer {
        let atLeast = [atLeast, api.written.floor(for: user)].compactMap { $0 }.max()
        let latest = latest && api.store.readsMayLag
        switch query.target {
        case .tree(let path, let depth) where latest:
            let view = try await api.readView(user, at: path, depth: depth, floor: .latest)
            let tree = api.tree(user, view)
            return Answer(version: tree.version, encode: { TreeJSON.encode(tree) }, view: view)
        case .tree(let path, let depth):
            // Whole trees, what apps poll, are cached (see TreeCache); subtrees are read.
            let cache = api.hub.treeCache
            let whole = path == .root && depth == nil
            if whole, let entry = cache.lookup(user, minimumVersion: atLeast) {
                return Answer(version: entry.version, encode: { entry.json }, view: entry.view)
            }
            // An entry a notification made stale: brought current from the change log, one
            // read of the user's logged versions (shared with their streams) instead of the tree.
            if whole, let (stale, readAt, ticket) = cache.staleView(of: user), let view = await api.hub.followLog(of: user, from: stale),
                view.version >= atLeast ?? 0
            {
                api.cacheLogUpdates.increment()
                let tree = api.tree(user, view)
                let json = TreeJSON.encode(tree)
                cache.store(user, view: view, json: json, ticket: ticket, readAt: readAt)
                return Answer(version: tree.version, encode: { json }, view: view)
            }
            let ticket = whole ? cache.ticket(for: user) : nil
            let view = try await api.readView(user, at: path, depth: depth, floor: ReadFloor(atLeast: atLeast))
            let tree = api.tree(user, view)
            guard let ticket else { return Answer(version: tree.version, encode: { TreeJSON.encode(tree) }, view: view) }
            let json = TreeJSON.encode(tree)
            cache.store(user, view: view, json: json, ticket: ticket)
            return Answer(version: tree.version, encode: { json }, view: view)
        case .nodes(let paths):
            let display = api.configuration.display
            api.storeReads.increment()
            let floor = latest ? .latest : ReadFloor(atLeast: atLeast)
            let (version, aggregates) = try await api.storage { deadline in
                try await api.store.readAggregates(for: user, within: .root, depth: nil, floor: floor, deadline: deadline)
            }
            let nodes = UserBadgeNodes(
                user: user, version: version, nodes: paths.map { FlatNode(path: $0, aggregate: aggregates[$0], display: display) })
            return Answer(version: nodes.version, encode: { try BadgeAPI.encode(nodes) })
        }
    }

    private func respond(_ answer: Answer, ifNoneMatch: EntityTags?) throws -> Response {
        var headers = HTTPFields()
        headers[.eTag] = BadgeAPI.etag(answer.version)
        headers[.cacheControl] = "private, no-cache"
        if let ifNoneMatch, ifNoneMatch.matches(answer.version) {
            return Response(status: .notModified, headers: headers)
        }
        headers[.contentType] = "application/json; charset=utf-8"
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: try answer.encode()))
    }

    /// Answers when the version is no longer `unchanged` (read at least at `since`), or 304 when
    /// `wait` passes first.
    private func longPoll(
        user: UserID, query: TreeQuery, since: Int64, wait: Duration, unchanged: @escaping @Sendable (Int64) -> Bool
    ) async throws -> Response {
        // Subscribe before the first read, so that no change can fall between the two.
        let subscription = api.hub.subscribe(user)
        defer { subscription.cancel() }
        let answer: Answer = try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                try await Task.sleep(for: wait)
                subscription.continuation.yield(.tick)
            }
            defer { group.cancelAll() }
            var answer = try await read(user: user, query: query, atLeast: since)
            if !unchanged(answer.version) { return answer }
            for await wake in subscription.stream {
                if wake == .tick { break }
                if wake == .broadcasts, let view = answer.view, let set = api.hub.broadcastSet, let rebased = view.rebased(on: set) {
                    // A broadcast change: the view rebased on the hub's set, no read.
                    let tree = api.tree(user, rebased)
                    answer = Answer(version: rebased.version, encode: { TreeJSON.encode(tree) }, view: rebased)
                } else if wake == .broadcasts, let view = answer.view, let set = api.hub.broadcastSet, set.version <= view.broadcastVersion {
                    continue
                } else {
                    answer = try await read(user: user, query: query, atLeast: since)
                }
                if !unchanged(answer.version) { break }
            }
            return answer
        }
        if !unchanged(answer.version) {
            return try respond(answer, ifNoneMatch: nil)
        }
        var headers = HTTPFields()
        headers[.eTag] = BadgeAPI.etag(answer.version)
        headers[.cacheControl] = "private, no-cache"
        return Response(status: .notModified, headers: headers)
    }

    /// On the answer to a clear or a seen whose `action_id` was applied before: nothing was done again.
    static let actionRepeated = HTTPField.Name("RedDot-Action-Repeated")!

    /// `POST …/badges/clear`, `…/seen`, `…/mute` and `…/unmute`: the action at the body's path,
    /// a clear or seen at the version the client showed when it gives one (`seen_version`,
    /// `If-Match`), a mute or unmute from now. Answers the subtree at the path after it.
    private func act(_ kind: ActionRequest.Kind, _ request: Request, user: UserID) async throws -> Response {
        let body = try await api.collectBody(request, limit: api.configuration.maximumBodySize)
        let action = try ActionRequest(kind, Array(buffer: body))
        if !kind.takesVersion, request.headers[.ifMatch] != nil {
            throw APIError.badRequest("invalid_if_match", "If-Match does not apply to \(kind): it applies from now")
        }
        let seenVersion = try action.version(ifMatch: request.headers[.ifMatch])
        let outcome = try await api.storage { deadline in
            try await api.store.act(
                action.operation, at: action.path, for: user, seenVersion: seenVersion, actionID: action.actionID, deadline: deadline)
        }
        if case .changedSince(let current) = outcome, let seenVersion {
            var headers = HTTPFields()
            headers[.eTag] = BadgeAPI.etag(current)
            throw APIError(
                .preconditionFailed, code: "version_changed",
                message: "version \(seenVersion) is later than any this tree has had (it is at \(current)): nothing was "
                    + "\(kind == .clear ? "cleared" : "marked seen"); send the version the tree was shown at",
                headers: headers)
        }
        // The notification follows; the next read on this server must not wait for it.
        if outcome != .repeated { api.hub.changedHere(user) }
        let answer = try await read(user: user, query: TreeQuery(target: .tree(action.path, nil)), latest: true)
        api.written.record(user, version: answer.version)
        var response = try respond(answer, ifNoneMatch: nil)
        if outcome == .repeated { response.headers[Self.actionRepeated] = "true" }
        return response
    }
}

/// `{"user", "version", "nodes"}`: the answer to `?paths=a,b`.
struct UserBadgeNodes: Encodable {
    var user: UserID
    var version: Int64
    var nodes: [FlatNode]
}

/// A node without children: requested by `?paths=`, or changed in a stream event. A node with
/// nothing shown has `shown` false, count 0.
struct FlatNode: Encodable, Hashable {
    var path: BadgePath
    var shown: Bool
    var count: Int64
    var unseen: Int64
    var text: String?
    var icon: BadgeIcon?

    init(path: BadgePath, aggregate: BadgeAggregate?, display: BadgeDisplay) {
        self.path = path
        self.shown = aggregate != nil
        self.count = aggregate?.count ?? 0
        self.unseen = aggregate?.unseen ?? 0
        self.text = aggregate.flatMap { display.text(for: $0.count) }
        self.icon = aggregate?.icon
    }

    init(_ node: BadgeNode) {
        self.path = node.path
        self.shown = node.shown
        self.count = node.count
        self.unseen = node.unseen
        self.text = node.text
        self.icon = node.icon
    }

    enum CodingKeys: String, CodingKey { case path, shown, count, unseen, text, icon }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(path, forKey: .path)
        try container.encode(shown, forKey: .shown)
        try container.encode(count, forKey: .count)
        try container.encode(unseen, forKey: .unseen)
        try container.encode(text, forKey: .text)
        try container.encode(icon, forKey: .icon)
    }
}
