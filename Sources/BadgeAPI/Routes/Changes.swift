import BadgeCore
import BadgeStore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// `GET /v1/users/{user}/badges/changes?since=V`: delta polling from the change log.
struct ChangesController {
    let api: BadgeAPI

    /// The most versions a delta answer reaches back; a client further behind reads the tree.
    static let maximumDeltaVersions = 10_000

    var routes: [APIRoute<APIRequestContext>] {
        [
            APIRoute(.get, "/v1/users/:user/badges/changes", access: .user(queryToken: false)) { request, context in
                try await self.changes(request, user: try context.requireUser())
            }
        ]
    }

    /// The nodes (within `?path=`, down to `?depth=`) whose display differs between version
    /// `since` and now, merged per node: `{"user", "since", "version", "changed": [nodes],
    /// "mutes"?}`, a node that no longer shows with `shown` false, and the muted nodes that
    /// concern the subtree when they changed. 304 when the tree is still at `since`; 410
    /// when the change log no longer reaches back to it (or it is later than the tree's version):
    /// the client then reads the tree.
    private func changes(_ request: Request, user: UserID) async throws -> Response {
        let parameters = request.uri.queryParameters
        guard let sinceText = parameters["since"] else {
            throw APIError.badRequest("invalid_query", "changes needs since=VERSION (the version the client shows)")
        }
        let query = try TreeQuery(parameters, maximumWait: api.configuration.maximumWait)
        guard case .tree(let path, let depth) = query.target, query.wait == nil else {
            throw APIError.badRequest("invalid_query", "changes takes since, path and depth only (for several nodes or a long-poll, use GET …/badges)")
        }
        let since: Int64
        do {
            since = try RequestValues.since(sinceText)
        } catch {
            throw APIError(error)
        }
        // Never a delta that ends before what this server's last action for the user left.
        let floor = ReadFloor(atLeast: api.written.floor(for: user))
        let history = try await api.storage { deadline in
            try await api.store.history(
                for: user, since: since, stepwise: false, limit: Self.maximumDeltaVersions, floor: floor, deadline: deadline)
        }
        guard let history, let then = history.first, let now = history.last else {
            throw APIError(
                .gone, code: "version_gone",
                message: "version \(since) is not in the change log (it keeps recent versions only, at most "
                    + "\(Self.maximumDeltaVersions) back): read the tree with GET /v1/users/{user}/badges")
        }
        var headers = HTTPFields()
        headers[.eTag] = BadgeAPI.etag(now.version)
        headers[.cacheControl] = "private, no-cache"
        // Nothing since `since`, or the client holds this delta already (its ETag in If-None-Match).
        guard now.version != then.version, EntityTags(request.headers[.ifNoneMatch])?.matches(now.version) != true else {
            return Response(status: .notModified, headers: headers)
        }
        api.deltas.increment()
        let display = api.configuration.display
        let before = UserBadgeTree(user: user, version: then.version, aggregates: then.aggregates, at: path, depth: depth, display: display)
        let after = UserBadgeTree(user: user, version: now.version, aggregates: now.aggregates, at: path, depth: depth, display: display)
        let mutesThen = then.mutes.filter { $0.concerns(path) }, mutesNow = now.mutes.filter { $0.concerns(path) }
        let delta = TreeDelta(
            user: user, since: since, version: now.version, changed: StreamController.changedNodes(from: before.tree, to: after.tree),
            mutes: mutesThen == mutesNow ? nil : mutesNow)
        headers[.contentType] = "application/json; charset=utf-8"
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: try BadgeAPI.encode(delta)))
    }
}

/// The answer of `GET …/badges/changes`.
struct TreeDelta: Encodable {
    var user: UserID
    var since: Int64
    var version: Int64
    var changed: [FlatNode]
    /// The muted nodes now that concern the subtree, when they differ from those at `since`
    /// (left out otherwise).
    var mutes: [MutedNode]?
}
