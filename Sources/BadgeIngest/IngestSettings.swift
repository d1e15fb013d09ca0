import Foundation
import RdKafka

/// What `reddot ingest` (and `reddot run`) was given for the consumer: each flag's value, nil
/// when the flag was left out and its `REDDOT_*` variable or default applies. `reddot` owns the
/// flags and their help; this type owns their ranges and how they fill an `IngestConfiguration`.
public struct IngestSettings: Sendable {
    /// `--group`; else `REDDOT_KAFKA_GROUP`, else reddot-ingest.
    public var group: String?
    /// `--instance-id`; else `REDDOT_INSTANCE_ID`, else the host name; `none` for a dynamic member.
    public var instanceID: String?
    /// `--dlq-topic`; else `REDDOT_KAFKA_DLQ_TOPIC`, else `<topic>.dlq`.
    public var deadLetterTopic: String?
    /// `--batch-size`.
    public var batchSize = 5_000
    /// `--batch-wait-ms`.
    public var batchWaitMilliseconds = 100
    /// `--writers`.
    public var writers = IngestConfiguration.defaultWriters
    /// `--start-from`: earliest or latest.
    public var startFrom = "earliest"
    /// `--event-retention-days`.
    public var eventRetentionDays: Double = 7
    /// `--dead-letter-retention-days` (0: kept until deleted by hand).
    public var deadLetterRetentionDays: Double = 30
    /// `--rollup-in-ingest` (true) or `--no-rollup-in-ingest`.
    public var rollUp = true

    /// Settings with every flag left out.
    public init() {}

    /// The first flag outside its range, as a sentence naming the flag (the command's usage
    /// error); nil when every flag is usable. The instance id is checked after the variable and
    /// host name defaults apply.
    public func flagProblem(environment: [String: String]) -> String? {
        guard batchSize >= 1, batchSize <= 100_000 else { return "--batch-size takes 1…100000" }
        if let problem = IngestConfiguration.writersProblem(writers) { return problem }
        guard (0...3_600_000).contains(batchWaitMilliseconds) else { return "--batch-wait-ms takes 0…3600000" }
        guard ["earliest", "latest"].contains(startFrom) else { return "--start-from takes earliest or latest" }
        // Bounded before `.seconds(days * 86400)`, which traps beyond Int128 attoseconds (1e300, inf).
        guard eventRetentionDays > 0, eventRetentionDays <= 36_500 else { return "--event-retention-days takes a number > 0 and ≤ 36500" }
        guard deadLetterRetentionDays >= 0, deadLetterRetentionDays <= 36_500 else {
            return "--dead-letter-retention-days takes a number ≥ 0 (0: keep them) and ≤ 36500"
        }
        if let name = instanceName(environment: environment), let problem = KafkaConfiguration.nameProblem(name, kind: "instance id") {
            return "\(problem) (--instance-id or REDDOT_INSTANCE_ID)"
        }
        return nil
    }

    /// Sets `configuration`'s group, member name, dead-letter topic and batching from these
    /// settings and `environment` (its topic and rules stay as they are).
    public func apply(to configuration: inout IngestConfiguration, environment: [String: String]) {
        configuration.group = group ?? environment["REDDOT_KAFKA_GROUP"] ?? "reddot-ingest"
        configuration.instanceID = instanceName(environment: environment)
        configuration.deadLetterTopic = deadLetterTopic ?? environment["REDDOT_KAFKA_DLQ_TOPIC"] ?? "\(configuration.topic).dlq"
        configuration.batchSize = batchSize
        configuration.batchWaitMilliseconds = batchWaitMilliseconds
        configuration.writers = writers
        configuration.startFromEnd = startFrom == "latest"
        configuration.eventRetention = .seconds(eventRetentionDays * 86_400)
        configuration.deadLetterRetention = deadLetterRetentionDays > 0 ? .seconds(deadLetterRetentionDays * 86_400) : nil
        configuration.rollUp = rollUp
    }

    /// The static member name: the flag, then `REDDOT_INSTANCE_ID` (either unless empty), then
    /// this machine's host name made into a valid name; nil for `none` (a dynamic member).
    public func instanceName(environment: [String: String]) -> String? {
        let given = [instanceID, environment["REDDOT_INSTANCE_ID"]].compactMap { $0 }.first { !$0.isEmpty }
        if let given { return given == "none" ? nil : given }
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return nil }
        return Self.memberName(host: String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }

    /// `host` as a group member name: at most 200 characters, each outside `[A-Za-z0-9._-]`
    /// replaced by `-`; nil when that leaves an empty name, `.` or `..`.
    public static func memberName(host: String) -> String? {
        let name = String(
            host.unicodeScalars.prefix(200).map { scalar -> Character in
                switch scalar {
                case "a"..."z", "A"..."Z", "0"..."9", ".", "_", "-": Character(scalar)
                default: "-"
                }
            })
        return name.isEmpty || name == "." || name == ".." ? nil : name
    }
}
