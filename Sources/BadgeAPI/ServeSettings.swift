import BadgeCore
import Foundation
public import LibPQ
public import Logging

/// What `reddot serve` (and `reddot run`) was given for the query service: each flag's value, nil
/// when the flag was left out and its `REDDOT_*` variable or default applies. `reddot` owns the
/// flags and their help; this type owns their ranges and how they become a
/// `BadgeServerConfiguration`.
public struct ServeSettings: Sendable {
    /// `--host`; else `REDDOT_HTTP_HOST`, else 0.0.0.0.
    public var host: String?
    /// `--port`; else `REDDOT_HTTP_PORT`, else 8080.
    public var port: Int?
    /// `--jwt-hs256-secret`; else `REDDOT_JWT_HS256_SECRET`.
    public var hs256Secret: String?
    /// `--jwt-jwks-file`; else `REDDOT_JWT_JWKS_FILE`.
    public var jwksFile: String?
    /// `--jwt-audience`; else `REDDOT_JWT_AUDIENCE`.
    public var audience: String?
    /// `--jwt-issuer`; else `REDDOT_JWT_ISSUER`.
    public var issuer: String?
    /// `--insecure-no-auth`.
    public var insecureNoAuth = false
    /// `--pool-size`; else `REDDOT_HTTP_POOL_SIZE`, else 8.
    public var poolSize: Int?
    /// `--statement-timeout-ms`.
    public var statementTimeoutMilliseconds = 2_000
    /// `--count-cap`.
    public var countCap: Int64 = 99
    /// `--heartbeat-seconds`.
    public var heartbeatSeconds: Double = 15
    /// `--tree-cache-mb`; else `REDDOT_TREE_CACHE_MB`, else 64.
    public var treeCacheMegabytes: Int?
    /// `--tree-cache-max-age-seconds`.
    public var treeCacheMaximumAgeSeconds: Double = 60
    /// `--live-view`.
    public var liveView = false
    /// `--idle-timeout-seconds`; else `REDDOT_HTTP_IDLE_TIMEOUT_SECONDS`, else 30.
    public var idleTimeoutSeconds: Double?
    /// `--body-timeout-seconds`; else `REDDOT_HTTP_BODY_TIMEOUT_SECONDS`, else 10.
    public var bodyTimeoutSeconds: Double?
    /// `--max-connections`; else `REDDOT_HTTP_MAX_CONNECTIONS`, else from the open-file limit.
    public var maximumConnections: Int?
    /// `--max-streams`; else `REDDOT_HTTP_MAX_STREAMS`, else 10000.
    public var maximumStreams: Int?
    /// `--max-streams-per-user`; else `REDDOT_HTTP_MAX_STREAMS_PER_USER`, else 32.
    public var maximumStreamsPerUser: Int?
    /// `--publish-brokers`; else `REDDOT_KAFKA_BROKERS`; without either, no publishing.
    public var publishBrokers: String?
    /// `--publish-topic`; else `REDDOT_KAFKA_TOPIC`.
    public var publishTopic: String?
    /// `--replica-database-url`; else `REDDOT_REPLICA_DATABASE_URL`; without either, reads go to
    /// the primary.
    public var replicaDatabaseURL: String?
    /// `--replica-poll-ms`; else `REDDOT_REPLICA_POLL_MS`, else 50.
    public var replicaPollMilliseconds: Int?

    /// Settings with every flag left out.
    public init() {}

    /// The first flag outside its range, as a sentence naming the flag (the command's usage
    /// error); nil when every given flag is in range.
    public var flagProblem: String? {
        if let port, !(0...65_535).contains(port) { return "--port takes 0…65535" }
        if let poolSize, !(1...256).contains(poolSize) { return "--pool-size takes 1…256" }
        // PostgreSQL's statement_timeout is an int of milliseconds.
        guard (1...Int(Int32.max)).contains(statementTimeoutMilliseconds) else { return "--statement-timeout-ms takes 1…\(Int32.max)" }
        guard countCap >= 1 else { return "--count-cap takes a number ≥ 1" }
        // Checked before any conversion to Duration: Int64(1e300 * 1000) traps.
        guard heartbeatSeconds > 0, heartbeatSeconds <= 3_600 else { return "--heartbeat-seconds takes a number > 0 and ≤ 3600" }
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
