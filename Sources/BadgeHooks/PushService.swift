import AsyncHTTPClient
import Backoff
import BadgeStore
import Crypto
import Foundation
public import LibPQ
public import Logging
import Metrics
import NIOCore
import NIOHTTP1
import NIOSSL
public import RdKafka
public import ServiceLifecycle
import Synchronization

/// How `reddot push run` follows the feed and reaches the providers.
public struct PushConfiguration: Sendable {
    public var kafka: KafkaConfiguration
    public var topic: String
    public var group: String
    /// APNs' address: `https://api.push.apple.com` (production) or
    /// `https://api.sandbox.push.apple.com` (development builds).
    public var apnsURL: String
    /// The APNs provider key; nil: APNs devices wait.
    public var apns: APNsCredentials?
    /// FCM's address: `https://fcm.googleapis.com`.
    public var fcmURL: String
    /// The Firebase project's service account; nil: FCM devices wait.
    public var fcm: FCMCredentials?
    /// A PEM file of certificates to trust instead of the system's (a proxy; tests).
    public var trustRootsFile: String?
    /// Devices pushed at once, per process.
    public var concurrency: Int
    /// How long one push may take.
    public var requestTimeout: Duration
    /// The pause after a failed push; doubling, up to ``maximumRetryDelay``.
    public var firstRetryDelay: Duration
    public var maximumRetryDelay: Duration

    /// APNs' production address (`--apns-url`'s default).
    public static let apnsProductionURL = "https://api.push.apple.com"
    /// FCM's address (`--fcm-url`'s default).
    public static let fcmProductionURL = "https://fcm.googleapis.com"

    /// A configuration; what is left out is `reddot push run`'s default (`PushSettings`).
    public init(
        kafka: KafkaConfiguration, topic: String = "reddot.changes", group: String = "reddot-push", apnsURL: String = Self.apnsProductionURL,
        apns: APNsCredentials?, fcmURL: String = Self.fcmProductionURL, fcm: FCMCredentials? = nil, trustRootsFile: String? = nil,
        concurrency: Int = PushSettings.defaults.concurrency, requestTimeout: Duration = .seconds(PushSettings.defaults.requestTimeoutSeconds),
        firstRetryDelay: Duration = .seconds(1), maximumRetryDelay: Duration = .seconds(PushSettings.defaults.maxRetrySeconds)
    ) {
        (self.kafka, self.topic, self.group, self.apnsURL, self.apns, self.trustRootsFile) = (kafka, topic, group, apnsURL, apns, trustRootsFile)
        (self.fcmURL, self.fcm) = (fcmURL, fcm)
        (self.concurrency, self.requestTimeout, self.firstRetryDelay, self.maximumRetryDelay) =
            (concurrency, requestTimeout, firstRetryDelay, maximumRetryDelay)
    }

    /// The pause after failed try number `attempt`.
    func retryDelay(after attempt: Int) -> Duration {
        var delay = firstRetryDelay
        for _ in 1..<max(1, min(attempt, 40)) where delay < maximumRetryDelay { delay *= 2 }
        return min(delay, maximumRetryDelay)
    }
}

/// Why the push service stopped by itself.
public struct PushStopped: Error, CustomStringConvertible, Sendable {
    public let description: String
}

/// `reddot push run`: keeps each registered device's app-icon number equal to its user's root
/// total. It follows the change feed in a consumer group, storing each user's latest total and
/// making their devices due (a burst of versions leaves one number to send), and pushes due
/// devices: APNs over HTTP/2 with a provider token, `aps.badge`, collapsed per user; FCM HTTP v1
/// with a service account's OAuth2 access token, the number in the Android and APNs parts. A
/// device the provider calls gone is removed; 429 and 5xx are retried (with `Retry-After`);
/// refused credentials stop the service with the provider's reason.
public final class PushService: Service, Sendable {
    private let configuration: PushConfiguration
    private let pool: PGPool
    private let logger: Logger
    private let stopping = Atomic<Bool>(false)
    private let follower: FeedFollower
    private let metrics = Metrics()

    struct Metrics: Sendable {
        let records = Counter(label: "reddot_push_records_total")
        let unreadable = Counter(label: "reddot_push_records_unreadable_total")
        let due = Counter(label: "reddot_push_devices_due_total")
        /// New numbers that replaced one not yet sent (a burst sends the latest once).
        let coalesced = Counter(label: "reddot_push_coalesced_total")
        let broadcastRecounts = Counter(label: "reddot_push_broadcast_recounts_total")
        let sent = Counter(label: "reddot_push_sent_total")
        let removed = Counter(label: "reddot_push_devices_removed_total")
        let quiet = Counter(label: "reddot_push_quiet_deferred_total")
        let latency = Timer(label: "reddot_push_request_seconds")
        /// From the change (the record's `at`) to the provider's acceptance of its number.
        let lag = Timer(label: "reddot_push_lag_seconds")
        func failed(_ reason: String) -> Counter { Counter(label: "reddot_push_failed_total", dimensions: [("reason", reason)]) }
    }

    public init(configuration: PushConfiguration, pool: PGPool, logger: Logger) {
        (self.configuration, self.pool, self.logger) = (configuration, pool, logger)
        let unreadable = metrics.unreadable
        follower = FeedFollower(
            kafka: configuration.kafka, topic: configuration.topic, group: configuration.group, logger: logger,
            unreadable: { unreadable.increment() })
    }

    public func run() async throws {
        var http = HTTPClient.Configuration(redirectConfiguration: .disallow)
        http.timeout = .init(connect: .seconds(5), read: WebhookService.timeAmount(configuration.requestTimeout))
        if let file = configuration.trustRootsFile {
            var tls = TLSConfiguration.makeClientConfiguration()
            do {
                tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(file))
            } catch {
                throw PushStopped(description: "cannot read the trusted certificates in \(file): \(error)")
            }
            http.tlsConfiguration = tls
        }
        try await runParts(http: http, stop: { self.stop() }, [
            { _ in try await self.follow() },
            { client in try await self.pushLoop(client) },
        ])
    }

    private func stop() {
        stopping.store(true, ordering: .relaxed)
        follower.stop()
    }

    /// Each batch: the latest root total of each user (the highest visible version in it: own
    /// plus broadcast, which only grows), stored with the user's devices made due. A broadcast
    /// record changes every user's total without a user record: after one, the total now of
    /// every user with a device is recounted from the database, a page of users per statement.
    private func follow() async throws {
        try await follower.run { [pool, metrics, logger] records in
            metrics.records.increment(by: records.count)
            var latest: [String: (version: Int64, count: Int64, at: Date?)] = [:]
            var broadcasts = false
            for record in records {
                switch record {
                case .user(let change):
                    let version = max(change.version, change.ownVersion)
                    if (latest[change.user]?.version ?? 0) < version { latest[change.user] = (version, change.root.count, Self.time(change.at)) }
                case .broadcasts:
                    broadcasts = true
                }
            }
            let users = latest
            let (due, coalesced) = try await pool.withConnection { try PushStore.follow(users, on: $0) }
            metrics.due.increment(by: due)
            metrics.coalesced.increment(by: coalesced)
            guard broadcasts else { return }
            let started = ContinuousClock.now
            var (cursor, pages, dueAfterBroadcast) = ("", 0, 0)
            while true {
                let page = try await pool.withConnection { [cursor] in try PushStore.followBroadcasts(after: cursor, limit: 1_000, on: $0) }
                guard let last = page.last else { break }
                (cursor, pages, dueAfterBroadcast) = (last, pages + 1, dueAfterBroadcast + page.due)
                metrics.coalesced.increment(by: page.coalesced)
            }
            metrics.due.increment(by: dueAfterBroadcast)
            metrics.broadcastRecounts.increment()
            logger.debug(
                "push: a broadcast change recounted the users with devices",
                metadata: ["pages": "\(pages)", "devices_due": "\(dueAfterBroadcast)", "took": "\(ContinuousClock.now - started)"])
        }
    }

    private func pushLoop(_ client: HTTPClient) async throws {
        let lease = configuration.requestTimeout + .seconds(30)
        let parts = PartsInTurn(of: "push_device")
        try await claimLoop(
            what: "push devices", idle: .milliseconds(100), logger: logger, isStopping: { self.stopping.load(ordering: .relaxed) },
            claim: { [pool, configuration] in
                try await parts.claim { taken in
                    try await pool.withConnection { try PushStore.claim(limit: configuration.concurrency, lease: lease, parts: taken, on: $0) }
                }
            },
            run: { device in try await self.push(device, client) })
    }

    private func push(_ device: PushStore.Claimed, _ client: HTTPClient) async throws {
        if let quiet = device.quietHours, let end = quiet.end(containing: Date()) {
            // Quiet hours: the number waits for their end (the latest one then, once).
            metrics.quiet.increment()
            try await store { try PushStore.quiet(device, until: end, on: $0) }
            return
        }
        switch device.platform {
        case .apns:
            guard let credentials = configuration.apns else { return try await waitForCredentials(device, "no APNs credentials (--apns-key-file)") }
            try await record(device, await sendAPNs(device, credentials, client))
        case .fcm:
            guard let credentials = configuration.fcm else {
                return try await waitForCredentials(device, "no FCM credentials (--fcm-service-account-file)")
            }
            try await record(device, await sendFCM(device, credentials, client))
        }
    }

    /// A device of a provider this process has no credentials for: tried again after the longest pause.
    private func waitForCredentials(_ device: PushStore.Claimed, _ reason: String) async throws {
        metrics.failed("no_credentials").increment()
        try await store { [configuration] in try PushStore.failed(device, error: reason, retryAfter: configuration.maximumRetryDelay, on: $0) }
    }

    private func record(_ device: PushStore.Claimed, _ verdict: PushVerdict) async throws {
        let context: Logger.Metadata = ["user": "\(device.user)", "device": "\(device.device)", "badge": "\(device.badge)"]
        switch verdict {
        case .sent:
            try await store { try PushStore.sent(device, on: $0) }
            metrics.sent.increment()
            if let wantedAt = device.wantedAt {
                metrics.lag.recordNanoseconds(Int64(min(max(0, Date().timeIntervalSince(wantedAt)), 1e9) * 1e9))
            }
        case .gone(let reason):
            if try await store({ try PushStore.gone(device, on: $0) }) {
                metrics.removed.increment()
                logger.info("push: the provider says the device is gone; removed", metadata: context.merging(["reason": "\(reason)"]) { $1 })
            }
        case .expiredToken:
            // Tried again after a second with a new token (not at once: a provider that calls
            // every new token expired must not be asked in a tight loop).
            metrics.failed("expired_token").increment()
            try await store { try PushStore.failed(device, error: "expired bearer token", retryAfter: .seconds(1), on: $0) }
        case .refused(let reason):
            metrics.failed("credentials").increment()
            try await store { try PushStore.failed(device, error: reason, retryAfter: .seconds(60), on: $0) }
            switch device.platform {
            case .apns:
                throw PushStopped(description: "APNs refuses the provider credentials (\(reason)): check --apns-key-file, --apns-key-id and --apns-team-id")
            case .fcm:
                throw PushStopped(
                    description: "FCM refuses the service account (\(reason)): check --fcm-service-account-file and that the account may send for its project")
            }
        case .retry(let reason, let after):
            metrics.failed("retry").increment()
            let delay = after.map { min(max($0, .seconds(1)), configuration.maximumRetryDelay) } ?? configuration.retryDelay(after: device.attempt)
            try await store { try PushStore.failed(device, error: reason, retryAfter: delay, on: $0) }
            logger.info("push: a push failed; retrying", metadata: context.merging(["reason": "\(reason)", "retry_in": "\(delay)"]) { $1 })
        case .rejected(let reason):
            metrics.failed("rejected").increment()
            let later = configuration.maximumRetryDelay
            try await store { try PushStore.failed(device, error: reason, retryAfter: later, on: $0) }
            logger.warning("push: the provider rejected a push", metadata: context.merging(["reason": "\(reason)"]) { $1 })
        }
    }

    /// Runs a store step, retried a few times: a lost outcome leaves the device due again after its lease.
    private func store<T: Sendable>(_ body: @escaping @Sendable (PGConnection) throws -> T) async throws -> T {
        var backoff = Backoff(initial: .milliseconds(200), maximum: .seconds(5), jitter: true)
        var attempt = 0
        while true {
            do {
                return try await pool.withConnection(body)
            } catch {
                attempt += 1
                guard attempt < 10, !stopping.load(ordering: .relaxed) else { throw error }
                try? await Task.sleep(for: backoff.next())
            }
        }
    }

    private func sendAPNs(_ device: PushStore.Claimed, _ credentials: APNsCredentials, _ client: HTTPClient) async -> PushVerdict {
        let token = credentials.token()
        var request = HTTPClientRequest(url: "\(configuration.apnsURL)/3/device/\(device.token)")
        request.method = .POST
        request.headers.add(name: "authorization", value: "bearer \(token)")
        request.headers.add(name: "apns-topic", value: device.appID)
        request.headers.add(name: "apns-push-type", value: "alert")
        request.headers.add(name: "apns-priority", value: "5")
        request.headers.add(name: "apns-collapse-id", value: Self.collapseID(device.user))
        request.headers.add(name: "content-type", value: "application/json")
        request.body = .bytes(ByteBuffer(string: #"{"aps":{"badge":\#(min(device.badge, Int64(Int32.max)))}}"#))
        let verdict = await execute(request, client, PushVerdict.apns)
        if verdict == .expiredToken { credentials.expire(token) }
        return verdict
    }

    private func sendFCM(_ device: PushStore.Claimed, _ credentials: FCMCredentials, _ client: HTTPClient) async -> PushVerdict {
        let token: String
        do {
            token = try await credentials.accessToken(client: client, timeout: configuration.requestTimeout)
        } catch FCMCredentials.TokenFailure.refused(let reason) {
            return .refused(reason)
        } catch {
            return .retry("\(error)", after: nil)
        }
        var request = HTTPClientRequest(url: "\(configuration.fcmURL)/v1/projects/\(credentials.projectID)/messages:send")
        request.method = .POST
        request.headers.add(name: "authorization", value: "Bearer \(token)")
        request.headers.add(name: "content-type", value: "application/json")
        request.body = .bytes(ByteBuffer(string: FCMMessage.body(token: device.token, badge: device.badge, collapseID: Self.collapseID(device.user))))
        let verdict = await execute(request, client, PushVerdict.fcm)
        if verdict == .expiredToken { credentials.expire(token) }
        return verdict
    }

    /// Sends one push and reads the provider's answer with `verdict`; a failure to reach it is retried.
    private func execute(
        _ request: HTTPClientRequest, _ client: HTTPClient, _ verdict: (Int, String, String?) -> PushVerdict
    ) async -> PushVerdict {
        let started = ContinuousClock.now
        defer { metrics.latency.recordNanoseconds(WebhookService.nanoseconds(ContinuousClock.now - started)) }
        do {
            let response = try await client.execute(request, timeout: WebhookService.timeAmount(configuration.requestTimeout))
            let body = (try? await response.body.collect(upTo: 64 << 10)).map { String(buffer: $0) } ?? ""
            return verdict(Int(response.status.code), body, response.headers.first(name: "retry-after"))
        } catch {
            return .retry(PushVerdict.cut("\(error)"), after: nil)
        }
    }

    /// A change record's `at` (RFC 3339, as the feed writes it) when it reads as a time between
    /// 2000 and 2200; nil otherwise (the store then takes now).
    static func time(_ text: String) -> Date? {
        guard text.utf8.count <= 64, let date = try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text) else { return nil }
        return (946_684_800...7_258_118_400).contains(date.timeIntervalSince1970) ? date : nil
    }

    /// The same for every push of a user, at most 64 bytes: a later push replaces an earlier
    /// one still waiting on the device.
    static func collapseID(_ user: String) -> String {
        "badge-" + SHA256.hash(data: Data(user.utf8)).prefix(12).map { String(format: "%02x", $0) }.joined()
    }
}
