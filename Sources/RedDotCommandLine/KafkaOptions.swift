public import ArgumentParser
import Foundation
import Logging
public import RdKafka

/// Options every Kafka-using subcommand shares (`publish`, `ingest`): where the brokers are,
/// which topic, and any librdkafka property, as kcat takes them.
///
/// Properties are applied in this order, a later one winning: `bootstrap.servers` from
/// `--brokers`, the command's own defaults, the `--kafka-config` file, then each `-X`. Property
/// values are never printed or logged (they may hold passwords); only keys are.
public struct KafkaOptions: ParsableArguments {
    /// Options with their defaults (argument-parser fills them in).
    public init() {}

    /// The brokers when neither `--brokers` nor `REDDOT_KAFKA_BROKERS` names them.
    public static let defaultBrokers = "localhost:9092"
    /// The producers' topic when neither `--topic` nor `REDDOT_KAFKA_TOPIC` names it (DESIGN §3).
    public static let defaultTopic = "reddot.events"

    @Option(
        name: .customLong("brokers"),
        help: ArgumentHelp(
            "Bootstrap brokers, host:port[,host:port…]. Default: REDDOT_KAFKA_BROKERS, else \(Self.defaultBrokers).",
            valueName: "list"))
    public var brokerList: String?

    @Option(
        name: .customLong("topic"),
        help: ArgumentHelp(
            "The events topic. Default: REDDOT_KAFKA_TOPIC, else \(Self.defaultTopic).", valueName: "name"))
    public var topicName: String?

    @Option(
        name: .customShort("X"),
        help: ArgumentHelp(
            "Any librdkafka property, as kcat's -X (repeatable; e.g. -X security.protocol=SASL_SSL). "
                + "Applied last, so it wins over every default.",
            valueName: "key=value"))
    public var assignments: [String] = []

    @Option(
        name: .customLong("kafka-config"),
        help: ArgumentHelp(
            "A file of librdkafka properties, one key=value a line (# comments), as kcat's -F; applied before -X. "
                + "Keeps secrets off the command line. Default: REDDOT_KAFKA_CONFIG.",
            valueName: "file"))
    public var configFile: String?

    /// The bootstrap brokers: the flag, then `REDDOT_KAFKA_BROKERS`, then `localhost:9092`.
    public var brokers: String {
        Self.nonEmpty(brokerList) ?? Self.nonEmpty(Self.environment["REDDOT_KAFKA_BROKERS"]) ?? Self.defaultBrokers
    }

    /// The topic: the flag, then `REDDOT_KAFKA_TOPIC`, then `reddot.events`.
    public var topic: String {
        Self.nonEmpty(topicName) ?? Self.nonEmpty(Self.environment["REDDOT_KAFKA_TOPIC"]) ?? Self.defaultTopic
    }

    /// The properties file: the flag, then `REDDOT_KAFKA_CONFIG`; nil when neither is set.
    public var configPath: String? {
        Self.nonEmpty(configFile) ?? Self.nonEmpty(Self.environment["REDDOT_KAFKA_CONFIG"])
    }

    public func validate() throws {
        if let brokerList, brokerList.trimmingCharacters(in: .whitespaces).isEmpty {
            throw ValidationError("--brokers is empty; give host:port[,host:port…]")
        }
        if let problem = Self.topicProblem(topic) {
            throw ValidationError(problem)
        }
        for assignment in assignments {
            do {
                _ = try KafkaConfiguration.parse(assignment: assignment)
            } catch {
                throw ValidationError("-X \(error.message); write -X key=value")
            }
        }
    }

    /// The client configuration: `bootstrap.servers`, then `defaults`, then the properties file,
    /// then every `-X`.
    ///
    /// - Throws: `ValidationError` (exit 64) when the properties file cannot be read or has a line
    ///   that is not `key=value`; the message names the file and line, never a value.
    public func configuration(defaults: [(key: String, value: String)] = []) throws -> KafkaConfiguration {
        var configuration = KafkaConfiguration(bootstrapServers: brokers)
        for (key, value) in defaults { configuration.set(key, value) }
        if let configPath {
            for (key, value) in try Self.readProperties(path: configPath) { configuration.set(key, value) }
        }
        for assignment in assignments {
            let (key, value) = try KafkaConfiguration.parse(assignment: assignment)
            configuration.set(key, value)
        }
        return configuration
    }

    /// The keys given by the properties file and `-X`, for a log line (values left out).
    public func propertyKeys() -> [String] {
        var keys: [String] = []
        if let configPath, let properties = try? Self.readProperties(path: configPath) {
            keys += properties.map(\.key)
        }
        keys += assignments.compactMap { try? KafkaConfiguration.parse(assignment: $0).key }
        return keys
    }

    /// Reads a kcat-style properties file (see `KafkaConfiguration.readProperties`).
    ///
    /// - Throws: `ValidationError` (exit 64) with the reader's sentence.
    public static func readProperties(path: String) throws -> [(key: String, value: String)] {
        do {
            return try KafkaConfiguration.readProperties(path: path)
        } catch {
            throw ValidationError(error.message)
        }
    }

    /// Why `name` is not a Kafka topic name (1–249 of `[A-Za-z0-9._-]`, not `.` or `..`), or nil.
    public static func topicProblem(_ name: String) -> String? { KafkaConfiguration.nameProblem(name, kind: "topic") }

    public static var environment: [String: String] { ProcessInfo.processInfo.environment }

    public static func nonEmpty(_ text: String?) -> String? {
        guard let text, !text.isEmpty else { return nil }
        return text
    }
}
