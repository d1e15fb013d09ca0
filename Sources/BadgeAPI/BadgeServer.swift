public import LibPQ
public import Logging
public import Prometheus
public import ServiceLifecycle
import Backoff
import BadgeStore

/// Everything a query-service process is built from: what `reddot serve` reads from its flags
/// and variables.
public struct BadgeServerConfiguration: Sendable {
    /// How the routes answer, and where the server listens.
    public var api: APIConfiguration
    /// What clients may hold.
    public var limits: ServerLimits
    /// How tokens are verified.
    public var auth: AuthConfiguration
    /// The requests' database connections (with their statement timeout); BadgeStore's
    /// recommended session settings are added.
    public var database: PGConfiguration
    /// The change listener's connection (no statement timeout: it waits for notifications).
    public var listenerDatabase: PGConfiguration
    /// Database connections for requests.
    public var poolConnections: Int
    /// Memory for cached whole-tree answers, in bytes (0: no cache).
    public var treeCacheBytes: Int
    /// The longest a cached tree is served.
    public var treeCacheMaximumAge: Duration
    /// A read replica (a hot standby) for tree reads, long-polls, delta polls and streams, with
    /// the requests' statement timeout; nil: everything on `database`. With one, writes go to
    /// `database` (``ReplicatedBadgeStore``), and each notification from `listenerDatabase` is
    /// released once the replica has replayed it (``ReplicaListener``).
    public var replicaDatabase: PGConfiguration?
    /// How often, while a notification waits, the replica's replay position is checked.
    public var replicaPollInterval: Duration = .milliseconds(50)

    /// A configuration; the defaults are those of `reddot serve`.
    public init(
        api: APIConfiguration = APIConfiguration(), limits: ServerLimits = ServerLimits(), auth: AuthConfiguration,
        database: PGConfiguration, listenerDatabase: PGConfiguration, poolConnections: Int = 8, treeCacheBytes: Int = 64 << 20,
        treeCacheMaximumAge: Duration = .seconds(60)
    ) {
        self.api = api
        self.limits = limits
        self.auth = auth
        self.database = database
        self.listenerDatabase = listenerDatabase
        self.poolConnections = poolConnections
        self.treeCacheBytes = treeCacheBytes
        self.treeCacheMaximumAge = treeCacheMaximumAge
    }
}

extension BadgeAPI {
    /// The query service over PostgreSQL: the HTTP application and the services it needs (the
    /// change hub), ready for one service group. The application owns its connection pool.
    ///
    /// - Parameters:
    ///   - publisher: where `POST /v1/events` publishes; nil answers 503.
    ///   - metrics: the registry `/metrics` shows.
    ///   - onRunning: called with the bound port once the server listens.
    /// - Throws: `AuthSetupError` for invalid auth settings; `PGError` only for an invalid
    ///   channel name (a programming error).
    public static func buildApplication(
        configuration: BadgeServerConfiguration, publisher: (any EventPublisher)? = nil, metrics: PrometheusCollectorRegistry?,
        logger: Logger, onRunning: @escaping @Sendable (Int) -> Void = { _ in }
    ) async throws -> (application: any Service, services: [any Service]) {
        let authenticator = try await Authenticator(configuration: configuration.auth)
        var database = configuration.database
        database.sessionSettings += BadgeStore.recommendedSessionSettings
        let pool = PGPool(configuration: database, maximumConnections: configuration.poolConnections, logger: logger)
        let store: any BadgeAPIStore
        let hub: ChangeHub
        let primary = BadgeStore(pool: pool, display: configuration.api.display)
        if var replicaDatabase = configuration.replicaDatabase {
            let listener = try ReplicaListener(
                primary: configuration.listenerDatabase, replica: replicaDatabase, interval: configuration.replicaPollInterval, logger: logger)
            hub = ChangeHub(
                following: listener, treeCacheBytes: configuration.treeCacheBytes, treeCacheMaximumAge: configuration.treeCacheMaximumAge,
                logger: logger)
            replicaDatabase.sessionSettings += BadgeStore.recommendedSessionSettings + [("default_transaction_read_only", "on")]
            let replicaPool = PGPool(configuration: replicaDatabase, maximumConnections: configuration.poolConnections, logger: logger)
            store = ReplicatedBadgeStore(
                primary: primary, replica: BadgeStore(pool: replicaPool, display: configuration.api.display), logger: logger)
            logger.info(
                "reads go to the replica; writes to the primary",
                metadata: ["replica.poll_ms": "\(Backoff.milliseconds(configuration.replicaPollInterval))"])
        } else {
            hub = try ChangeHub(
                configuration: configuration.listenerDatabase, treeCacheBytes: configuration.treeCacheBytes,
                treeCacheMaximumAge: configuration.treeCacheMaximumAge, logger: logger)
            store = primary
        }
        let api = BadgeAPI(
            store: store, hub: hub, authenticator: authenticator,
            publisher: publisher, configuration: configuration.api, metrics: metrics, limits: configuration.limits,
            logger: logger)
        let address = "\(configuration.api.host):\(configuration.api.port)"
        let application = api.makeApplication { port in
            logger.info("serving badges", metadata: ["http.address": "\(address)", "http.port": "\(port)"])
            onRunning(port)
        }
        // Shutdown runs in reverse order of the list: give the hub after the application, so that
        // it stops first and ends the streams and long-polls, and the server can drain.
        return (application, [hub])
    }
}
