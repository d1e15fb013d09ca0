public import ArgumentParser
import BadgeCore
import Foundation
public import LibPQ
public import Logging

/// Every setting of `reddot serve` (and of `reddot run`'s query service), declared once: its flag,
/// its `REDDOT_*` variable, its default, its help and the values it takes; a flag left out is nil
/// where its variable or a computed default applies. The commands include this type as an option
/// group; ``configuration(database:environment:forceLiveView:openFileLimit:)`` makes the
/// `BadgeServerConfiguration`. A new setting is one `@Option` here, with its range in
/// ``flagProblem``.
public struct ServeSettings: ParsableArguments, Sendable {
    /// Options in their definition state; read ``defaults`` (or a parsed value) instead.
    public init() {}

    /// Every flag left out, as `reddot serve` with no flags parses them (no variable read).
    public static let defaults: ServeSettings = {
        do {
            return try ServeSettings.parse([])
        } catch {
            preconditionFailure("serve's defaults are out of their own ranges: \(error)")
        }
    }()

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
    @Option(name: .customLong("heartbeat-seconds"), help: "Seconds between stream heartbeats (0.1…3600).")
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

    public func validate() throws {
        if let flagProblem { throw ValidationError(flagProblem) }
    }

    /// The first flag outside its range, as a sentence naming the flag (the command's usage
    /// error); nil when every given flag is in range.
    public var flagProblem: String? {
        if let port, !(0...65_535).contains(port) { return "--port takes 0…65535" }
        if let poolSize, !(1...256).contains(poolSize) { return "--pool-size takes 1…256" }
        // PostgreSQL's statement_timeout is an int of milliseconds.
        guard (1...Int(Int32.max)).contains(statementTimeoutMilliseconds) else { return "--statement-timeout-ms takes 1…\(Int32.max)" }
        guard countCap >= 1 else { return "--count-cap takes a number ≥ 1" }
        // Checked before any conversion to Duration: Int64(1e300 * 1000) traps.
        // Below a tenth of a second a stream would do little but send heartbeats (0.0001 s made one
        // stream 110,000 a second).
        guard heartbeatSeconds >= 0.1, heartbeatSeconds <= 3_600 else { return "--heartbeat-seconds takes a number from 0.1 to 3600" }
        if let treeCacheMegabytes, !(0...65_536).contains(treeCacheMegabytes) { return "--tree-cache-mb takes 0…65536" }
        guard treeCacheMaximumAgeSeconds > 0, treeCacheMaximumAgeSeconds <= 86_400 else {
            return "--tree-cache-max-age-seconds takes a number > 0 and ≤ 86400"
        }
        if let idleTimeoutSeconds, idleTimeoutSeconds != 0, !(1...86_400).contains(idleTimeoutSeconds) {
            return "--idle-timeout-seconds takes 0 (never) or 1…86400"
        }
        if let bodyTimeoutSeconds, !(0.001...3_600).contains(bodyTimeoutSeconds) {
            return "--body-timeout-seconds takes a number from 0.001 to 3600"
        }
        if let maximumConnections, !(0...10_000_000).contains(maximumConnections) { return "--max-connections takes 0…10000000" }
        if let maximumStreams, !(1...10_000_000).contains(maximumStreams) { return "--max-streams takes 1…10000000" }
        if let maximumStreamsPerUser, !(1...10_000_000).contains(maximumStreamsPerUser) {
            return "--max-streams-per-user takes 1…10000000"
        }
        if let replicaPollMilliseconds, !Self.replicaPollRange.contains(replicaPollMilliseconds) {
            return "--replica-poll-ms takes \(Self.replicaPollRange.lowerBound)…\(Self.replicaPollRange.upperBound)"
        }
        return nil
    }

    /// The query service's configuration from these settings and `environment`'s variables.
    ///
    /// - Parameters:
    ///   - database: the connection settings, without a statement timeout; the requests' pool gets
    ///     `statementTimeoutMilliseconds` and the name reddot-serve, the change listener keeps it as is.
    ///   - forceLiveView: serve the live view whatever `liveView` says (`reddot dev`).
    ///   - openFileLimit: the process's open-file limit (nil: unlimited), for the connection limit's default.
    /// - Throws: `ServeSettingsError` for a flag out of range (``flagProblem``), a variable that is
    ///   not a valid number, or an unreadable JWKS file.
    public func configuration(
        database: PGConfiguration, environment: [String: String], forceLiveView: Bool = false,
        openFileLimit: Int? = Self.openFileLimit()
    ) throws(ServeSettingsError) -> BadgeServerConfiguration {
        // The flags' ranges guard the conversions below (seconds → Duration), whoever calls.
        if let problem = flagProblem { throw ServeSettingsError(problem) }
        var api = APIConfiguration()
        api.host = Self.setting(host, "REDDOT_HTTP_HOST", environment) ?? "0.0.0.0"
        if let text = Self.setting(port.map(String.init), "REDDOT_HTTP_PORT", environment) {
            guard let value = Int(text), (0...65_535).contains(value) else {
                throw ServeSettingsError("REDDOT_HTTP_PORT '\(text)' is not a port number")
            }
            api.port = value
        }
        api.display = BadgeDisplay(countCap: countCap)
        api.liveView = liveView || forceLiveView
        api.heartbeatInterval = .milliseconds(Int64(heartbeatSeconds * 1000))
        let poolConnections =
            try Self.whole(Self.setting(poolSize.map(String.init), "REDDOT_HTTP_POOL_SIZE", environment), "REDDOT_HTTP_POOL_SIZE", in: 1...256) ?? 8
        let treeCacheMegabytes =
            try Self.whole(Self.setting(treeCacheMegabytes.map(String.init), "REDDOT_TREE_CACHE_MB", environment), "REDDOT_TREE_CACHE_MB", in: 0...65_536)
        let limits = try limits(poolConnections: poolConnections, environment: environment, openFileLimit: openFileLimit)
        let auth = try auth(environment: environment)
        var requests = database
        requests.statementTimeoutMilliseconds = statementTimeoutMilliseconds
        requests.applicationName = "reddot-serve"
        var configuration = BadgeServerConfiguration(
            api: api, limits: limits, auth: auth, database: requests, listenerDatabase: database, poolConnections: poolConnections,
            treeCacheBytes: (treeCacheMegabytes ?? 64) << 20, treeCacheMaximumAge: .milliseconds(Int64(treeCacheMaximumAgeSeconds * 1000)))
        if let url = Self.setting(replicaDatabaseURL, "REDDOT_REPLICA_DATABASE_URL", environment) {
            if let problem = PGConfiguration.connectionStringProblem(url) {
                throw ServeSettingsError("--replica-database-url (else REDDOT_REPLICA_DATABASE_URL) is not a libpq connection URI or key=value string: \(problem)")
            }
            var replica = PGConfiguration(connectionString: url, statementTimeoutMilliseconds: statementTimeoutMilliseconds)
            replica.applicationName = "reddot-serve-replica"
            configuration.replicaDatabase = replica
        }
        let pollText = Self.setting(replicaPollMilliseconds.map(String.init), "REDDOT_REPLICA_POLL_MS", environment)
        if let poll = try Self.whole(pollText, "REDDOT_REPLICA_POLL_MS", in: Self.replicaPollRange) {
            configuration.replicaPollInterval = .milliseconds(poll)
        }
        return configuration
    }

    /// The values `--replica-poll-ms` takes.
    static let replicaPollRange = 5...10_000

    /// The server limits from these settings and the variables; the connection limit defaults to
    /// the open-file limit less the request pool and 128 (the listener, Kafka, logs), at least 16.
    ///
    /// - Throws: `ServeSettingsError` naming a variable that is not a number in its range.
    public func limits(poolConnections: Int, environment: [String: String], openFileLimit: Int?) throws(ServeSettingsError) -> ServerLimits {
        var limits = ServerLimits()
        if let seconds = try Self.number(idleTimeoutSeconds, "REDDOT_HTTP_IDLE_TIMEOUT_SECONDS", in: 0...86_400, environment) {
            // Below a second every connection would close as it opens: refuse it as a typo.
            guard seconds == 0 || seconds >= 1 else { throw ServeSettingsError("REDDOT_HTTP_IDLE_TIMEOUT_SECONDS takes 0 (never) or 1…86400") }
            limits.idleTimeout = seconds == 0 ? nil : .milliseconds(Int64((seconds * 1000).rounded()))
        }
        if let seconds = try Self.number(bodyTimeoutSeconds, "REDDOT_HTTP_BODY_TIMEOUT_SECONDS", in: 0.001...3_600, environment) {
            limits.bodyTimeout = .milliseconds(Int64((seconds * 1000).rounded()))
        }
        if let count = try Self.number(maximumConnections, "REDDOT_HTTP_MAX_CONNECTIONS", in: 0...10_000_000, environment) {
            limits.maximumConnections = count == 0 ? nil : count
        } else if let openFileLimit {
            limits.maximumConnections = max(16, openFileLimit - poolConnections - 128)
        }
        if let count = try Self.number(maximumStreams, "REDDOT_HTTP_MAX_STREAMS", in: 1...10_000_000, environment) { limits.maximumStreams = count }
        if let count = try Self.number(maximumStreamsPerUser, "REDDOT_HTTP_MAX_STREAMS_PER_USER", in: 1...10_000_000, environment) {
            limits.maximumStreamsPerUser = count
        }
        return limits
    }

    /// The Kafka publisher for `POST /v1/events` when brokers are set; nil otherwise.
    ///
    /// - Parameters:
    ///   - events: the events topic's brokers and name when the process has them (`reddot run`),
    ///     used when neither the flag nor the variable is set.
    ///   - defaultTopic: the topic when nothing else names one.
    /// - Throws: `ServeSettingsError` for a topic that is not a valid name or a producer that cannot be made.
    public func publisher(
        events: (brokers: String, topic: String)?, defaultTopic: String, environment: [String: String], logger: Logger
    ) throws(ServeSettingsError) -> KafkaEventPublisher? {
        guard let brokers = Self.setting(publishBrokers, "REDDOT_KAFKA_BROKERS", environment) ?? events?.brokers else { return nil }
        let topic = Self.setting(publishTopic, "REDDOT_KAFKA_TOPIC", environment) ?? events?.topic ?? defaultTopic
        return try KafkaEventPublisher(brokers: brokers, topic: topic, logger: logger)
    }

    /// The token settings; the JWKS file is read here.
    ///
    /// - Throws: `ServeSettingsError` when the JWKS file cannot be read.
    func auth(environment: [String: String]) throws(ServeSettingsError) -> AuthConfiguration {
        var auth = AuthConfiguration(
            hs256Secret: Self.setting(hs256Secret, "REDDOT_JWT_HS256_SECRET", environment),
            audience: Self.setting(audience, "REDDOT_JWT_AUDIENCE", environment), issuer: Self.setting(issuer, "REDDOT_JWT_ISSUER", environment),
            insecureNoAuth: insecureNoAuth)
        if let path = Self.setting(jwksFile, "REDDOT_JWT_JWKS_FILE", environment) {
            guard let data = FileManager.default.contents(atPath: path) else { throw ServeSettingsError("cannot read the JWKS file \(path)") }
            auth.jwks = String(decoding: data, as: UTF8.self)
        }
        return auth
    }

    /// A text setting: the flag unless empty, else the variable unless empty, else nil.
    public static func setting(_ flag: String?, _ variable: String, _ environment: [String: String]) -> String? {
        if let flag, !flag.isEmpty { return flag }
        if let value = environment[variable], !value.isEmpty { return value }
        return nil
    }

    /// A number setting: the flag (checked by `flagProblem`), else the variable, which must parse
    /// and lie in `range`, else nil.
    ///
    /// - Throws: `ServeSettingsError` naming the variable and the range.
    public static func number<Value: LosslessStringConvertible & Comparable>(
        _ flag: Value?, _ variable: String, in range: ClosedRange<Value>, _ environment: [String: String]
    ) throws(ServeSettingsError) -> Value? {
        if let flag { return flag }
        guard let text = environment[variable], !text.isEmpty else { return nil }
        guard let value = Value(text), range.contains(value) else {
            throw ServeSettingsError("\(variable) '\(text.prefix(40))' is not a number from \(range.lowerBound) to \(range.upperBound)")
        }
        return value
    }

    /// A whole number given as `text` (a flag's or the variable's), which must lie in `range`.
    static func whole(_ text: String?, _ variable: String, in range: ClosedRange<Int>) throws(ServeSettingsError) -> Int? {
        guard let text else { return nil }
        guard let value = Int(text), range.contains(value) else {
            throw ServeSettingsError("\(variable) '\(text)' is not a number from \(range.lowerBound) to \(range.upperBound)")
        }
        return value
    }

    /// This process's soft open-file limit (`RLIMIT_NOFILE`); nil when unlimited or unknown.
    public static func openFileLimit() -> Int? {
        var files = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &files) == 0, files.rlim_cur != rlim_t.max else { return nil }  // not RLIM_INFINITY
        return Int(clamping: files.rlim_cur)
    }
}

/// A query-service setting that cannot be used: a variable that is not a valid number, an
/// unreadable JWKS file. `reddot` prints `message` and exits 64.
public struct ServeSettingsError: Error, Sendable, CustomStringConvertible {
    /// A sentence naming the variable or file.
    public var message: String

    /// An error with `message`.
    public init(_ message: String) { self.message = message }

    /// The message.
    public var description: String { message }
}
