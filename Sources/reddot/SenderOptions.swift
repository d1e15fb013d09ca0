import ArgumentParser
import BadgeHooks
import BadgeStore
import Foundation
import LibPQ
import Logging
import RdKafka
import RedDotCommandLine
import ServiceLifecycle

/// The push providers' credentials and addresses, as `reddot push run`, `reddot run` and
/// `reddot dev` take them (flags, else the variables).
struct PushProviderOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The APNs provider key (AuthKey_XXXXXXXXXX.p8). Default: REDDOT_APNS_KEY_FILE.", valueName: "file"))
    var apnsKeyFile: String?
    @Option(help: ArgumentHelp("The key's id (10 characters). Default: REDDOT_APNS_KEY_ID.", valueName: "id"))
    var apnsKeyId: String?
    @Option(help: ArgumentHelp("The developer team's id (10 characters). Default: REDDOT_APNS_TEAM_ID.", valueName: "id"))
    var apnsTeamId: String?
    @Option(help: ArgumentHelp("APNs' address (https://api.sandbox.push.apple.com for development builds).", valueName: "url"))
    var apnsUrl: String = PushConfiguration.apnsProductionURL
    @Option(help: ArgumentHelp("The Firebase project's service account key (JSON). Default: REDDOT_FCM_SERVICE_ACCOUNT_FILE.", valueName: "file"))
    var fcmServiceAccountFile: String?
    @Option(help: ArgumentHelp("FCM's address.", valueName: "url"))
    var fcmUrl: String = PushConfiguration.fcmProductionURL
    @Option(help: ArgumentHelp("Trust the certificates in this PEM file instead of the system's (a proxy).", valueName: "file"))
    var trustRootsFile: String?

    func validate() throws {
        for (name, value) in [("--apns-url", apnsUrl), ("--fcm-url", fcmUrl)] {
            guard let url = URL(string: value), url.scheme == "https", url.host != nil else {
                throw ValidationError("\(name) must be an https:// URL")
            }
        }
        if let trustRootsFile, !FileManager.default.isReadableFile(atPath: trustRootsFile) {
            throw ValidationError("--trust-roots-file: cannot read '\(trustRootsFile)'")
        }
    }

    /// The APNs credentials from the flags or variables; nil when none of the three is given.
    func apns() throws -> APNsCredentials? {
        let environment = KafkaOptions.environment
        let file = KafkaOptions.nonEmpty(apnsKeyFile) ?? KafkaOptions.nonEmpty(environment["REDDOT_APNS_KEY_FILE"])
        let keyID = KafkaOptions.nonEmpty(apnsKeyId) ?? KafkaOptions.nonEmpty(environment["REDDOT_APNS_KEY_ID"])
        let teamID = KafkaOptions.nonEmpty(apnsTeamId) ?? KafkaOptions.nonEmpty(environment["REDDOT_APNS_TEAM_ID"])
        guard file != nil || keyID != nil || teamID != nil else { return nil }
        guard let file, let keyID, let teamID else {
            throw fail("APNs needs all three of --apns-key-file, --apns-key-id and --apns-team-id", code: ExitCodes.usage)
        }
        let pem: String
        do {
            pem = try String(contentsOfFile: file, encoding: .utf8)
        } catch {
            throw fail("cannot read the APNs key \(file): \(error.localizedDescription)", code: ExitCodes.usage)
        }
        do {
            return try APNsCredentials(keyPEM: pem, keyID: keyID, teamID: teamID)
        } catch {
            throw fail("APNs credentials (--apns-key-file \(file), --apns-key-id, --apns-team-id or their variables): \(error)", code: ExitCodes.usage)
        }
    }

    /// The FCM service account from the flag or variable; nil when neither is given.
    func fcm() throws -> FCMCredentials? {
        let environment = KafkaOptions.environment
        guard let file = KafkaOptions.nonEmpty(fcmServiceAccountFile) ?? KafkaOptions.nonEmpty(environment["REDDOT_FCM_SERVICE_ACCOUNT_FILE"]) else {
            return nil
        }
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: file))
        } catch {
            throw fail("cannot read the FCM service account file \(file): \(error.localizedDescription)", code: ExitCodes.usage)
        }
        guard data.count <= 1 << 20 else { throw fail("\(file) is over 1 MiB: not a service account key", code: ExitCodes.usage) }
        do {
            return try FCMCredentials(serviceAccountJSON: data)
        } catch {
            throw fail("APNs credentials (--apns-key-file \(file), --apns-key-id, --apns-team-id or their variables): \(error)", code: ExitCodes.usage)
        }
    }
}

/// `reddot push` and `reddot webhooks` inside `reddot run` and `reddot dev`, beside the rollup
/// that publishes the change feed they follow (their own consumer groups, their defaults).
struct InProcessSenderOptions: ParsableArguments {
    @OptionGroup var providers: PushProviderOptions
    @Flag(help: "Also deliver the signed webhooks in this process (as reddot webhooks run, with its defaults).")
    var webhooks = false
    @Option(help: ArgumentHelp("With --webhooks: a JSON file of subscriptions, as reddot webhooks run --subscriptions takes it.", valueName: "file"))
    var webhookSubscriptions: String?

    func validate() throws {
        if webhookSubscriptions != nil, !webhooks { throw ValidationError("--webhook-subscriptions needs --webhooks") }
    }

    /// The push sender when a provider has credentials, and the webhook sender with
    /// `--webhooks` (or `webhooksByDefault`), following the feed on `feed`'s brokers and topic.
    ///
    /// - Throws: a usage failure when one is asked for and the change feed is off.
    func services(database: DatabaseOptions, feed: (brokers: String, topic: String)?, webhooksByDefault: Bool = false, logger: Logger) async throws
        -> [any Service]
    {
        let (apns, fcm) = (try providers.apns(), try providers.fcm())
        let push = apns != nil || fcm != nil
        let webhooks = self.webhooks || webhooksByDefault
        guard push || webhooks else { return [] }
        guard let feed else {
            throw fail(
                "push badges and webhooks follow the change feed: give --changes-brokers or REDDOT_KAFKA_BROKERS and drop --no-change-feed",
                code: ExitCodes.usage)
        }
        var kafka = KafkaConfiguration(bootstrapServers: feed.brokers)
        if let path = KafkaOptions.nonEmpty(KafkaOptions.environment["REDDOT_KAFKA_CONFIG"]) {
            for (key, value) in try KafkaOptions.readProperties(path: path) { kafka.set(key, value) }
        }
        var services: [any Service] = []
        if push {
            let pool = PGPool(configuration: database.configuration(), maximumConnections: 4, logger: logger)
            services.append(
                PushService(
                    configuration: PushConfiguration(
                        kafka: kafka, topic: feed.topic, apnsURL: providers.apnsUrl, apns: apns, fcmURL: providers.fcmUrl, fcm: fcm,
                        trustRootsFile: providers.trustRootsFile),
                    pool: pool, logger: logger))
            logger.info("push badges in this process", metadata: ["apns": "\(apns != nil)", "fcm": "\(fcm != nil)"])
        }
        if webhooks {
            if let file = webhookSubscriptions {
                let loaded = try WebhooksCommand.readFile(file)
                let removed = try await WebhooksCommand.withStore(database) { try WebhookStore.replaceFromFile(loaded, on: $0) }
                logger.info("webhook subscriptions from the file", metadata: ["file": "\(file)", "put": "\(loaded.count)", "removed": "\(removed)"])
            }
            let pool = PGPool(configuration: database.configuration(), maximumConnections: 4, logger: logger)
            services.append(WebhookService(configuration: WebhookConfiguration(kafka: kafka, topic: feed.topic), pool: pool, logger: logger))
        }
        return services
    }
}
