import BadgeCore
import BadgeStore
import Foundation
public import Hummingbird
import HummingbirdCore
import LibPQ
import Metrics
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
    /// The storage it reads and clears through (`BadgeStore` in production).
    public let store: any BadgeAPIStore
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
    /// Extra readiness checks for `/readyz`, beyond the built-in ones (the store's
    /// `readinessProblems`, the change listener is connected): each
    /// returns a problem, or nil when fine.
    public let readinessChecks: [@Sendable () async -> String?]
    /// What clients may hold: connections, idle time, header sizes, streams.
    public let limits: ServerLimits
    /// Where it logs.
    public let logger: Logger
    /// The open streams and long-polls, against `limits`.
    let streamLimiter: StreamLimiter
    /// The versions this server's actions left users' trees at (reads here must not show older).
    let written = WrittenVersions()
    /// Streams resumed from the change log, and delta answers served from it.
    let replays = Counter(label: "reddot_api_replays_total", dimensions: [("kind", "stream")])
    let deltas = Counter(label: "reddot_api_replays_total", dimensions: [("kind", "changes")])
    /// Reads of users' trees from the store (a cache hit, or a view rebased on a broadcast
    /// change, costs none).
    let storeReads = Counter(label: "reddot_api_store_reads_total")
    /// Stale cached trees brought current from the change log instead of a read.
    let cacheLogUpdates = Counter(label: "reddot_api_tree_cache_log_updates_total")

    /// An API over `store`.
    public init(
        store: any BadgeAPIStore, hub: ChangeHub, authenticator: Authenticator, publisher: (any EventPublisher)? = nil,
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
        hub.attach(store: store, display: configuration.display)
    }

    /// Every route, by controller.
    var routes: [APIRoute<APIRequestContext>] {
        BadgesController(api: self).routes + ChangesController(api: self).routes + StreamController(api: self).routes
            + EventsController(api: self).routes + UsersController(api: self).routes + DevicesController(api: self).routes
            + WebhooksController(api: self).routes + OperationsController(api: self).routes
    }

    /// The router with every route, each behind its access check (``AccessMiddleware``).
    public func makeRouter() -> Router<APIRequestContext> {
        let router = Router(context: APIRequestContext.self)
        let (authenticator, store) = (authenticator, store)
        let timeout = configuration.databaseTimeout
        router.addAPIRoutes(routes, logger: logger) { access in
            AccessMiddleware(access: access, authenticator: authenticator) { user in
                do {
                    return try await store.userExists(user, deadline: .now + timeout)
                } catch {
                    throw APIError.from(error)
                }
            }
        }
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

    // MARK: - helpers the controllers share

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

    /// Runs a stream's or long-poll's route for `user` (authorized by the route's access check),
    /// holding a slot of the stream limits until the response has been written (or dropped);
    /// over a limit, 503 or 429 with `Retry-After`. Only a caller who may act for the user takes
    /// (or learns about) that user's slots: a flood of bad tokens must not use up a victim's
    /// streams.
    func limitingStreams(_ user: UserID, _ route: () async throws -> Response) async throws -> Response {
        switch streamLimiter.acquire(user.rawValue) {
        case .failure(let refusal):
            throw refusal
        case .success(let permit):
            var response = try await route()
            let body = response.body
            response.body = ResponseBody(contentLength: body.contentLength) { writer in
                defer { permit.release() }
                try await body.write(writer)
            }
            return response
        }
    }


    /// The request body; 413 when it is over `limit` bytes, 408 when it has not all arrived
    /// within the body timeout, 400 when its framing is broken.
    func collectBody(_ request: Request, limit: Int) async throws -> ByteBuffer {
        // A body declared too large is refused at once, without waiting for its bytes.
        if let declared = request.headers[.contentLength].flatMap({ Int($0) }), declared > limit {
            throw APIError(.contentTooLarge, code: "body_too_large", message: "the request body is over \(limit) bytes")
        }
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

    /// Runs `body` with the deadline of one storage call (now plus the configured database
    /// timeout); a failure becomes the API's answer (503 for a database that does not answer in
    /// time, or at all).
    func storage<T: Sendable>(_ body: (ContinuousClock.Instant) async throws -> T) async throws -> T {
        do {
            return try await body(.now + configuration.databaseTimeout)
        } catch {
            throw APIError.from(error)
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
