import BadgeCore
import BadgeStore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// `/v1/users/{user}/badges`: tree reads and long-polls, and clears.
extension BadgeAPI {
    var badgeRoutes: [APIRoute<BasicRequestContext>] {
        [
            APIRoute(.get, "/v1/users/:user/badges") { request, context in
                // A long-poll (`?wait=`) holds a slot like a stream.
                guard request.uri.queryParameters["wait"] != nil else {
                    return try await self.getBadges(request, user: try await self.authorize(request, context).1)
                }
                return try await self.limitingStreams(request, context, queryToken: false) { user in
                    try await self.getBadges(request, user: user)
                }
            },
            APIRoute(.post, "/v1/users/:user/badges/clear") { request, context in try await self.act(.clear, request, context) },
            APIRoute(.post, "/v1/users/:user/badges/seen") { request, context in try await self.act(.seen, request, context) },
            APIRoute(.post, "/v1/users/:user/badges/mute") { request, context in try await self.act(.mute, request, context) },
            APIRoute(.post, "/v1/users/:user/badges/unmute") { request, context in try await self.act(.unmute, request, context) },
        ]
    }

    /// The caller and the user of a `/v1/users/{user}/…` request, after the checks every such
    /// route makes in this order: a token (401), a valid user id (400), access (404).
    ///
    /// With `queryToken`, a request without an `Authorization` header may carry the token as
    /// `?access_token=` (browsers' EventSource cannot send headers).
    func authorize(_ request: Request, _ context: BasicRequestContext, queryToken: Bool = false) async throws -> (Principal, UserID) {
        var authorization = request.headers[.authorization]
        if authorization == nil, queryToken, let token = request.uri.queryParameters["access_token"] {
            authorization = "Bearer \(token)"
        }
        let principal = try await authenticator.authenticate(authorization)
        let user = try Self.pathUser(context)
        guard principal.mayActFor(user) else { throw APIError.userNotFound() }
        if principal.subject != user.rawValue {
            // An administrator asking for a user RedDot never stored anything for gets the same
            // answer as a user asking for someone else's tree.
            let exists = try await storage { deadline in try await store.userExists(user, deadline: deadline) }
            guard exists else { throw APIError.userNotFound() }
        }
        return (principal, user)
    }

    /// The user id of a `/v1/users/{user}/…` path (400 `invalid_user` when it is not one).
    static func pathUser(_ context: BasicRequestContext) throws -> UserID {
        // Path parameters arrive percent-encoded ("a%2Fb" is the user "a/b").
        let encoded = context.parameters.get("user") ?? ""
        guard let name = encoded.contains("%") ? encoded.removingPercentEncoding : encoded else {
            throw APIError.badRequest("invalid_user", "the user id in the path is not valid percent-encoding")
        }
        do {
            return try UserID(validating: name)
        } catch {
            throw APIError.badRequest("invalid_user", "\(error)")
        }
    }

    /// `GET …/badges` for an authorized `user`.
    private func getBadges(_ request: Request, user: UserID) async throws -> Response {
        let query = try TreeQuery(request.uri.queryParameters, maximumWait: configuration.maximumWait)
        let ifNoneMatch = EntityTags(request.headers[.ifNoneMatch])
        var since = query.since
        if since == nil, query.wait != nil { since = ifNoneMatch?.firstVersion }
        if let wait = query.wait {
            guard let since else {
                throw APIError.badRequest("invalid_query", "wait needs since=VERSION (or If-None-Match)")
            }
            return try await longPoll(user: user, query: query, since: since, wait: wait)
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
        let atLeast = [atLeast, written.floor(for: user)].compactMap { $0 }.max()
        let latest = latest && store.readsMayLag
        switch query.target {
        case .tree(let path, let depth) where latest:
            let view = try await readView(user, at: path, depth: depth, floor: .latest)
            let tree = self.tree(user, view)
            return Answer(version: tree.version, encode: { TreeJSON.encode(tree) }, view: view)
        case .tree(let path, let depth):
            // Whole trees, what apps poll, are cached (see TreeCache); subtrees are read.
            let cache = hub.treeCache
            let whole = path == .root && depth == nil
            if whole, let entry = cache.lookup(user, minimumVersion: atLeast) {
                return Answer(version: entry.version, encode: { entry.json }, view: entry.view)
            }
            // An entry a notification made stale: brought current from the change log, one
            // read of the user's logged versions (shared with their streams) instead of the tree.
            if whole, let (stale, readAt, ticket) = cache.staleView(of: user), let view = await hub.followLog(of: user, from: stale),
                view.version >= atLeast ?? 0
            {
                cacheLogUpdates.increment()
                let tree = self.tree(user, view)
                let json = TreeJSON.encode(tree)
                cache.store(user, view: view, json: json, ticket: ticket, readAt: readAt)
                return Answer(version: tree.version, encode: { json }, view: view)
            }
            let ticket = whole ? cache.ticket(for: user) : nil
            let view = try await readView(user, at: path, depth: depth, floor: ReadFloor(atLeast: atLeast))
            let tree = self.tree(user, view)
            guard let ticket else { return Answer(version: tree.version, encode: { TreeJSON.encode(tree) }, view: view) }
            let json = TreeJSON.encode(tree)
            cache.store(user, view: view, json: json, ticket: ticket)
            return Answer(version: tree.version, encode: { json }, view: view)
        case .nodes(let paths):
            let display = configuration.display
            storeReads.increment()
            let floor = latest ? .latest : ReadFloor(atLeast: atLeast)
            let (version, aggregates) = try await storage { deadline in
                try await store.readAggregates(for: user, within: .root, depth: nil, floor: floor, deadline: deadline)
            }
            let nodes = UserBadgeNodes(
                user: user, version: version, nodes: paths.map { FlatNode(path: $0, aggregate: aggregates[$0], display: display) })
            return Answer(version: nodes.version, encode: { try Self.encode(nodes) })
        }
    }

    /// `user`'s view of the tree, or of the subtree at `path` down to `depth` levels (nil: all),
    /// at least as new as `floor` and as the version this server's last action for the user left.
    func readView(_ user: UserID, at path: BadgePath, depth: Int? = nil, floor: ReadFloor = .any) async throws -> UserView {
        storeReads.increment()
        var floor = floor
        if let written = written.floor(for: user), written > floor.minimumVersion ?? 0, floor != .latest { floor = .version(written) }
        return try await storage { deadline in
            try await store.readView(for: user, within: path, depth: depth, floor: floor, deadline: deadline)
        }
    }

    /// The answer shape of `view`.
    func tree(_ user: UserID, _ view: UserView) -> UserBadgeTree {
        UserBadgeTree(
            user: user, version: view.version, aggregates: view.visibleAggregates, at: view.path, depth: view.depth, display: configuration.display,
            mutes: view.mutes)
    }

    private func respond(_ answer: Answer, ifNoneMatch: EntityTags?) throws -> Response {
        var headers = HTTPFields()
        headers[.eTag] = Self.etag(answer.version)
        headers[.cacheControl] = "private, no-cache"
        if let ifNoneMatch, ifNoneMatch.matches(answer.version) {
            return Response(status: .notModified, headers: headers)
        }
        headers[.contentType] = "application/json; charset=utf-8"
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: try answer.encode()))
    }

    /// Answers when the version differs from `since`, or 304 when `wait` passes first.
    private func longPoll(user: UserID, query: TreeQuery, since: Int64, wait: Duration) async throws -> Response {
        // Subscribe before the first read, so that no change can fall between the two.
        let subscription = hub.subscribe(user)
        defer { subscription.cancel() }
        let answer: Answer = try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                try await Task.sleep(for: wait)
                subscription.continuation.yield(.tick)
            }
            defer { group.cancelAll() }
            var answer = try await read(user: user, query: query, atLeast: since)
            if answer.version != since { return answer }
            for await wake in subscription.stream {
                if wake == .tick { break }
                if wake == .broadcasts, let view = answer.view, let set = hub.broadcastSet, let rebased = view.rebased(on: set) {
                    // A broadcast change: the view rebased on the hub's set, no read.
                    let tree = self.tree(user, rebased)
                    answer = Answer(version: rebased.version, encode: { TreeJSON.encode(tree) }, view: rebased)
                } else if wake == .broadcasts, let view = answer.view, let set = hub.broadcastSet, set.version <= view.broadcastVersion {
                    continue
                } else {
                    answer = try await read(user: user, query: query, atLeast: since)
                }
                if answer.version != since { break }
            }
            return answer
        }
        if answer.version != since {
            return try respond(answer, ifNoneMatch: nil)
        }
        var headers = HTTPFields()
        headers[.eTag] = Self.etag(answer.version)
        headers[.cacheControl] = "private, no-cache"
        return Response(status: .notModified, headers: headers)
    }

    /// On the answer to a clear or a seen whose `action_id` was applied before: nothing was done again.
    static let actionRepeated = HTTPField.Name("RedDot-Action-Repeated")!

    /// `POST …/badges/clear`, `…/seen`, `…/mute` and `…/unmute`: the action at the body's path,
    /// a clear or seen at the version the client showed when it gives one (`seen_version`,
    /// `If-Match`), a mute or unmute from now. Answers the subtree at the path after it.
    private func act(_ kind: ActionRequest.Kind, _ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let (_, user) = try await authorize(request, context)
        let body = try await collectBody(request, limit: configuration.maximumBodySize)
        let action = try ActionRequest(kind, Array(buffer: body))
        if !kind.takesVersion, request.headers[.ifMatch] != nil {
            throw APIError.badRequest("invalid_if_match", "If-Match does not apply to \(kind): it applies from now")
        }
        let seenVersion = try action.version(ifMatch: request.headers[.ifMatch])
        let outcome = try await storage { deadline in
            try await store.act(
                action.operation, at: action.path, for: user, seenVersion: seenVersion, actionID: action.actionID, deadline: deadline)
        }
        if case .changedSince(let current) = outcome, let seenVersion {
            var headers = HTTPFields()
            headers[.eTag] = Self.etag(current)
            throw APIError(
                .preconditionFailed, code: "version_changed",
                message: "version \(seenVersion) is later than any this tree has had (it is at \(current)): nothing was "
                    + "\(kind == .clear ? "cleared" : "marked seen"); send the version the tree was shown at",
                headers: headers)
        }
        // The notification follows; the next read on this server must not wait for it.
        if outcome != .repeated { hub.changedHere(user) }
        let answer = try await read(user: user, query: TreeQuery(target: .tree(action.path, nil)), latest: true)
        written.record(user, version: answer.version)
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
