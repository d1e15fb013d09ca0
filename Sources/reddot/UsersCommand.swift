import ArgumentParser
import BadgeCore
import BadgeIngest
import BadgeStore
import Foundation
import LibPQ
import Logging
import RdKafka
import RedDotCommandLine

/// `reddot users`: a user's data on request (GDPR access and erasure).
struct UsersCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "users",
        abstract: "Export or erase everything RedDot holds on one user.",
        discussion: """
            export prints one JSON object: {"user", "exported_at", "tables", "dead_letters"}, where \
            tables holds every per-user table's rows of the user and dead_letters the rejected records \
            that name the user (as their key, or as a JSON string in their payload).

            erase removes the same rows and marks the user erased: ingest drops events for the user \
            (an event still in Kafka does not bring the tree back) until the mark is as old as ingest's \
            --event-retention-days; then the mark is pruned and new events count again. The running change feed \
            (reddot rollup) and ingest then write a tombstone (the user's key, no value) to the changes and the \
            dead-letter topics; with --brokers the command also writes them at once itself.

            Exit codes: 0 done; 64 bad arguments or an invalid user id (nothing changed); 69 the \
            database or Kafka cannot be reached; 75 erase: a transaction open when the user was marked \
            outlasted --settle-seconds (everything else was removed; run erase again); 1 another error.
            """,
        subcommands: [Export.self, Erase.self]
    )

    struct Common: ParsableArguments {
        @OptionGroup var database: DatabaseOptions
        @Option(help: "The user id (1–128 visible ASCII characters).")
        var user: String

        func validatedUser() throws -> UserID {
            do { return try UserID(validating: user) } catch { throw fail("\(error)", code: ExitCodes.usage) }
        }

        func store(label: String) throws -> BadgeStore {
            let logger = try database.logger(label: label)
            let pool = PGPool(configuration: database.configuration(statementTimeoutMilliseconds: 60_000), maximumConnections: 1, logger: logger)
            return BadgeStore(pool: pool)
        }
    }

    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print everything RedDot holds on a user, as JSON.")
        @OptionGroup var common: Common

        func run() async throws {
            let user = try common.validatedUser()
            let store = try common.store(label: "reddot.users")
            defer { store.pool.close() }
            do {
                print(try await store.exportUser(user))
            } catch let error as PGError {
                throw fail(error.debugDescription, code: error.exitCode)
            }
        }
    }

    struct Erase: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove every row of a user, keep their late events out, and write tombstones for their key.")
        @OptionGroup var common: Common
        @Option(help: ArgumentHelp("Kafka brokers for the tombstones. Default: REDDOT_KAFKA_BROKERS; without either, none are written.", valueName: "list"))
        var brokers: String?
        @Option(name: .customLong("changes-topic"), help: ArgumentHelp("The change feed's topic. Default: REDDOT_CHANGES_TOPIC, else reddot.changes.", valueName: "name"))
        var changesTopic: String?
        @Option(
            name: .customLong("topic"),
            help: ArgumentHelp(
                "The events topic, whose dead-letter topic is <topic>.dlq unless --dlq-topic names it, as for ingest. "
                    + "Default: REDDOT_KAFKA_TOPIC, else \(KafkaOptions.defaultTopic).",
                valueName: "name"))
        var eventsTopic: String?
        @Option(
            name: .customLong("dlq-topic"),
            help: ArgumentHelp("The dead-letter topic. Default: REDDOT_KAFKA_DLQ_TOPIC, else <topic>.dlq.", valueName: "name"))
        var deadLetterTopic: String?
        @Option(help: "How long to wait for transactions open when the user was marked (1…3600).")
        var settleSeconds: Int = 30

        var topics: [String] {
            [
                KafkaOptions.nonEmpty(changesTopic) ?? KafkaOptions.nonEmpty(KafkaOptions.environment["REDDOT_CHANGES_TOPIC"]) ?? "reddot.changes",
                IngestSettings.deadLetterTopic(
                    deadLetterTopic,
                    topic: KafkaOptions.nonEmpty(eventsTopic) ?? KafkaOptions.nonEmpty(KafkaOptions.environment["REDDOT_KAFKA_TOPIC"])
                        ?? KafkaOptions.defaultTopic,
                    environment: KafkaOptions.environment),
            ]
        }

        func validate() throws {
            guard (1...3600).contains(settleSeconds) else { throw ValidationError("--settle-seconds takes 1…3600, not \(settleSeconds)") }
            for topic in topics {
                if let problem = KafkaOptions.topicProblem(topic) { throw ValidationError("topic '\(topic)': \(problem)") }
            }
        }

        func run() async throws {
            let user = try common.validatedUser()
            let store = try common.store(label: "reddot.users")
            defer { store.pool.close() }
            let erasure: UserData.Erasure
            do {
                erasure = try await store.eraseUser(user, settle: .seconds(settleSeconds))
            } catch let error as PGError {
                throw fail(error.debugDescription, code: error.exitCode)
            }
            var tombstones: [String] = []
            if let brokers = KafkaOptions.nonEmpty(brokers) ?? KafkaOptions.nonEmpty(KafkaOptions.environment["REDDOT_KAFKA_BROKERS"]) {
                let logger = try common.database.logger(label: "reddot.users")
                do {
                    let producer = try KafkaProducer(configuration: KafkaConfiguration(bootstrapServers: brokers), logger: logger)
                    try await producer.closing {
                        for topic in topics {
                            _ = try await producer.send(KafkaOutgoingRecord(topic: topic, key: Array(user.rawValue.utf8), payload: nil))
                            tombstones.append(topic)
                        }
                    }
                } catch {
                    try printJSON(Summary(erasure: erasure, tombstones: tombstones))
                    throw fail(
                        "the user's rows are erased, but a tombstone was not written (\(error)); run erase again with Kafka reachable",
                        code: ExitCodes.unavailable)
                }
            }
            try printJSON(Summary(erasure: erasure, tombstones: tombstones))
            if !erasure.settled {
                throw fail(
                    "a transaction open when the user was marked outlasted --settle-seconds \(settleSeconds); run erase again to remove anything it wrote",
                    code: ExitCodes.temporaryFailure)
            }
        }
    }

    /// What `erase` prints: the erasure's account and the topics given tombstones.
    struct Summary: Encodable {
        var erasure: UserData.Erasure
        var tombstones: [String]

        enum CodingKeys: String, CodingKey { case tombstones }

        func encode(to encoder: any Encoder) throws {
            try erasure.encode(to: encoder)
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(tombstones, forKey: .tombstones)
        }
    }
}
