public import ArgumentParser
import Foundation
public import RdKafka

/// Every setting of `reddot ingest` (and of `reddot run`'s ingest), declared once: its flag, its
/// `REDDOT_*` variable where it has one, its default, its help and the values it takes. The
/// commands include this type as an option group; `IngestConfiguration.settings` carries it to the
/// worker, which reads each value from here. A new setting is one `@Option` here, with its range
/// in ``problem``.
public struct IngestSettings: ParsableArguments, Sendable {
    /// Options in their definition state; read ``defaults`` (or a parsed value) instead.
    public init() {}

    /// Every flag left out, as `reddot ingest` with no flags parses them (no variable read).
    public static let defaults: IngestSettings = {
        do {
            return try IngestSettings.parse([])
        } catch {
            preconditionFailure("ingest's defaults are out of their own ranges: \(error)")
        }
    }()

    @Option(help: ArgumentHelp("The consumer group. Default: REDDOT_KAFKA_GROUP, else reddot-ingest.", valueName: "id"))
    public var group: String?
    @Option(
        name: .customLong("instance-id"),
        help: ArgumentHelp(
            "This consumer's stable name in the group (Kafka static membership, group.instance.id): an ingest that "
                + "restarts under the same name gets its partitions back at once, without waiting for the dead "
                + "one's session to time out. Each live ingest of a group needs its own (two with one name fence "
                + "each other), so with the default run one ingest per host. Default: REDDOT_INSTANCE_ID, "
                + "else the host name (in Kubernetes, the pod name); 'none' makes a dynamic member.",
            valueName: "name"))
    public var instanceID: String?
    @Option(name: .customLong("dlq-topic"), help: ArgumentHelp("The dead-letter topic. Default: REDDOT_KAFKA_DLQ_TOPIC, else <topic>.dlq.", valueName: "name"))
    public var deadLetterTopic: String?
    @Option(help: ArgumentHelp("The rules file mapping content event types to badge operations (YAML). Default: REDDOT_RULES_FILE; without one, only direct operations (op) are accepted.", valueName: "file"))
    public var rules: String?
    @Option(name: .customLong("batch-size"), help: "The most records written in one transaction.")
    public var batchSize: Int = 5_000
    @Option(name: .customLong("batch-wait-ms"), help: "How long a batch may wait to fill, in milliseconds (with --batch-when-idle, it goes sooner once the writers are free).")
    public var batchWaitMilliseconds: Int = 100
    @Flag(
        name: .customLong("batch-when-idle"), inversion: .prefixedNo,
        help: ArgumentHelp(
            "Hand a batch to the writers once they are free, no record is ready and it has waited --batch-min-wait-ms, "
                + "instead of waiting up to --batch-wait-ms for it to fill, unless more records wait in Kafka than it holds. "
                + "At light load a badge shows sooner, for CPU the machine had spare (at 2,500 events/s over 100,000 users, "
                + "p99 publish → visible 78–92 ms instead of 155–200 ms, with a 2-core machine 79–82% busy instead of "
                + "48–61%); under load, records gather while the writers work and batches grow by themselves. "
                + "--no-batch-when-idle waits for a full batch or --batch-wait-ms."))
    public var batchWhenIdle = true
    @Option(
        name: .customLong("batch-min-wait-ms"),
        help: "With --batch-when-idle: how long a batch waits at least, in milliseconds, before it goes to free writers (0…3600000). Less shows badges sooner and costs more transactions: 0 nearly doubled PostgreSQL's CPU at 2,500 events/s; 50 cost little more than --no-batch-when-idle.")
    public var batchMinWaitMilliseconds: Int = 20
    @Option(help: "Writer threads (each with its own database connection) that commit a batch's partitions in parallel.")
    public var writers: Int = 2
    @Option(name: .customLong("start-from"), help: "Where a partition with no stored offset starts: earliest or latest.")
    public var startFrom: String = "earliest"
    @Option(name: .customLong("event-retention-days"), help: "How long event ids are kept to skip duplicates (users' ids at least this long and at most twice it: they go a dedupe generation at a time; item tombstones, clear marks and erased users' marks this long; increments stored longer fold into their counts).")
    public var eventRetentionDays: Double = 7
    @Option(
        name: .customLong("dead-letter-retention-days"),
        help: "How long dead letters (rejected records, whole events) are kept once published to the dead-letter topic; 0 keeps them until deleted by hand.")
    public var deadLetterRetentionDays: Double = 30
    @Option(
        name: .customLong("dead-letter-interval-ms"),
        help: "How often rejected records not yet on the dead-letter topic are published, in milliseconds (a batch with rejections also publishes at once).")
    public var deadLetterIntervalMilliseconds = 5_000
    @Flag(
        name: .customLong("rollup-in-ingest"), inversion: .prefixedNo,
        help: ArgumentHelp(
            "Bring a batch's users current in the batch's own transaction, as a rollup round would, when less than "
                + "--batch-size records wait after it (ingest has caught up), or less than --rollup-in-ingest-within if "
                + "its users have at most two events each on average: their new versions show when it commits. Behind "
                + "that, a batch's users, and a user a rollup round or an action holds at that moment, are left to the "
                + "rollup, which must still run (it also takes expiries). "
                + "--no-rollup-in-ingest leaves every user to the rollup."))
    public var rollUp = true
    @Option(
        name: .customLong("rollup-in-ingest-within"),
        help: ArgumentHelp(
            "With --rollup-in-ingest: how many records may wait after a flush's batches, in their partitions, for them to "
                + "bring their users current themselves when those have at most two events each on average (1…100000000; "
                + "less than --batch-size counts as --batch-size). Default: --batch-size, as for any users. More (say "
                + "4 × --batch-size) keeps a short lag of spread users, whose writes the rollup's rounds would not "
                + "gather, on the cheaper way, but slows ingest while it is behind; measured, it helped in some runs "
                + "and hurt in others (BENCHMARKS.md).",
            valueName: "records"))
    public var rollUpWithin: Int?
    @Option(
        name: .customLong("rollup-in-ingest-users"),
        help: ArgumentHelp(
            "With --rollup-in-ingest: the most users one batch brings current itself (1…100000); the rest are left to "
                + "the rollup. Each holds an entry of PostgreSQL's shared lock table (about max_locks_per_transaction × "
                + "max_connections entries for the whole server) until the batch commits. Default: a quarter of that "
                + "table shared among --writers, at least 1000 (PostgreSQL's defaults give 1000); raise "
                + "max_locks_per_transaction for more.",
            valueName: "users"))
    public var rollUpUsers: Int?

    /// How batches form, for the benchmarks' reports: `wait 100 ms (20 ms once the writers are
    /// free)`, or `wait 100 ms` with `--no-batch-when-idle`.
    public var batchWaitText: String {
        "wait \(batchWaitMilliseconds) ms" + (batchWhenIdle ? " (\(batchMinWaitMilliseconds) ms once the writers are free)" : "")
    }

    /// How many records may wait after a batch of spread users for it to bring them current
    /// itself (`--rollup-in-ingest-within`; default one batch, as for any users). Kept within
    /// 1…`Int64.max / 2` whatever a library user sets (the parser refuses what is out of range),
    /// so that the sum `IngestWorker.rollsUpItself` adds up to it never overflows.
    public var rollUpWithinRecords: Int64 {
        min(max(Int64(clamping: rollUpWithin ?? batchSize), 1), Int64.max / 2)
    }

    /// The librdkafka properties the consumer sets unless the properties file or `-X` gives them,
    /// each with why; besides these, `group.id` and `group.instance.id` come from the settings
    /// above, and the group timers from `KafkaConfiguration.setGroupTimerDefaults()`.
    public static let kafkaDefaults: [(key: String, value: String, why: String)] = [
        ("statistics.interval.ms", "5000", "librdkafka's statistics feed the consumer-lag metrics"),
        ("fetch.wait.max.ms", "10", "librdkafka's 500 ms would add up to half a second to every badge"),
    ]

    /// Every librdkafka property default of the consumer, as one sentence for `--help`.
    public static var kafkaDefaultsText: String {
        let timers = [
            "session.timeout.ms=\(KafkaConfiguration.groupSessionTimeout)",
            "heartbeat.interval.ms=\(KafkaConfiguration.groupHeartbeatInterval) (with that session timeout)",
        ]
        return "Kafka properties set unless --kafka-config or -X gives them: "
            + (timers + kafkaDefaults.map { "\($0.key)=\($0.value)" }).joined(separator: ", ") + "."
    }

    public func validate() throws {
        if let problem { throw ValidationError(problem) }
    }

    /// The first flag outside its range, as a sentence naming the flag (the command's usage
    /// error); nil when every flag is usable. The member name from the environment or the host is
    /// checked by ``environmentProblem(environment:)``.
    public var problem: String? {
        guard batchSize >= 1, batchSize <= 100_000 else { return "--batch-size takes 1…100000" }
        guard (1...16).contains(writers) else { return "--writers takes 1…16" }
        guard (0...3_600_000).contains(batchWaitMilliseconds) else { return "--batch-wait-ms takes 0…3600000" }
        guard (0...3_600_000).contains(batchMinWaitMilliseconds) else { return "--batch-min-wait-ms takes 0…3600000" }
        guard ["earliest", "latest"].contains(startFrom) else { return "--start-from takes earliest or latest" }
        // Bounded before `.seconds(days * 86400)`, which traps beyond Int128 attoseconds (1e300, inf).
        guard eventRetentionDays > 0, eventRetentionDays <= 36_500 else { return "--event-retention-days takes a number > 0 and ≤ 36500" }
        guard deadLetterRetentionDays >= 0, deadLetterRetentionDays <= 36_500 else {
            return "--dead-letter-retention-days takes a number ≥ 0 (0: keep them) and ≤ 36500"
        }
        guard (10...3_600_000).contains(deadLetterIntervalMilliseconds) else { return "--dead-letter-interval-ms takes 10…3600000" }
        if let rollUpWithin, !(1...100_000_000).contains(rollUpWithin) { return "--rollup-in-ingest-within takes 1…100000000" }
        if let rollUpUsers, !(1...100_000).contains(rollUpUsers) { return "--rollup-in-ingest-users takes 1…100000" }
        return nil
    }

    /// Why the member name these settings and `environment` give is not a valid one, naming the
    /// flag and the variable; nil when it is (or there is none).
    public func environmentProblem(environment: [String: String]) -> String? {
        guard let name = instanceName(environment: environment), let problem = KafkaConfiguration.nameProblem(name, kind: "instance id") else {
            return nil
        }
        return "\(problem) (--instance-id or REDDOT_INSTANCE_ID)"
    }

    /// Why the dead-letter topic of these resolved settings (``resolved(topic:environment:)``)
    /// is not a valid Kafka topic name, naming where it comes from; nil when it is. Checked at
    /// start: a topic Kafka refuses would leave every dead letter waiting in the database.
    public var deadLetterTopicProblem: String? {
        guard let topic = deadLetterTopic, let problem = KafkaConfiguration.nameProblem(topic, kind: "topic") else { return nil }
        return "the dead-letter topic: \(problem) (--dlq-topic, else REDDOT_KAFKA_DLQ_TOPIC, else <topic>.dlq)"
    }

    /// These settings with what the command line left out filled from `environment` and this
    /// host: the group from `REDDOT_KAFKA_GROUP`, the member name from `REDDOT_INSTANCE_ID` or
    /// the host name (`none` when neither gives one), the dead-letter topic from
    /// `REDDOT_KAFKA_DLQ_TOPIC`, else `<topic>.dlq` (the rules file's variable is read where the
    /// file is loaded).
    /// A library user who builds a configuration without this gets a dynamic member.
    public func resolved(topic: String, environment: [String: String]) -> IngestSettings {
        var settings = self
        settings.group = Self.nonEmpty(group) ?? Self.nonEmpty(environment["REDDOT_KAFKA_GROUP"])
        settings.instanceID = instanceName(environment: environment) ?? "none"
        settings.deadLetterTopic = Self.deadLetterTopic(deadLetterTopic, topic: topic, environment: environment)
        return settings
    }

    /// The dead-letter topic of the events topic `topic`: `flag` unless empty, then
    /// `REDDOT_KAFKA_DLQ_TOPIC`, then `<topic>.dlq`. Every command that names it (ingest, `users
    /// erase`) takes it from here.
    public static func deadLetterTopic(_ flag: String?, topic: String, environment: [String: String]) -> String {
        nonEmpty(flag) ?? nonEmpty(environment["REDDOT_KAFKA_DLQ_TOPIC"]) ?? "\(topic).dlq"
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

    private static func nonEmpty(_ text: String?) -> String? {
        guard let text, !text.isEmpty else { return nil }
        return text
    }
}

extension IngestConfiguration {
    /// The consumer group (`--group`), else reddot-ingest.
    public var group: String { settings.group ?? "reddot-ingest" }
    /// This consumer's static member name (`group.instance.id`, Kafka static membership,
    /// KIP-345), or nil for a dynamic member (no `--instance-id`, or `none`). A static member that
    /// restarts under the same name within `session.timeout.ms` gets its partitions back without a
    /// rebalance; two live consumers of one group must never share a name (the broker fences the
    /// older one).
    public var instanceID: String? { settings.instanceID.flatMap { $0.isEmpty || $0 == "none" ? nil : $0 } }
    /// Where rejected records are published (`--dlq-topic`), else `<topic>.dlq`.
    public var deadLetterTopic: String { settings.deadLetterTopic ?? "\(topic).dlq" }
    /// Whether a partition with no stored offset starts at its end (`--start-from latest`).
    public var startFromEnd: Bool { settings.startFrom == "latest" }
    /// How long applied event ids are kept for deduplication (`--event-retention-days`, within
    /// its range whoever set it; a value that is not a number counts as the default).
    public var eventRetention: Duration {
        let days = settings.eventRetentionDays.isNaN ? IngestSettings.defaults.eventRetentionDays : settings.eventRetentionDays
        return .seconds(min(max(days, 1.0 / 86_400), 36_500) * 86_400)
    }
    /// How long dead letters are kept once published (nil: until deleted by hand).
    public var deadLetterRetention: Duration? {
        settings.deadLetterRetentionDays > 0 ? .seconds(min(settings.deadLetterRetentionDays, 36_500) * 86_400) : nil
    }
    /// How often rejected records not yet on the dead-letter topic are published
    /// (`--dead-letter-interval-ms`).
    public var deadLetterInterval: Duration { .milliseconds(max(10, settings.deadLetterIntervalMilliseconds)) }
    /// The consumer's librdkafka properties: `kafka`, the group and member name, and each of
    /// ``IngestSettings/kafkaDefaults`` that the properties file and `-X` left out.
    public var consumerKafka: KafkaConfiguration {
        var kafka = self.kafka
        kafka.set("group.id", group)
        if let instanceID, kafka["group.instance.id"] == nil { kafka.set("group.instance.id", instanceID) }
        kafka.setGroupTimerDefaults()
        for (key, value, _) in IngestSettings.kafkaDefaults where kafka[key] == nil { kafka.set(key, value) }
        return kafka
    }
}
