import BadgeAPI
import BadgeCore
import BadgeStore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import LibPQ
import Logging
import Metrics
import Prometheus
import TestSupport

/// What every harness offers a test: a client of the API on a live HTTP port, and tokens.
protocol HTTPHarness: Sendable {
    var client: any TestClientProtocol { get }
}

/// The API over an ``InMemoryBadgeStore`` whose changes feed the change hub: routing,
/// validation, auth and ETags, with no PostgreSQL.
struct MemoryHarness: HTTPHarness {
    let store: InMemoryBadgeStore
    let hub: ChangeHub
    let api: BadgeAPI
    let client: any TestClientProtocol

    /// Runs `body` against a live server on an empty in-memory store.
    static func with<T: Sendable>(
        auth: AuthConfiguration = AuthConfiguration(hs256Secret: APIHarness.secret), publisher: (any EventPublisher)? = nil,
        _ body: @Sendable (MemoryHarness) async throws -> T
    ) async throws -> T {
        let hub = ChangeHub(logger: TestServer.logger)
        let store = InMemoryBadgeStore(hub: hub)
        return try await APIHarness.serve(store: store, hub: hub, auth: auth, publisher: publisher) { api, client in
            try await body(MemoryHarness(store: store, hub: hub, api: api, client: client))
        }
    }

    /// Applies mutations, visible at once.
    @discardableResult
    func apply(_ mutations: [BadgeMutation]) async throws -> [UserID: Int64] {
        store.apply(mutations)
    }
}

/// A migrated throwaway database, a running change hub, and the API on a live HTTP port.
struct APIHarness: HTTPHarness, PooledFixture {
    static let secret = "reddot-test-secret-0123456789abcdef"

    /// The registry every harness's `/metrics` shows: the process's metrics system, installed once.
    static let registry: PrometheusCollectorRegistry = {
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        return registry
    }()

    let database: TestDatabase
    let pool: PGPool
    let store: BadgeStore
    let api: BadgeAPI
    let client: any TestClientProtocol

    /// Runs `body` against a live server on a fresh database; everything is stopped and dropped
    /// afterwards, even when `body` throws.
    static func with<T: Sendable>(
        auth: AuthConfiguration = AuthConfiguration(hs256Secret: secret),
        publisher: (any EventPublisher)? = nil,
        databaseURL: String? = nil,
        liveView: Bool = false,
        treeCacheBytes: Int = 0,
        treeCacheMaximumAge: Duration = .seconds(60),
        _ body: @Sendable (APIHarness) async throws -> T
    ) async throws -> T {
        let database = try await TestDatabase.create(prefix: "api")
        let url = databaseURL ?? database.url
        let pool = PGPool(
            configuration: PGConfiguration(
                connectionString: url, connectTimeoutSeconds: 2, statementTimeoutMilliseconds: 5_000,
                sessionSettings: BadgeStore.recommendedSessionSettings),
            maximumConnections: 4, logger: TestServer.logger)
        defer { pool.close() }
        do {
            if databaseURL == nil {
                try await MigratedDatabase.migrate(pool)
            }
            let hub = try ChangeHub(
                configuration: PGConfiguration(connectionString: url), treeCacheBytes: treeCacheBytes,
                treeCacheMaximumAge: treeCacheMaximumAge, logger: TestServer.logger)
            let value = try await serve(
                store: BadgeStore(pool: pool), hub: hub, auth: auth, publisher: publisher, liveView: liveView,
                waitForListener: databaseURL == nil
            ) { api, client in
                try await body(APIHarness(database: database, pool: pool, store: BadgeStore(pool: pool), api: api, client: client))
            }
            await database.drop()
            return value
        } catch {
            await database.drop()
            throw error
        }
    }

    /// Runs `body` against the API over `store` on a live HTTP port, with `hub` running (and,
    /// with `waitForListener`, listening) meanwhile.
    static func serve<T: Sendable>(
        store: any BadgeAPIStore, hub: ChangeHub, auth: AuthConfiguration, publisher: (any EventPublisher)?,
        liveView: Bool = false, waitForListener: Bool = false,
        _ body: @Sendable (BadgeAPI, any TestClientProtocol) async throws -> T
    ) async throws -> T {
        var configuration = APIConfiguration(host: "127.0.0.1", port: 0)
        configuration.heartbeatInterval = .milliseconds(500)
        configuration.databaseTimeout = .seconds(3)
        configuration.liveView = liveView
        let api = BadgeAPI(
            store: store, hub: hub, authenticator: try await Authenticator(configuration: auth),
            publisher: publisher, configuration: configuration, metrics: Self.registry,
            logger: TestServer.logger)
        let application = api.makeApplication()
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await hub.run() }
            defer { group.cancelAll() }
            if waitForListener {
                let deadline = ContinuousClock.now + .seconds(10)
                while !hub.isListening, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
            }
            return try await application.test(.live) { client in try await body(api, client) }
        }
    }

    /// Applies mutations and recomputes at once (the API's own clear path).
    @discardableResult
    func apply(_ mutations: [BadgeMutation]) async throws -> [UserID: Int64] {
        try await store.apply(mutations, recomputeNow: true)
    }

    /// Stores a broadcast as ingest does, bumping the broadcast version.
    func broadcast(_ id: String, at path: String, count: Int64 = 0, icon: String? = nil) async throws {
        try await pool.withTransaction { connection in
            try BadgeStore.lockBroadcastsExclusive(on: connection)
            _ = try connection.query(
                PGStatement(
                    "test.broadcast",
                    """
                    INSERT INTO broadcast (event_id, path, count, icon, shown_in)
                    SELECT $1, $2::ltree, $3, $4, version + 1 FROM broadcast_version
                    """, prepared: false),
                [id, path, count, icon])
            try BadgeStore.bumpBroadcastVersion(on: connection)
        }
    }
}

extension HTTPHarness {
    /// An HS256 token signed with the harness's secret.
    func token(_ subject: String?, scopes: [String] = [], expiresIn: TimeInterval = 600) async throws -> String {
        try await Authenticator.makeHS256Token(secret: APIHarness.secret, subject: subject, scopes: scopes, expiresIn: expiresIn)
    }

    /// One request; the token, if any, as a bearer header.
    func call(
        _ method: HTTPRequest.Method, _ uri: String, token: String? = nil, headers: HTTPFields = [:], body: String? = nil
    ) async throws -> TestResponse {
        var fields = headers
        if let token { fields[.authorization] = "Bearer \(token)" }
        if body != nil, fields[.contentType] == nil { fields[.contentType] = "application/json" }
        return try await client.execute(
            uri: uri, method: method, headers: fields, body: body.map { ByteBuffer(string: $0) }) { $0 }
    }

    func get(_ uri: String, token: String?, headers: HTTPFields = [:]) async throws -> TestResponse {
        try await call(.get, uri, token: token, headers: headers)
    }
}

struct APITestError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

extension TestResponse {
    var text: String { String(buffer: body) }

    /// The decoded `{"user", "version", "tree"}` answer.
    func tree() throws -> UserBadgeTree {
        try JSONDecoder().decode(UserBadgeTree.self, from: Data(text.utf8))
    }

    /// The `{"error": {"code"}}` of an error answer.
    var errorCode: String? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
            let error = object["error"] as? [String: Any]
        else { return nil }
        return error["code"] as? String
    }
}
