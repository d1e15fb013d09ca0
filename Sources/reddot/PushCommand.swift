import ArgumentParser
import BadgeHooks
import BadgeStore
import Foundation
import LibPQ
import Logging
import RdKafka
import RedDotCommandLine
import ServiceLifecycle

/// `reddot push`: the app-icon number on every registered device.
struct PushCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push",
        abstract: "Keep each registered device's app-icon badge equal to its user's root total (APNs, FCM).",
        discussion: """
            run follows the change feed (reddot.changes) in a consumer group, keeps each user's latest \
            root total, and pushes it to the user's devices (PUT /v1/users/{user}/devices/{device}): \
            APNs over HTTP/2 with a provider token made from --apns-key-file (ES256, renewed every 50 \
            minutes or when APNs calls it expired), {"aps":{"badge":N}}, apns-push-type alert, one \
            collapse id per user. FCM devices: HTTP v1 (messages:send) with an OAuth2 access token \
            that the service account in --fcm-service-account-file obtains from its token_uri (an RS256 \
            assertion; cached, renewed five minutes before it runs out or when FCM calls it invalid), \
            the number as android.notification.notification_count and apns aps.badge. A burst of \
            versions sends the latest number once; a version read again sends nothing. 429 and 5xx \
            are retried (Retry-After kept, else 1 s doubling up to --max-retry-seconds); a device the \
            provider calls gone (APNs 410 or BadDeviceToken, FCM UNREGISTERED or SENDER_ID_MISMATCH) \
            is removed; refused credentials stop the command with the provider's reason. Devices of a \
            provider without credentials wait (retried every --max-retry-seconds).

            Exit codes: 0 stopped by SIGTERM or SIGINT; 64 bad arguments or an unreadable key; 69 the \
            database or Kafka cannot be reached; 1 another failure (refused credentials).
            """,
        subcommands: [Run.self]
    )

    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Follow the change feed and push badges.")
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var operations: OperationsOptions
        @OptionGroup var feed: FeedConsumerOptions
        @OptionGroup var providers: PushProviderOptions
        @OptionGroup var settings: PushSettings

        func run() async throws {
            let logger = try database.logger(label: "reddot.push")
            let (apns, fcm) = (try providers.apns(), try providers.fcm())
            if apns == nil { logger.warning("no APNs credentials (--apns-key-file, --apns-key-id, --apns-team-id): APNs devices wait") }
            if fcm == nil { logger.warning("no FCM credentials (--fcm-service-account-file): FCM devices wait") }
            let registry = MetricsSetup.bootstrap()
            let kafka = try feed.kafka()
            let pool = PGPool(configuration: database.configuration(), maximumConnections: 4, logger: logger)
            defer { pool.close() }
            let service = PushService(
                configuration: PushConfiguration(
                    kafka: kafka, topic: feed.topic, group: feed.group ?? "reddot-push", apnsURL: providers.apnsUrl, apns: apns, fcmURL: providers.fcmUrl,
                    fcm: fcm, trustRootsFile: providers.trustRootsFile,
                    concurrency: settings.concurrency, requestTimeout: .seconds(settings.requestTimeoutSeconds),
                    maximumRetryDelay: .seconds(settings.maxRetrySeconds)),
                pool: pool, logger: logger)
            var services: [any Service] = [service]
            if let server = try operations.server(registry: registry, logger: logger) { services.append(server) }
            try await runServices(services, logger: logger)
        }
    }
}
