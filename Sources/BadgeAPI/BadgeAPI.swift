import BadgeCore
public import BadgeStore
import Foundation
public import Hummingbird
import HummingbirdCore
import LibPQ
import NIOCore
public import Logging
public import Prometheus
public import ServiceLifecycle

/// The query service (DESIGN §6): users' badge trees over HTTP, with auth, ETags, long-polls,
/// Server-Sent Events, event publishing and the operations routes.
///
/// It holds no state of its own beyond the change hub's subscribers and its cache of whole
/// trees (kept current by the same notifications): any number of instances may serve the same
/// database.
public struct BadgeAPI: Sendable {
    /// The store it reads and clears through.
    public let store: BadgeStore
    /// The process's change hub (run it as a service next to the application).
    public let hub: ChangeHub
    /// Verifies bearer tokens.
    public let authenticator: Authenticator
    /// Where `POST /v1/events` publishes; nil answers 503.
    public let publisher: (any EventPublisher)?
    /// The settings.
    public let configuration: APIConfiguration
    /// The registry `/metrics` shows; nil: 404.
    public let metrics: PrometheusCollectorRegistry?
    /// Extra readiness checks for `/readyz`, beyond the built-in ones (the database answers, its
    /// schema is at the version this build needs, the change listener is connected): each
    /// returns a problem, or nil when fine.
    public let readinessChecks: [@Sendable () async -> String?]
    /// What clients may hold: connections, idle time, header sizes, streams.
    public let limits: ServerLimits
    /// Where it logs.
    public let logger: Logger
    /// The open streams and long-polls, against `limits`.
    let streamLimiter: StreamLimiter

    /// An API over `store`.
    public init(
        store: BadgeStore, hub: ChangeHub, authenticator: Authenticator, publisher: (any EventPublisher)? = nil,
        configuration: APIConfiguration = APIConfiguration(), metrics: PrometheusCollectorRegistry? = nil,
        readinessChecks: [@Sendable () async -> String?] = [], limits: ServerLimits = ServerLimits(), logger: Logger
    ) {
        self.store = store
        self.hub = hub
        self.authenticator = authenticator
        self.publisher = publisher
        self.configuration = configuration
        self.metrics = metrics
        self.readinessChecks = readinessChecks
        self.limits = limits
        self.logger = logger
        self.streamLimiter = StreamLimiter(limits: limits)
    }

    /// The router with every route.
    public func makeRouter() -> Router<BasicRequestContext> {
        var routes: [APIRoute<BasicRequestContext>] = [
            APIRoute(.get, "/v1/users/:user/badges") { request, context in
                // A long-poll (`?wait=`) holds a slot like a stream.
                guard request.uri.queryParameters["wait"] != nil else {
                    return try await self.getBadges(request, user: try await self.authorize(request, context).1)
                }
                return try await self.limitingStreams(request, context, queryToken: false) { user in
                    try await self.getBadges(request, user: user)
                }
            },
            APIRoute(.post, "/v1/users/:user/badges/clear") { request, context in try await self.clear(request, context) },
            APIRoute(.get, "/v1/users/:user/badges/stream") { request, context in
                try await self.limitingStreams(request, context, queryToken: true) { user in try await self.stream(request, user: user) }
            },
            APIRoute(.post, "/v1/events") { request, _ in try await self.publishEvents(request) },
            APIRoute(.get, "/healthz") { _, _ in Self.json(status: .ok, "{\"status\":\"ok\"}") },
            APIRoute(.get, "/readyz") { _, _ in await self.readiness() },
            APIRoute(.get, "/metrics") { _, _ in try self.metricsPage() },
            APIRoute(.get, "/openapi.yaml") { _, _ in
                var headers = HTTPFields()
                headers[.contentType] = "application/yaml; charset=utf-8"
                return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: OpenAPIDocument.yaml)))
            },
        ]
        if configuration.liveView {
            routes.append(
                APIRoute(.get, "/") { _, _ in
                    var headers = HTTPFields()
                    headers[.contentType] = "text/html; charset=utf-8"
                    headers[.cacheControl] = "no-store"
                    return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: LiveView.html)))
                })
        }
        let router = Router(context: BasicRequestContext.self)
        router.addAPIRoutes(routes, logger: logger)
        return router
    }

    /// An application serving `makeRouter()` on the configured address, running `services`
    /// (give it the hub, unless something else runs it) in its service group, under `limits`
    /// (idle connections, header sizes, the connection count).
    public func makeApplication(
        services: [any Service] = [], onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        let decoder = HTTP1Channel.Configuration.DecoderConfiguration(
            maxHeaderFieldSize: limits.maximumHeaderFieldSize, maxHeaderListSize: limits.maximumHeaderListSize,
            maxHeaderFieldCount: limits.maximumHeaderCount)
        let http = HTTP1Channel.Configuration(
            idleTimeout: limits.idleTimeout.map { .nanoseconds($0.nanoseconds) }, httpDecoderConfiguration: decoder)
        return Application(
            router: makeRouter(),
            server: .http1(configuration: http),
            configuration: ApplicationConfiguration(
                address: .hostname(configuration.host, port: configuration.port), serverName: nil,
                availableConnectionsDelegate: ConnectionCounter(maximum: limits.maximumConnections)),
            services: services,
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? 0) },
            logger: logger)
    }

    /// Authorizes a stream or long-poll and runs its route for the user, holding a slot of the
    /// stream limits until the response has been written (or dropped); over a limit, 503 or 429
    /// with `Retry-After`.
    private func limitingStreams(
        _ request: Request, _ context: BasicRequestContext, queryToken: Bool, _ route: (UserID) async throws -> Response
    ) async throws -> Response {
        // Only a caller who may act for the user takes (or learns about) that user's slots: a
        // flood of bad tokens must not use up a victim's streams.
        let (_, user) = try await authorize(request, context, queryToken: queryToken)
        switch streamLimiter.acquire(user.rawValue) {
        case .failure(let refusal):
            throw refusal
        case .success(let permit):
            var response = try await route(user)
            let body = response.body
            response.body = ResponseBody(contentLength: body.contentLength) { writer in
                defer { permit.release() }
                try await body.write(writer)
            }
            return response
        }
    }

    // MARK: - badge routes

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
        // Path parameters arrive percent-encoded ("a%2Fb" is the user "a/b").
        let encoded = context.parameters.get("user") ?? ""
        guard let name = encoded.contains("%") ? encoded.removingPercentEncoding : encoded else {
            throw APIError.badRequest("invalid_user", "the user id in the path is not valid percent-encoding")
        }
        let user: UserID
        do {
            user = try UserID(validating: name)
        } catch {
            throw APIError.badRequest("invalid_user", "\(error)")
        }
        guard principal.mayActFor(user) else { throw APIError.userNotFound() }
        if principal.subject != user.rawValue {
            // An administrator asking for a user RedDot never stored anything for gets the same
            // answer as a user asking for someone else's tree.
            let exists = try await database { try BadgeStore.userExists(user, on: $0) }
            guard exists else { throw APIError.userNotFound() }
        }
        return (principal, user)
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
    }

    /// `atLeast`: a version the client has seen; a cached answer older than that is not used.
    private func read(user: UserID, query: TreeQuery, atLeast: Int64? = nil) async throws -> Answer {
        let display = configuration.display
        switch query.target {
        case .tree(let path, let depth):
            // Whole trees, what apps poll, are cached (see TreeCache); subtrees are read.
            let cache = hub.treeCache
            let whole = path == .root && depth == nil
            if whole, let entry = cache.lookup(user, minimumVersion: atLeast) {
                return Answer(version: entry.version, encode: { entry.json })
            }
            let ticket = whole ? cache.ticket(for: user) : nil
            let tree = try await database { connection in
                let (version, aggregates) = try BadgeStore.readAggregates(for: user, within: path, depth: depth, on: connection)
                return UserBadgeTree(
                    user: user, version: version, tree: BadgeNode.build(aggregates: aggregates, at: path, depth: depth, display: display))
            }
            guard let ticket else { return Answer(version: tree.version, encode: { TreeJSON.encode(tree) }) }
            let json = TreeJSON.encode(tree)
            cache.store(user, version: tree.version, json: json, ticket: ticket)
            return Answer(version: tree.version, encode: { json })
        case .nodes(let paths):
            let nodes = try await database { connection in
                let (version, aggregates) = try BadgeStore.readAggregates(for: user, on: connection)
                let nodes = paths.map { path in
                    FlatNode(path: path, aggregate: aggregates[path], display: display)
                }
                return UserBadgeNodes(user: user, version: version, nodes: nodes)
            }
            return Answer(version: nodes.version, encode: { try Self.encode(nodes) })
        }
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
                answer = try await read(user: user, query: query, atLeast: since)
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

    private func clear(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let (_, user) = try await authorize(request, context)
        let body = try await collectBody(request, limit: configuration.maximumBodySize)
        let clear = try ClearRequest(Array(buffer: body))
        _ = try await withDeadline {
            try await store.apply(
                [BadgeMutation(user: user, path: clear.path, operation: .clear(force: clear.force))], recomputeNow: true)
        }
        // The notification follows; the next read on this server must not wait for it.
        hub.treeCache.invalidate(user)
        let answer = try await read(user: user, query: TreeQuery(target: .tree(clear.path, nil)))
        return try respond(answer, ifNoneMatch: nil)
    }

    // MARK: - events

    private func publishEvents(_ request: Request) async throws -> Response {
        let principal = try await authenticator.authenticate(request.headers[.authorization])
        guard principal.mayPublish else {
            throw APIError(.forbidden, code: "forbidden", message: "publishing needs a token with scope reddot:admin or reddot:publish")
        }
        guard let publisher else {
            throw APIError(.serviceUnavailable, code: "publishing_disabled", message: "this server has no Kafka producer (start it with --brokers)")
        }
        let body = Array(buffer: try await collectBody(request, limit: configuration.maximumEventsBodySize))
        let contentType = request.headers[.contentType]?.lowercased() ?? ""
        let lines: [ArraySlice<UInt8>]
        if contentType.hasPrefix("application/x-ndjson") || contentType.hasPrefix("application/jsonl") {
            lines = body.split(separator: UInt8(ascii: "\n")).filter { !$0.allSatisfy { $0 == 32 || $0 == 13 || $0 == 9 } }
        } else {
            lines = [body[...]]
        }
        guard !lines.isEmpty else { throw APIError.badRequest("malformed_json", "the body holds no event") }
        let intake = EventIntake(rules: nil)
        var records: [(key: String, payload: [UInt8])] = []
        var ids: [String] = []
        for (index, line) in lines.enumerated() {
            switch intake.check(line) {
            case .failure(let refused):
                let prefix = lines.count > 1 ? "event \(index + 1): " : ""
                throw APIError.badRequest(refused.rejection.reason.rawValue, prefix + refused.rejection.message)
            case .success(let event):
                records.append((event.recordKey, Array(line)))
                ids.append(event.id.rawValue)
            }
        }
        let delivered: [PublishedRecord]
        do {
            delivered = try await publisher.publish(records)
        } catch {
            logger.warning("publishing events failed", metadata: ["error": "\(error)"])
            throw APIError.unavailable("the event log (Kafka) did not take the events; retry (event ids make it safe)")
        }
        let items = zip(ids, delivered).map { PublishedEvent(id: $0, partition: $1.partition, offset: $1.offset) }
        return Self.json(status: .accepted, String(decoding: try Self.encode(PublishAnswer(published: items.count, events: items)).readableBytesView, as: UTF8.self))
    }

    // MARK: - operations

    private func readiness() async -> Response {
        var problems: [String] = []
        do {
            let applied = try await store.pool.withConnection(deadline: .now + .seconds(2)) { connection in
                try Migrator.appliedSchemaVersion(on: connection)
            }
            if applied < Migrator.requiredSchemaVersion {
                problems.append(
                    "the schema is at version \(applied); this build needs \(Migrator.requiredSchemaVersion) (run reddot migrate up)")
            }
        } catch {
            problems.append("the database is unreachable")
        }
        if !hub.isListening { problems.append("the change listener is not connected") }
        if problems.isEmpty {
            for check in readinessChecks {
                if let problem = await check() { problems.append(problem) }
            }
        }
        if problems.isEmpty { return Self.json(status: .ok, "{\"status\":\"ready\"}") }
        return APIError(.serviceUnavailable, code: "not_ready", message: problems.joined(separator: "; ")).response()
    }

    private func metricsPage() throws -> Response {
        guard let metrics else { throw APIError(.notFound, code: "not_found", message: "metrics are not enabled") }
        return Self.metricsResponse(metrics)
    }

    static func metricsResponse(_ metrics: PrometheusCollectorRegistry) -> Response {
        var bytes: [UInt8] = []
        metrics.emit(into: &bytes)
        var headers = HTTPFields()
        headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    // MARK: - helpers

    /// The request body; 413 when it is over `limit` bytes, 408 when it has not all arrived
    /// within the body timeout, 400 when its framing is broken.
    func collectBody(_ request: Request, limit: Int) async throws -> ByteBuffer {
        let timeout = limits.bodyTimeout
        do {
            return try await withThrowingTaskGroup(of: ByteBuffer?.self) { group in
                group.addTask { try await request.body.collect(upTo: limit) }
                group.addTask {
                    try await Task.sleep(for: timeout)
                    return nil
                }
                defer { group.cancelAll() }
                guard let first = try await group.next(), let body = first else {
                    throw APIError(.requestTimeout, code: "body_timeout", message: "the request body did not arrive within \(timeout)")
                }
                return body
            }
        } catch is NIOTooManyBytesError {
            throw APIError(.contentTooLarge, code: "body_too_large", message: "the request body is over \(limit) bytes")
        } catch let error as APIError {
            throw error
        } catch is CancellationError {
            throw APIError.unavailable("the server is stopping; try again shortly")
        } catch {
            // The body's framing is broken (a bad chunk size, a length that does not match) or
            // the connection went away: the client's fault, never a 500.
            throw APIError.badRequest("invalid_body", "the request body could not be read (malformed chunked encoding or length)")
        }
    }

    /// Runs `body` on a pooled connection; a database that does not answer within the
    /// configured timeout gives 503 instead of a hang.
    func database<T: Sendable>(_ body: @escaping @Sendable (PGConnection) throws -> T) async throws -> T {
        // The pool's deadline costs no task and no timer per request (withDeadline costs both).
        do {
            return try await store.pool.withConnection(deadline: .now + configuration.databaseTimeout, body)
        } catch {
            throw APIError.from(error)
        }
    }

    /// Runs `body`, which may take several leases (a write with its retries), and answers 503
    /// when it has not finished within the configured timeout. Single reads use `database`.
    func withDeadline<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
        let limit = configuration.databaseTimeout
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(for: limit)
                return nil
            }
            defer { group.cancelAll() }
            do {
                guard let first = try await group.next(), let value = first else {
                    throw APIError.unavailable("the database did not answer in time; try again shortly")
                }
                return value
            } catch {
                throw APIError.from(error)
            }
        }
    }

    static func etag(_ version: Int64) -> String { EntityTags.tag(version) }

    static func encode(_ value: some Encodable) throws -> ByteBuffer {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var buffer = ByteBuffer(data: try encoder.encode(value))
        buffer.writeString("\n")
        return buffer
    }

    static func json(status: HTTPResponse.Status, _ text: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json; charset=utf-8"
        headers[.cacheControl] = "no-store"
        let body = text.hasSuffix("\n") ? text : text + "\n"
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: body)))
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
    var text: String?
    var icon: BadgeIcon?

    init(path: BadgePath, aggregate: BadgeAggregate?, display: BadgeDisplay) {
        self.path = path
        self.shown = aggregate != nil
        self.count = aggregate?.count ?? 0
        self.text = aggregate.flatMap { display.text(for: $0.count) }
        self.icon = aggregate?.icon
    }

    init(_ node: BadgeNode) {
        self.path = node.path
        self.shown = node.shown
        self.count = node.count
        self.text = node.text
        self.icon = node.icon
    }

    enum CodingKeys: String, CodingKey { case path, shown, count, text, icon }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(path, forKey: .path)
        try container.encode(shown, forKey: .shown)
        try container.encode(count, forKey: .count)
        try container.encode(text, forKey: .text)
        try container.encode(icon, forKey: .icon)
    }
}

struct PublishedEvent: Encodable {
    var id: String
    var partition: Int32
    var offset: Int64
}

struct PublishAnswer: Encodable {
    var published: Int
    var events: [PublishedEvent]
}
