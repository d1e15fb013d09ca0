import ArgumentParser
import BadgeHooks
import BadgeStore
import Foundation
import LibPQ
import Logging
import RdKafka
import RedDotCommandLine
import ServiceLifecycle

/// `reddot webhooks`: signed webhooks from the change feed.
struct WebhooksCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webhooks",
        abstract: "Deliver badge changes to other systems as signed webhooks (Standard Webhooks), and manage them.",
        discussion: """
            run follows the change feed (reddot.changes, as reddot rollup publishes it) in a consumer \
            group and delivers, for each subscription, what it asks for within its badge paths: \
            badge.cleared (nodes that stopped showing), badge.seen (nodes that show with nothing unseen), \
            badge.root (the user's app-icon totals changed), broadcasts.changed. Each delivery is an \
            HTTP POST of {"type","timestamp","data"} with webhook-id, webhook-timestamp and \
            webhook-signature (v1, HMAC-SHA256 with the subscription's whsec_ secret); a 2xx answer \
            delivers it, anything else is tried again (1st pause --first-retry-seconds, then 4 times \
            longer each, up to --max-retry-seconds; a Retry-After on 429 or 503 is kept) until \
            --max-attempts, then it is dead: `deliveries --state dead` lists it, `replay` sends it again.

            Subscriptions come from put/remove (or the admin API, /v1/webhooks) and, with run \
            --subscriptions FILE, from a JSON file: [{"id","url","secret","paths","kinds"}], which \
            replaces the file-made ones at each start.

            Exit codes: 0 done (run: stopped by SIGTERM or SIGINT); 64 bad arguments or an invalid \
            subscription or file; 66 put/remove/replay: no such subscription or dead delivery; 69 \
            the database or Kafka cannot be reached; 1 another error.
            """,
        subcommands: [Run.self, Put.self, List.self, Remove.self, Deliveries.self, Replay.self, Secret.self]
    )

    static func pool(_ database: DatabaseOptions, label: String) throws -> PGPool {
        let logger = try database.logger(label: label)
        return PGPool(configuration: database.configuration(statementTimeoutMilliseconds: 30_000), maximumConnections: 1, logger: logger)
    }

    /// Runs `body` on one connection; a database failure exits with its sentence and code.
    static func withStore<T: Sendable>(_ database: DatabaseOptions, _ body: @escaping @Sendable (PGConnection) throws -> T) async throws -> T {
        let pool = try pool(database, label: "reddot.webhooks")
        defer { pool.close() }
        do {
            return try await pool.withConnection(body)
        } catch let error as PGError {
            throw fail(error.debugDescription, code: error.exitCode)
        }
    }

    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Follow the change feed and deliver the webhooks.")
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var operations: OperationsOptions
        @OptionGroup var feed: FeedConsumerOptions
        @Option(help: ArgumentHelp("A JSON file of subscriptions; replaces the file-made ones at start.", valueName: "file"))
        var subscriptions: String?
        @OptionGroup var settings: WebhookSettings

        func run() async throws {
            let logger = try database.logger(label: "reddot.webhooks")
            let registry = MetricsSetup.bootstrap()
            let kafka = try feed.kafka()
            let pool = PGPool(configuration: database.configuration(), maximumConnections: 4, logger: logger)
            if let subscriptions {
                let loaded = try WebhooksCommand.readFile(subscriptions)
                let removed = try await WebhooksCommand.withStore(database) { try WebhookStore.replaceFromFile(loaded, on: $0) }
                logger.info(
                    "webhook subscriptions from the file", metadata: ["file": "\(subscriptions)", "put": "\(loaded.count)", "removed": "\(removed)"])
            }
            let service = WebhookService(
                configuration: WebhookConfiguration(kafka: kafka, topic: feed.topic, group: feed.group ?? "reddot-webhooks", settings: settings),
                pool: pool, logger: logger)
            var services: [any Service] = [service]
            if let server = try operations.server(registry: registry, logger: logger) { services.append(server) }
            defer { pool.close() }
            try await runServices(services, logger: logger)
        }
    }

    /// The subscriptions of a JSON file: an array of {id, url, secret, paths, kinds}.
    static func readFile(_ path: String) throws -> [WebhookSubscription] {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw fail("cannot read the subscriptions file \(path): \(error.localizedDescription)", code: ExitCodes.usage)
        }
        let subscriptions: [WebhookSubscription]
        do {
            subscriptions = try JSONDecoder().decode([WebhookSubscription].self, from: data)
        } catch let invalid as WebhookSubscription.Invalid {
            throw fail("the subscriptions file \(path) has an invalid subscription: \(invalid)", code: ExitCodes.usage)
        } catch {
            throw fail("the subscriptions file \(path) is not a JSON array of {id, url, secret, paths, kinds}: \(error)", code: ExitCodes.usage)
        }
        var seen = Set<String>()
        for subscription in subscriptions where !seen.insert(subscription.id).inserted {
            throw fail("the subscriptions file \(path) names \(subscription.id) twice", code: ExitCodes.usage)
        }
        return subscriptions
    }

    struct Put: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add a subscription, or replace the one with its id; prints it, secret included.")
        @OptionGroup var database: DatabaseOptions
        @Option(help: "Letters, digits, _ and -, 1 to 64.") var id: String
        @Option(help: "Where deliveries are POSTed (http:// or https://).") var url: String
        @Option(help: "whsec_ + base64 of 24–64 bytes. Default: a new random one.") var secret: String?
        @Option(name: .customLong("path"), help: "A badge subtree (repeatable). Default: root.") var paths: [String] = []
        @Option(name: .customLong("kind"), help: "cleared, seen, root or broadcasts (repeatable).") var kinds: [String] = []

        func run() async throws {
            let subscription: WebhookSubscription
            do {
                subscription = try WebhookSubscription(
                    id: id, url: url, secret: secret ?? WebhookSubscription.makeSecret(), paths: paths.isEmpty ? ["root"] : paths, kinds: kinds)
            } catch {
                throw fail("\(error)", code: ExitCodes.usage)
            }
            _ = try await WebhooksCommand.withStore(database) { try WebhookStore.put(subscription, on: $0) }
            try printJSON(subscription)
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the subscriptions as JSON (secrets shown only with --show-secrets).")
        @OptionGroup var database: DatabaseOptions
        @Flag(help: "Print each subscription's secret.") var showSecrets = false

        func run() async throws {
            var found = try await WebhooksCommand.withStore(database) { try WebhookStore.subscriptions(on: $0) }
            if !showSecrets { for index in found.indices { found[index].secret = "whsec_…" } }
            try printJSON(found)
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a subscription and its pending deliveries.")
        @OptionGroup var database: DatabaseOptions
        @Option(help: "The subscription's id.") var id: String

        func run() async throws {
            let id = id
            guard try await WebhooksCommand.withStore(database, { try WebhookStore.remove(id, on: $0) }) else {
                throw fail("no subscription \(id)", code: ExitCodes.noInput)
            }
        }
    }

    struct Deliveries: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List deliveries in one state, newest first, as JSON.")
        @OptionGroup var database: DatabaseOptions
        @Option(help: "pending, delivered or dead.") var state: String = "dead"
        @Option(help: "Only this subscription's.") var subscription: String?
        @Option(help: "At most this many (1…10000).") var limit: Int = 100

        func validate() throws {
            guard ["pending", "delivered", "dead"].contains(state) else { throw ValidationError("--state takes pending, delivered or dead") }
            guard (1...10_000).contains(limit) else { throw ValidationError("--limit takes 1…10000, not \(limit)") }
        }

        func run() async throws {
            let (state, subscription, limit) = (state, subscription, limit)
            try printJSON(try await WebhooksCommand.withStore(database) { try WebhookStore.list(state: state, subscription: subscription, limit: limit, on: $0) })
        }
    }

    struct Replay: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Send dead deliveries again: one by --id, or all of a --subscription.")
        @OptionGroup var database: DatabaseOptions
        @Option(help: "A dead delivery's webhook-id.") var id: String?
        @Option(help: "With --id: the delivery's user (ids are unique per user).") var user: String?
        @Option(help: "Every dead delivery of this subscription.") var subscription: String?

        func validate() throws {
            guard id != nil || subscription != nil else { throw ValidationError("give --id or --subscription") }
        }

        func run() async throws {
            let (id, user, subscription) = (id, user, subscription)
            let count = try await WebhooksCommand.withStore(database) { try WebhookStore.replay(id: id, user: user, subscription: subscription, on: $0) }
            print("\(count) dead deliveries are pending again")
            if count == 0 { throw fail("no dead delivery matched", code: ExitCodes.noInput) }
        }
    }

    struct Secret: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print a new random whsec_ secret.")
        func run() { print(WebhookSubscription.makeSecret()) }
    }
}
