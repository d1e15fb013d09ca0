import ArgumentParser
import BadgeAPI
import BadgeCore
import BadgeStore
import Foundation
import Hummingbird
import LibPQ
import Logging
import Metrics
import Prometheus
import RdKafka
import ServiceLifecycle

/// `reddot serve`: the query service.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Answer users' badge trees over HTTP (the query service).",
        discussion: """
            Routes: GET /v1/users/{user}/badges (?path=, ?depth=, ?paths=a,b, long-poll \
            ?wait=30s&since=VERSION), POST /v1/users/{user}/badges/clear, GET \
            /v1/users/{user}/badges/stream (Server-Sent Events), POST /v1/events (with --brokers), \
            /healthz, /readyz, /metrics, /openapi.yaml.

            Auth: Authorization: Bearer <JWT>, HS256 (--jwt-hs256-secret) or RS256/ES256 keys of a \
            JWKS file (--jwt-jwks-file); exp required, nbf/aud/iss checked. A token reads and \
            clears only its own sub's tree; scope reddot:admin acts for any user and publishes.

            Limits for hostile clients: connections idle or with unfinished requests close after \
            --idle-timeout-seconds; bodies must arrive within --body-timeout-seconds (408); streams \
            and long-polls beyond --max-streams answer 503, beyond --max-streams-per-user 429, both \
            with Retry-After; beyond --max-connections new connections wait.

            SIGTERM or SIGINT: stops accepting, ends the streams, finishes the requests in hand \
            and exits 0. Exit codes: 0 stopped by a signal; 64 bad arguments or auth settings; \
            69 the port is in use; 1 another failure.
            """)

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var serve: ServeOptions

    func run() async throws {
        let logger = try database.logger(label: "reddot.serve")
        let registry = MetricsSetup.bootstrap()
        let (application, services) = try await serve.makeServices(database: database, registry: registry, logger: logger)
        try await runServices([application] + services, logger: logger)
    }
}

/// The query service's settings, shared by `serve` and `run`.
struct ServeOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The address to listen on. Default: REDDOT_HTTP_HOST, else 0.0.0.0.", valueName: "address"))
    var host: String?

    @Option(help: ArgumentHelp("The HTTP port. Default: REDDOT_HTTP_PORT, else 8080.", valueName: "port"))
    var port: Int?

    @Option(name: .customLong("jwt-hs256-secret"), help: ArgumentHelp("The HS256 token secret (at least 32 bytes). Default: REDDOT_JWT_HS256_SECRET. Prefer the variable: flags show in ps.", valueName: "secret"))
    var hs256Secret: String?

    @Option(name: .customLong("jwt-jwks-file"), help: ArgumentHelp("A JWKS file of RS256/ES256 keys (each with a kid). Default: REDDOT_JWT_JWKS_FILE.", valueName: "file"))
    var jwksFile: String?

    @Option(name: .customLong("jwt-audience"), help: ArgumentHelp("The aud every token must include. Default: REDDOT_JWT_AUDIENCE.", valueName: "aud"))
    var audience: String?

    @Option(name: .customLong("jwt-issuer"), help: ArgumentHelp("The iss every token must carry. Default: REDDOT_JWT_ISSUER.", valueName: "iss"))
    var issuer: String?

    @Flag(name: .customLong("insecure-no-auth"), help: "No authentication: every request may act for every user. Development only; logs a warning.")
    var insecureNoAuth = false

    @Option(name: .customLong("pool-size"), help: "Database connections for requests. Default: REDDOT_HTTP_POOL_SIZE, else 8.")
    var poolSize: Int?

    @Option(name: .customLong("statement-timeout-ms"), help: "The longest a request's statement may run before it answers 503.")
    var statementTimeoutMilliseconds = 2_000

    @Option(name: .customLong("count-cap"), help: "Counts above this show as N+ in text (99 → \"99+\").")
    var countCap: Int64 = 99

    @Option(name: .customLong("heartbeat-seconds"), help: "Seconds between stream heartbeats.")
    var heartbeatSeconds: Double = 15

    @Option(name: .customLong("tree-cache-mb"), help: ArgumentHelp("Memory for cached whole-tree answers, in MiB; 0 turns the cache off. Default: REDDOT_TREE_CACHE_MB, else 64.", valueName: "MiB"))
    var treeCacheMegabytes: Int?

    @Option(name: .customLong("tree-cache-max-age-seconds"), help: "The longest a cached tree is served (a bound for writers that do not NOTIFY).")
    var treeCacheMaximumAgeSeconds: Double = 60

    @Flag(name: .customLong("live-view"), help: "Serve the live view at / (a page showing one user's tree, live).")
    var liveView = false

    @Option(name: .customLong("publish-brokers"), help: ArgumentHelp("Kafka brokers for POST /v1/events. Default: REDDOT_KAFKA_BROKERS; without either, publishing over HTTP answers 503.", valueName: "list"))
    var publishBrokers: String?

    @Option(name: .customLong("idle-timeout-seconds"), help: ArgumentHelp("Close a connection that sends no complete request part for this long (unfinished request lines or headers, stalled bodies, idle keep-alive); 0: never. Streams and long-polls being answered are not cut. Default: REDDOT_HTTP_IDLE_TIMEOUT_SECONDS, else 30.", valueName: "seconds"))
    var idleTimeoutSeconds: Double?

    @Option(name: .customLong("body-timeout-seconds"), help: ArgumentHelp("A request body must arrive within this, else 408. Default: REDDOT_HTTP_BODY_TIMEOUT_SECONDS, else 10.", valueName: "seconds"))
    var bodyTimeoutSeconds: Double?

    @Option(name: .customLong("max-connections"), help: ArgumentHelp("Open connections at most; more wait in the listen backlog; 0: no limit. Default: REDDOT_HTTP_MAX_CONNECTIONS, else the open-file limit less the pool and 128.", valueName: "count"))
    var maximumConnections: Int?

    @Option(name: .customLong("max-streams"), help: ArgumentHelp("Open streams and long-polls in this process at most; more answer 503 with Retry-After. Default: REDDOT_HTTP_MAX_STREAMS, else 10000.", valueName: "count"))
    var maximumStreams: Int?

    @Option(name: .customLong("max-streams-per-user"), help: ArgumentHelp("Open streams and long-polls of one user in this process at most; more answer 429 with Retry-After. Default: REDDOT_HTTP_MAX_STREAMS_PER_USER, else 32.", valueName: "count"))
    var maximumStreamsPerUser: Int?

    @Option(name: .customLong("publish-topic"), help: ArgumentHelp("The topic POST /v1/events publishes to. Default: REDDOT_KAFKA_TOPIC, else reddot.events.", valueName: "name"))
    var publishTopic: String?

    func validate() throws {
        if let port, !(0...65_535).contains(port) { throw ValidationError("--port takes 0…65535") }
        if let poolSize, !(1...256).contains(poolSize) { throw ValidationError("--pool-size takes 1…256") }
        // PostgreSQL's statement_timeout is an int of milliseconds.
        guard (1...Int(Int32.max)).contains(statementTimeoutMilliseconds) else {
            throw ValidationError("--statement-timeout-ms takes 1…\(Int32.max)")
        }
        guard countCap >= 1 else { throw ValidationError("--count-cap takes a number ≥ 1") }
        // Checked before any conversion to Duration: Int64(1e300 * 1000) traps.
        guard heartbeatSeconds > 0, heartbeatSeconds <= 3_600 else { throw ValidationError("--heartbeat-seconds takes a number > 0 and ≤ 3600") }
        if let treeCacheMegabytes, !(0...65_536).contains(treeCacheMegabytes) {
            throw ValidationError("--tree-cache-mb takes 0…65536")
        }
        guard treeCacheMaximumAgeSeconds > 0, treeCacheMaximumAgeSeconds <= 86_400 else {
            throw ValidationError("--tree-cache-max-age-seconds takes a number > 0 and ≤ 86400")
        }
        if let idleTimeoutSeconds, idleTimeoutSeconds != 0, !(1...86_400).contains(idleTimeoutSeconds) {
            throw ValidationError("--idle-timeout-seconds takes 0 (never) or 1…86400")
        }
        if let bodyTimeoutSeconds, !(0.001...3_600).contains(bodyTimeoutSeconds) {
            throw ValidationError("--body-timeout-seconds takes a number from 0.001 to 3600")
        }
        if let maximumConnections, !(0...10_000_000).contains(maximumConnections) {
            throw ValidationError("--max-connections takes 0…10000000")
        }
        if let maximumStreams, !(1...10_000_000).contains(maximumStreams) { throw ValidationError("--max-streams takes 1…10000000") }
        if let maximumStreamsPerUser, !(1...10_000_000).contains(maximumStreamsPerUser) {
            throw ValidationError("--max-streams-per-user takes 1…10000000")
        }
    }

    /// A number setting: the flag, else the variable (which must parse and lie in `range`), else nil.
    ///
    /// - Throws: `ExitCode` 64 with a sentence for a variable that is not such a number.
    static func number<Value: LosslessStringConvertible & Comparable>(
        _ flag: Value?, _ variable: String, in range: ClosedRange<Value>
    ) throws -> Value? {
        if let flag { return flag }
        guard let text = environment[variable], !text.isEmpty else { return nil }
        guard let value = Value(text), range.contains(value) else {
            throw fail("\(variable) '\(text.prefix(40))' is not a number from \(range.lowerBound) to \(range.upperBound)", code: ExitCodes.usage)
        }
        return value
    }

    /// The server limits from the flags and variables; the connection limit defaults to the
    /// process's open-file limit less the request pool and 128 (the listener, Kafka, logs).
    func serverLimits(poolConnections: Int) throws -> ServerLimits {
        var limits = ServerLimits()
        if let seconds = try Self.number(idleTimeoutSeconds, "REDDOT_HTTP_IDLE_TIMEOUT_SECONDS", in: 0...86_400) {
            // Below a second every connection would close as it opens: refuse it as a typo.
            guard seconds == 0 || seconds >= 1 else {
                throw fail("REDDOT_HTTP_IDLE_TIMEOUT_SECONDS takes 0 (never) or 1…86400", code: ExitCodes.usage)
            }
            limits.idleTimeout = seconds == 0 ? nil : .milliseconds(Int64((seconds * 1000).rounded()))
        }
        if let seconds = try Self.number(bodyTimeoutSeconds, "REDDOT_HTTP_BODY_TIMEOUT_SECONDS", in: 0.001...3_600) {
            limits.bodyTimeout = .milliseconds(Int64((seconds * 1000).rounded()))
        }
        if let count = try Self.number(maximumConnections, "REDDOT_HTTP_MAX_CONNECTIONS", in: 0...10_000_000) {
            limits.maximumConnections = count == 0 ? nil : count
        } else {
            var files = rlimit()
            if getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &files) == 0, files.rlim_cur != rlim_t.max {  // not RLIM_INFINITY
                limits.maximumConnections = max(16, Int(clamping: files.rlim_cur) - poolConnections - 128)
            }
        }
        if let count = try Self.number(maximumStreams, "REDDOT_HTTP_MAX_STREAMS", in: 1...10_000_000) { limits.maximumStreams = count }
        if let count = try Self.number(maximumStreamsPerUser, "REDDOT_HTTP_MAX_STREAMS_PER_USER", in: 1...10_000_000) {
            limits.maximumStreamsPerUser = count
        }
        return limits
    }

    static var environment: [String: String] { ProcessInfo.processInfo.environment }

    static func setting(_ flag: String?, _ variable: String) -> String? {
        if let flag, !flag.isEmpty { return flag }
        if let value = environment[variable], !value.isEmpty { return value }
        return nil
    }

    /// The application and the services it needs (the change hub), ready for one service group:
    /// the options as a configuration for `BadgeAPI.buildApplication`.
    ///
    /// - Throws: `ExitCode` 64 with a sentence for invalid auth settings or a bad port variable.
    /// `kafka`: the events topic's brokers and name when the process has them (`reddot run`),
    /// the defaults of `--publish-brokers` and `--publish-topic`.
    func makeServices(
        database: DatabaseOptions, registry: PrometheusCollectorRegistry, logger: Logger,
        kafka events: (brokers: String, topic: String)? = nil, forceLiveView: Bool = false,
        onRunning: @escaping @Sendable (Int) -> Void = { _ in }
    ) async throws -> (application: any Service, services: [any Service]) {
        let configuration = try serverConfiguration(database: database, forceLiveView: forceLiveView)
        let publisher = try makePublisher(events: events, logger: logger)
        do {
            let built = try await BadgeAPI.buildApplication(
                configuration: configuration, publisher: publisher, metrics: registry, logger: logger, onRunning: onRunning)
            if configuration.auth.insecureNoAuth {
                logger.warning("authentication is OFF (--insecure-no-auth): every request may read and clear every user's badges; never run this in production")
            }
            return built
        } catch let error as AuthSetupError {
            throw fail(error.description, code: ExitCodes.usage)
        }
    }

    /// The query service's configuration from the flags and variables.
    ///
    /// - Throws: `ExitCode` 64 with a sentence for a bad variable or an unreadable JWKS file.
    func serverConfiguration(database: DatabaseOptions, forceLiveView: Bool) throws -> BadgeServerConfiguration {
        var configuration = APIConfiguration()
        configuration.host = Self.setting(host, "REDDOT_HTTP_HOST") ?? "0.0.0.0"
        if let text = Self.setting(port.map(String.init), "REDDOT_HTTP_PORT") {
            guard let value = Int(text), (0...65_535).contains(value) else {
                throw fail("REDDOT_HTTP_PORT '\(text)' is not a port number", code: ExitCodes.usage)
            }
            configuration.port = value
        }
        configuration.display = BadgeDisplay(countCap: countCap)
        configuration.liveView = liveView || forceLiveView
        configuration.heartbeatInterval = .milliseconds(Int64(heartbeatSeconds * 1000))
        var poolConnections = 8
        if let text = Self.setting(poolSize.map(String.init), "REDDOT_HTTP_POOL_SIZE") {
            guard let value = Int(text), (1...256).contains(value) else {
                throw fail("REDDOT_HTTP_POOL_SIZE '\(text)' is not a number from 1 to 256", code: ExitCodes.usage)
            }
            poolConnections = value
        }
        var treeCacheBytes = 64 << 20
        if let text = Self.setting(treeCacheMegabytes.map(String.init), "REDDOT_TREE_CACHE_MB") {
            guard let value = Int(text), (0...65_536).contains(value) else {
                throw fail("REDDOT_TREE_CACHE_MB '\(text)' is not a number from 0 to 65536", code: ExitCodes.usage)
            }
            treeCacheBytes = value << 20
        }
        let limits = try serverLimits(poolConnections: poolConnections)

        var auth = AuthConfiguration(
            hs256Secret: Self.setting(hs256Secret, "REDDOT_JWT_HS256_SECRET"),
            audience: Self.setting(audience, "REDDOT_JWT_AUDIENCE"), issuer: Self.setting(issuer, "REDDOT_JWT_ISSUER"),
            insecureNoAuth: insecureNoAuth)
        if let path = Self.setting(jwksFile, "REDDOT_JWT_JWKS_FILE") {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw fail("cannot read the JWKS file \(path)", code: ExitCodes.usage)
            }
            auth.jwks = String(decoding: data, as: UTF8.self)
        }

        var databaseConfiguration = database.configuration(statementTimeoutMilliseconds: statementTimeoutMilliseconds)
        databaseConfiguration.applicationName = "reddot-serve"
        return BadgeServerConfiguration(
            api: configuration, limits: limits, auth: auth, database: databaseConfiguration,
            listenerDatabase: database.configuration(), poolConnections: poolConnections, treeCacheBytes: treeCacheBytes,
            treeCacheMaximumAge: .milliseconds(Int64(treeCacheMaximumAgeSeconds * 1000)))
    }

    /// The Kafka publisher for `POST /v1/events`, when brokers are set; nil otherwise.
    ///
    /// - Throws: `ExitCode` 64 with a sentence for a bad topic or a producer that cannot be made.
    func makePublisher(events: (brokers: String, topic: String)?, logger: Logger) throws -> KafkaEventPublisher? {
        var publisher: KafkaEventPublisher?
        if let brokers = Self.setting(publishBrokers, "REDDOT_KAFKA_BROKERS") ?? events?.brokers {
            let topic = Self.setting(publishTopic, "REDDOT_KAFKA_TOPIC") ?? events?.topic ?? KafkaOptions.defaultTopic
            if let problem = KafkaOptions.topicProblem(topic) { throw fail(problem, code: ExitCodes.usage) }
            var kafka = KafkaConfiguration(bootstrapServers: brokers)
            kafka.set("client.id", "reddot-serve")
            kafka.set("message.timeout.ms", "10000")
            do {
                publisher = KafkaEventPublisher(producer: try KafkaProducer(configuration: kafka, logger: logger), topic: topic)
            } catch {
                throw fail("cannot create the Kafka producer: \(error.message)", code: ExitCodes.usage)
            }
        }
        return publisher
    }
}

/// `POST /v1/events` through a Kafka producer.
struct KafkaEventPublisher: EventPublisher {
    let producer: KafkaProducer
    let topic: String

    func publish(_ records: [(key: String, payload: [UInt8])]) async throws -> [PublishedRecord] {
        let outgoing = records.map { KafkaOutgoingRecord(topic: topic, key: Array($0.key.utf8), payload: $0.payload) }
        return try await producer.sendAll(outgoing).map { result in
            let delivery = try result.get()
            return PublishedRecord(partition: delivery.partition, offset: delivery.offset)
        }
    }
}
