public import ArgumentParser
public import BadgeAPI
import Foundation
public import Logging
public import Prometheus
public import ServiceLifecycle

/// The query service's settings, shared by `serve` and `run`.
public struct ServeOptions: ParsableArguments {
    /// Options with their defaults (argument-parser fills them in).
    public init() {}

    @Option(help: ArgumentHelp("The address to listen on. Default: REDDOT_HTTP_HOST, else 0.0.0.0.", valueName: "address"))
    public var host: String?
    @Option(help: ArgumentHelp("The HTTP port. Default: REDDOT_HTTP_PORT, else 8080.", valueName: "port"))
    public var port: Int?
    @Option(name: .customLong("jwt-hs256-secret"), help: ArgumentHelp("The HS256 token secret (at least 32 bytes). Default: REDDOT_JWT_HS256_SECRET. Prefer the variable: flags show in ps.", valueName: "secret"))
    public var hs256Secret: String?
    @Option(name: .customLong("jwt-jwks-file"), help: ArgumentHelp("A JWKS file of RS256/ES256 keys (each with a kid). Default: REDDOT_JWT_JWKS_FILE.", valueName: "file"))
    public var jwksFile: String?
    @Option(name: .customLong("jwt-audience"), help: ArgumentHelp("The aud every token must include. Default: REDDOT_JWT_AUDIENCE.", valueName: "aud"))
    public var audience: String?
    @Option(name: .customLong("jwt-issuer"), help: ArgumentHelp("The iss every token must carry. Default: REDDOT_JWT_ISSUER.", valueName: "iss"))
    public var issuer: String?
    @Flag(name: .customLong("insecure-no-auth"), help: "No authentication: every request may act for every user. Development only; logs a warning.")
    public var insecureNoAuth = false
    @Option(name: .customLong("pool-size"), help: "Database connections for requests. Default: REDDOT_HTTP_POOL_SIZE, else 8.")
    public var poolSize: Int?
    @Option(name: .customLong("statement-timeout-ms"), help: "The longest a request's statement may run before it answers 503.")
    public var statementTimeoutMilliseconds = 2_000
    @Option(name: .customLong("count-cap"), help: "Counts above this show as N+ in text (99 → \"99+\").")
    public var countCap: Int64 = 99
    @Option(name: .customLong("heartbeat-seconds"), help: "Seconds between stream heartbeats.")
    public var heartbeatSeconds: Double = 15
    @Option(name: .customLong("tree-cache-mb"), help: ArgumentHelp("Memory for cached whole-tree answers, in MiB; 0 turns the cache off. Default: REDDOT_TREE_CACHE_MB, else 64.", valueName: "MiB"))
    public var treeCacheMegabytes: Int?
    @Option(name: .customLong("tree-cache-max-age-seconds"), help: "The longest a cached tree is served (a bound for writers that do not NOTIFY).")
    public var treeCacheMaximumAgeSeconds: Double = 60
    @Flag(name: .customLong("live-view"), help: "Serve the live view at / (a page showing one user's tree, live).")
    public var liveView = false
    @Option(name: .customLong("publish-brokers"), help: ArgumentHelp("Kafka brokers for POST /v1/events. Default: REDDOT_KAFKA_BROKERS; without either, publishing over HTTP answers 503.", valueName: "list"))
    public var publishBrokers: String?
    @Option(name: .customLong("idle-timeout-seconds"), help: ArgumentHelp("Close a connection that sends no complete request part for this long (unfinished request lines or headers, stalled bodies, idle keep-alive); 0: never. Streams and long-polls being answered are not cut. Default: REDDOT_HTTP_IDLE_TIMEOUT_SECONDS, else 30.", valueName: "seconds"))
    public var idleTimeoutSeconds: Double?
    @Option(name: .customLong("body-timeout-seconds"), help: ArgumentHelp("A request body must arrive within this, else 408. Default: REDDOT_HTTP_BODY_TIMEOUT_SECONDS, else 10.", valueName: "seconds"))
    public var bodyTimeoutSeconds: Double?
    @Option(name: .customLong("max-connections"), help: ArgumentHelp("Open connections at most; more wait in the listen backlog; 0: no limit. Default: REDDOT_HTTP_MAX_CONNECTIONS, else the open-file limit less the pool and 128.", valueName: "count"))
    public var maximumConnections: Int?
    @Option(name: .customLong("max-streams"), help: ArgumentHelp("Open streams and long-polls in this process at most; more answer 503 with Retry-After. Default: REDDOT_HTTP_MAX_STREAMS, else 10000.", valueName: "count"))
    public var maximumStreams: Int?
    @Option(name: .customLong("max-streams-per-user"), help: ArgumentHelp("Open streams and long-polls of one user in this process at most; more answer 429 with Retry-After. Default: REDDOT_HTTP_MAX_STREAMS_PER_USER, else 32.", valueName: "count"))
    public var maximumStreamsPerUser: Int?
    @Option(name: .customLong("publish-topic"), help: ArgumentHelp("The topic POST /v1/events publishes to. Default: REDDOT_KAFKA_TOPIC, else reddot.events.", valueName: "name"))
    public var publishTopic: String?

    @Option(name: .customLong("replica-database-url"), help: ArgumentHelp("A read replica (a PostgreSQL hot standby of the database) for tree reads, long-polls, delta polls and streams; actions and the read after one go to the primary, and a read the replica is behind for is answered by the primary. Default: REDDOT_REPLICA_DATABASE_URL; without either, everything reads the primary.", valueName: "url"))
    public var replicaDatabaseURL: String?
    @Option(name: .customLong("replica-poll-ms"), help: ArgumentHelp("With a replica: how often, while a notification from the primary waits, the replica's replay position is checked (streams wake once the replica shows the change). Default: REDDOT_REPLICA_POLL_MS, else 50.", valueName: "ms"))
    public var replicaPollMilliseconds: Int?

    /// The flags as the library's settings.
    public var settings: ServeSettings {
        var settings = ServeSettings()
        (settings.host, settings.port, settings.poolSize, settings.liveView) = (host, port, poolSize, liveView)
        (settings.hs256Secret, settings.jwksFile, settings.audience, settings.issuer) = (hs256Secret, jwksFile, audience, issuer)
        (settings.insecureNoAuth, settings.statementTimeoutMilliseconds, settings.countCap) = (insecureNoAuth, statementTimeoutMilliseconds, countCap)
        (settings.heartbeatSeconds, settings.treeCacheMegabytes) = (heartbeatSeconds, treeCacheMegabytes)
        (settings.treeCacheMaximumAgeSeconds, settings.idleTimeoutSeconds) = (treeCacheMaximumAgeSeconds, idleTimeoutSeconds)
        (settings.bodyTimeoutSeconds, settings.maximumConnections) = (bodyTimeoutSeconds, maximumConnections)
        (settings.maximumStreams, settings.maximumStreamsPerUser) = (maximumStreams, maximumStreamsPerUser)
        (settings.publishBrokers, settings.publishTopic) = (publishBrokers, publishTopic)
        (settings.replicaDatabaseURL, settings.replicaPollMilliseconds) = (replicaDatabaseURL, replicaPollMilliseconds)
        return settings
    }

    public func validate() throws {
        if let problem = settings.flagProblem { throw ValidationError(problem) }
    }

    public static var environment: [String: String] { ProcessInfo.processInfo.environment }

    /// The application and the services it needs (the change hub), ready for one service group.
    ///
    /// - Throws: `ExitCode` 64 with a sentence for invalid auth settings, a bad variable or an
    ///   unreadable JWKS file. `kafka`: the events topic's brokers and name when the process has
    ///   them (`reddot run`), the defaults of `--publish-brokers` and `--publish-topic`.
    public func makeServices(
        database: DatabaseOptions, registry: PrometheusCollectorRegistry, logger: Logger,
        kafka events: (brokers: String, topic: String)? = nil, forceLiveView: Bool = false,
        onRunning: @escaping @Sendable (Int) -> Void = { _ in }
    ) async throws -> (application: any Service, services: [any Service]) {
        do {
            let configuration = try settings.configuration(
                database: database.configuration(), environment: Self.environment, forceLiveView: forceLiveView)
            let publisher = try settings.publisher(
                events: events, defaultTopic: KafkaOptions.defaultTopic, environment: Self.environment, logger: logger)
            let built = try await BadgeAPI.buildApplication(
                configuration: configuration, publisher: publisher, metrics: registry, logger: logger, onRunning: onRunning)
            if configuration.auth.insecureNoAuth {
                logger.warning("authentication is OFF (--insecure-no-auth): every request may read and clear every user's badges; never run this in production")
            }
            return built
        } catch let error as ServeSettingsError {
            throw fail(error.message, code: ExitCodes.usage)
        } catch let error as AuthSetupError {
            throw fail(error.description, code: ExitCodes.usage)
        }
    }
}
