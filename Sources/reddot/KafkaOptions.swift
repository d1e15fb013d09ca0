import ArgumentParser
import Foundation
import Logging
import RdKafka

/// Options every Kafka-using subcommand shares (`publish`, `ingest`): where the brokers are,
/// which topic, and any librdkafka property, as kcat takes them.
///
/// Properties are applied in this order, a later one winning: `bootstrap.servers` from
/// `--brokers`, the command's own defaults, the `--kafka-config` file, then each `-X`. Property
/// values are never printed or logged (they may hold passwords); only keys are.
struct KafkaOptions: ParsableArguments {
    /// The brokers when neither `--brokers` nor `REDDOT_KAFKA_BROKERS` names them.
    static let defaultBrokers = "localhost:9092"
    /// The producers' topic when neither `--topic` nor `REDDOT_KAFKA_TOPIC` names it (DESIGN §3).
    static let defaultTopic = "reddot.events"

    @Option(
        name: .customLong("brokers"),
        help: ArgumentHelp(
            "Bootstrap brokers, host:port[,host:port…]. Default: REDDOT_KAFKA_BROKERS, else \(Self.defaultBrokers).",
            valueName: "list"))
    var brokerList: String?

    @Option(
        name: .customLong("topic"),
        help: ArgumentHelp(
            "The events topic. Default: REDDOT_KAFKA_TOPIC, else \(Self.defaultTopic).", valueName: "name"))
    var topicName: String?

    @Option(
        name: .customShort("X"),
        help: ArgumentHelp(
            "Any librdkafka property, as kcat's -X (repeatable; e.g. -X security.protocol=SASL_SSL). "
                + "Applied last, so it wins over every default.",
            valueName: "key=value"))
    var assignments: [String] = []

    @Option(
        name: .customLong("kafka-config"),
        help: ArgumentHelp(
            "A file of librdkafka properties, one key=value a line (# comments), as kcat's -F; applied before -X. "
                + "Keeps secrets off the command line. Default: REDDOT_KAFKA_CONFIG.",
            valueName: "file"))
    var configFile: String?

    /// The bootstrap brokers: the flag, then `REDDOT_KAFKA_BROKERS`, then `localhost:9092`.
    var brokers: String {
        Self.nonEmpty(brokerList) ?? Self.nonEmpty(Self.environment["REDDOT_KAFKA_BROKERS"]) ?? Self.defaultBrokers
    }

    /// The topic: the flag, then `REDDOT_KAFKA_TOPIC`, then `reddot.events`.
    var topic: String {
        Self.nonEmpty(topicName) ?? Self.nonEmpty(Self.environment["REDDOT_KAFKA_TOPIC"]) ?? Self.defaultTopic
    }

    /// The properties file: the flag, then `REDDOT_KAFKA_CONFIG`; nil when neither is set.
    var configPath: String? {
        Self.nonEmpty(configFile) ?? Self.nonEmpty(Self.environment["REDDOT_KAFKA_CONFIG"])
    }

    func validate() throws {
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
    func configuration(defaults: [(key: String, value: String)] = []) throws -> KafkaConfiguration {
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
    func propertyKeys() -> [String] {
        var keys: [String] = []
        if let configPath, let properties = try? Self.readProperties(path: configPath) {
            keys += properties.map(\.key)
        }
        keys += assignments.compactMap { try? KafkaConfiguration.parse(assignment: $0).key }
        return keys
    }

    /// Reads a kcat-style properties file: `key=value` lines; blank lines and `#` comments skipped.
    static func readProperties(path: String) throws -> [(key: String, value: String)] {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw ValidationError("cannot read the Kafka properties file \(path)")
        }
        var properties: [(key: String, value: String)] = []
        // Any line ending: "\r\n" is one Character, so splitting on "\n" alone would run a CRLF
        // file's lines together into one value.
        for (index, rawLine) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            let line = rawLine.trimmingCharacters(in: .whitespacesAndNewlines)
            if line.isEmpty || line.hasPrefix("#") { continue }
            guard let equals = line.firstIndex(of: "="), equals != line.startIndex else {
                throw ValidationError("\(path) line \(index + 1) is not key=value")
            }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces)
            let value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            properties.append((key, value))
        }
        return properties
    }

    /// Why `name` is not a Kafka topic name (1–249 of `[A-Za-z0-9._-]`, not `.` or `..`), or nil.
    static func topicProblem(_ name: String) -> String? { nameProblem(name, kind: "topic") }

    /// Why `name` is not a Kafka name of this `kind` (topics and `group.instance.id` share the
    /// rule: 1–249 of `[A-Za-z0-9._-]`, not `.` or `..`), or nil.
    static func nameProblem(_ name: String, kind: String) -> String? {
        if name.isEmpty || name == "." || name == ".." || name.utf8.count > 249 {
            return "\(kind) '\(name.prefix(80))' is not a valid Kafka \(kind) (1-249 characters, not '.' or '..')"
        }
        for scalar in name.unicodeScalars {
            switch scalar {
            case "a"..."z", "A"..."Z", "0"..."9", ".", "_", "-": continue
            default:
                return "\(kind) '\(name.prefix(80))' has the character '\(scalar)'; "
                    + "a Kafka \(kind) is made of a-z, A-Z, 0-9, '.', '_' and '-'"
            }
        }
        return nil
    }

    static var environment: [String: String] { ProcessInfo.processInfo.environment }

    static func nonEmpty(_ text: String?) -> String? {
        guard let text, !text.isEmpty else { return nil }
        return text
    }
}
