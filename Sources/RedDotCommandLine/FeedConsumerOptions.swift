public import ArgumentParser
import Foundation
public import RdKafka

/// Options of the commands that follow the change feed in a consumer group (`reddot push run`,
/// `reddot webhooks run`): the brokers, any librdkafka property, the topic and the group.
public struct FeedConsumerOptions: ParsableArguments {
    /// Options with their defaults (argument-parser fills them in).
    public init() {}

    @Option(help: ArgumentHelp("Kafka brokers. Default: REDDOT_KAFKA_BROKERS, else \(KafkaOptions.defaultBrokers).", valueName: "list"))
    public var brokers: String?
    @Option(
        name: .customShort("X"),
        help: ArgumentHelp("Any librdkafka property (repeatable), applied after REDDOT_KAFKA_CONFIG's.", valueName: "key=value"))
    public var assignments: [String] = []
    @Option(
        name: .customLong("changes-topic"),
        help: ArgumentHelp("The change feed's topic. Default: REDDOT_CHANGES_TOPIC, else reddot.changes.", valueName: "name"))
    public var changesTopic: String?
    @Option(help: ArgumentHelp("The consumer group the command's processes share the feed in. Default: reddot-push for push run, reddot-webhooks for webhooks run.", valueName: "name"))
    public var group: String?

    /// The topic: the flag, then `REDDOT_CHANGES_TOPIC`, then `reddot.changes`.
    public var topic: String {
        KafkaOptions.nonEmpty(changesTopic) ?? KafkaOptions.nonEmpty(KafkaOptions.environment["REDDOT_CHANGES_TOPIC"]) ?? "reddot.changes"
    }

    public func validate() throws {
        if let brokers, brokers.allSatisfy(\.isWhitespace) { throw ValidationError("--brokers is empty; give host:port[,host:port…]") }
        if let problem = KafkaOptions.topicProblem(topic) { throw ValidationError("--changes-topic (else REDDOT_CHANGES_TOPIC): \(problem)") }
        if let group, let problem = KafkaConfiguration.nameProblem(group, kind: "group") { throw ValidationError("--group: \(problem)") }
        for assignment in assignments {
            do { _ = try KafkaConfiguration.parse(assignment: assignment) } catch { throw ValidationError("-X \(error.message); write -X key=value") }
        }
    }

    /// The client's properties: the brokers, then `REDDOT_KAFKA_CONFIG`'s file, then each `-X`.
    public func kafka() throws -> KafkaConfiguration {
        var kafka = KafkaConfiguration(
            bootstrapServers: KafkaOptions.nonEmpty(brokers) ?? KafkaOptions.nonEmpty(KafkaOptions.environment["REDDOT_KAFKA_BROKERS"])
                ?? KafkaOptions.defaultBrokers)
        if let path = KafkaOptions.nonEmpty(KafkaOptions.environment["REDDOT_KAFKA_CONFIG"]) {
            for (key, value) in try KafkaOptions.readProperties(path: path) { kafka.set(key, value) }
        }
        for assignment in assignments {
            let (key, value) = try KafkaConfiguration.parse(assignment: assignment)
            kafka.set(key, value)
        }
        return kafka
    }
}
