import BadgeIngest
import LibPQ
import RdKafka
import Testing

/// `reddot ingest`'s settings: ranges, defaults from the variables, member names, the consumer's
/// librdkafka properties; no Kafka or database needed.
@Suite("Ingest settings")
struct IngestSettingsTests {
    @Test("each flag out of range is named in a sentence; the parser refuses it with the same sentence")
    func flagProblems() throws {
        #expect(IngestSettings.defaults.problem == nil)
        let refused: [(arguments: [String], sentence: String)] = [
            (["--batch-size", "0"], "--batch-size takes 1…100000"),
            (["--writers", "17"], "--writers takes 1…16"),
            (["--batch-wait-ms=-1"], "--batch-wait-ms takes 0…3600000"),
            (["--batch-min-wait-ms=-1"], "--batch-min-wait-ms takes 0…3600000"),
            (["--batch-min-wait-ms", "3600001"], "--batch-min-wait-ms takes 0…3600000"),
            (["--start-from", "middle"], "--start-from takes earliest or latest"),
            (["--event-retention-days", "inf"], "--event-retention-days takes a number > 0 and ≤ 36500"),
            (["--dead-letter-retention-days", "nan"], "--dead-letter-retention-days takes a number ≥ 0 (0: keep them) and ≤ 36500"),
            (["--dead-letter-retention-days", "36501"], "--dead-letter-retention-days takes a number ≥ 0 (0: keep them) and ≤ 36500"),
            (["--dead-letter-interval-ms", "9"], "--dead-letter-interval-ms takes 10…3600000"),
            (["--rollup-in-ingest-within", "0"], "--rollup-in-ingest-within takes 1…100000000"),
            (["--rollup-in-ingest-within", "100000001"], "--rollup-in-ingest-within takes 1…100000000"),
            (["--rollup-in-ingest-users", "0"], "--rollup-in-ingest-users takes 1…100000"),
            (["--rollup-in-ingest-users", "100001"], "--rollup-in-ingest-users takes 1…100000"),
        ]
        for (arguments, sentence) in refused {
            #expect(throws: (any Error).self, "\(arguments)") { try IngestSettings.parse(arguments) }
            #expect(IngestSettings.message(for: IngestSettingsTests.parseError(arguments)) == sentence, "\(arguments)")
        }
        var settings = IngestSettings.defaults
        settings.instanceID = "bad name"
        #expect(settings.environmentProblem(environment: [:])?.hasSuffix("(--instance-id or REDDOT_INSTANCE_ID)") == true)
        settings.instanceID = nil
        #expect(settings.environmentProblem(environment: ["REDDOT_INSTANCE_ID": "ingest-1"]) == nil)
    }

    @Test("the defaults are the documented ones")
    func defaults() throws {
        let settings = try IngestSettings.parse([])
        #expect(settings.batchSize == 5_000)
        #expect(settings.batchWaitMilliseconds == 100)
        #expect(settings.writers == 2)
        #expect(settings.startFrom == "earliest")
        #expect(settings.eventRetentionDays == 7)
        #expect(settings.deadLetterRetentionDays == 30)
        #expect(settings.rollUp)
        #expect(settings.batchWhenIdle)
        #expect(settings.batchMinWaitMilliseconds == 20)
        #expect(try IngestSettings.parse(["--no-batch-when-idle"]).batchWhenIdle == false)
        var configuration = IngestConfiguration(kafka: KafkaConfiguration(), database: PGConfiguration())
        #expect(configuration.deadLetterInterval == .seconds(5))
        configuration.settings = try IngestSettings.parse(["--dead-letter-interval-ms", "250"])
        #expect(configuration.deadLetterInterval == .milliseconds(250))
        // A library user may set what the parser refuses: the durations stay in range, never trap.
        for days in [Double.nan, .infinity, -.infinity, 1e300, -5] {
            configuration.settings.eventRetentionDays = days
            configuration.settings.deadLetterRetentionDays = days
            #expect(configuration.eventRetention > .zero && configuration.eventRetention <= .seconds(36_500 * 86_400), "\(days)")
            #expect(configuration.deadLetterRetention.map { $0 > .zero && $0 <= .seconds(36_500 * 86_400) } ?? true, "\(days)")
        }
        #expect(try IngestSettings.parse(["--no-rollup-in-ingest"]).rollUp == false)
        // No limit given: the writers size it to the server's lock table.
        #expect(settings.rollUpUsers == nil)
        #expect(try IngestSettings.parse(["--rollup-in-ingest-users", "2500"]).rollUpUsers == 2_500)
        // By default a batch of spread users rolls them up only when caught up, as any batch.
        #expect(settings.rollUpWithinRecords == 5_000)
        #expect(try IngestSettings.parse(["--batch-size", "1000"]).rollUpWithinRecords == 1_000)
        #expect(try IngestSettings.parse(["--rollup-in-ingest-within", "123"]).rollUpWithinRecords == 123)
        var extreme = IngestSettings.defaults
        for (batchSize, within) in [(Int.max, nil), (Int.min, nil), (5, Int.min), (5, Int.max)] as [(Int, Int?)] {
            (extreme.batchSize, extreme.rollUpWithin) = (batchSize, within)
            #expect((1...(Int64.max / 2)).contains(extreme.rollUpWithinRecords), "\(batchSize) \(String(describing: within))")
        }
    }

    @Test("the flag wins over the variable, and none makes a dynamic member")
    func instanceName() {
        var settings = IngestSettings.defaults
        #expect(settings.instanceName(environment: ["REDDOT_INSTANCE_ID": "from-variable"]) == "from-variable")
        settings.instanceID = "from-flag"
        #expect(settings.instanceName(environment: ["REDDOT_INSTANCE_ID": "from-variable"]) == "from-flag")
        settings.instanceID = "none"
        #expect(settings.instanceName(environment: [:]) == nil)
        #expect(IngestSettings.memberName(host: "pod 7/ü") == "pod-7--")
        #expect(IngestSettings.memberName(host: "..") == nil)
        #expect(IngestSettings.memberName(host: String(repeating: "h", count: 300))?.count == 200)
    }

    @Test("group and dead-letter topic come from the flags, else the variables, else the defaults; a library user gets a dynamic member")
    func resolved() throws {
        var configuration = IngestConfiguration(kafka: KafkaConfiguration(bootstrapServers: "localhost:9092"), database: PGConfiguration())
        configuration.topic = "events"
        #expect(configuration.instanceID == nil, "without the command line's resolution, no host name")
        configuration.settings = try IngestSettings.parse(["--instance-id", "none", "--start-from", "latest", "--event-retention-days", "1"])
            .resolved(topic: "events", environment: [:])
        #expect(configuration.group == "reddot-ingest")
        #expect(configuration.deadLetterTopic == "events.dlq")
        #expect(configuration.instanceID == nil)
        #expect(configuration.startFromEnd)
        #expect(configuration.eventRetention == .seconds(86_400))
        #expect(configuration.deadLetterRetention == .seconds(30 * 86_400))
        configuration.settings = try IngestSettings.parse(["--dead-letter-retention-days", "0"]).resolved(
            topic: "events", environment: ["REDDOT_KAFKA_GROUP": "g", "REDDOT_KAFKA_DLQ_TOPIC": "dead", "REDDOT_INSTANCE_ID": "i-1"])
        #expect(configuration.deadLetterRetention == nil)
        #expect(configuration.group == "g")
        #expect(configuration.deadLetterTopic == "dead")
        #expect(configuration.instanceID == "i-1")
        configuration.settings = try IngestSettings.parse(["--group", "flag", "--dlq-topic", "flag.dlq"]).resolved(
            topic: "events", environment: ["REDDOT_KAFKA_GROUP": "g", "REDDOT_KAFKA_DLQ_TOPIC": "dead"])
        #expect(configuration.group == "flag")
        #expect(configuration.deadLetterTopic == "flag.dlq")
        #expect(configuration.settings.deadLetterTopicProblem == nil)
    }

    @Test("a dead-letter topic Kafka would refuse is named with where it came from")
    func deadLetterTopicProblem() throws {
        let spaced = try IngestSettings.parse(["--dlq-topic", "a b"]).resolved(topic: "events", environment: [:])
        #expect(spaced.deadLetterTopicProblem?.hasPrefix("the dead-letter topic: topic 'a b' has the character ' '") == true, "\(spaced)")
        let fromVariable = try IngestSettings.parse([]).resolved(topic: "events", environment: ["REDDOT_KAFKA_DLQ_TOPIC": ".."])
        #expect(fromVariable.deadLetterTopicProblem?.hasSuffix("(--dlq-topic, else REDDOT_KAFKA_DLQ_TOPIC, else <topic>.dlq)") == true)
        // The default, <topic>.dlq, outgrows Kafka's 249 characters when the topic is 246 or more.
        let long = try IngestSettings.parse([]).resolved(topic: String(repeating: "t", count: 246), environment: [:])
        #expect(long.deadLetterTopicProblem?.contains("1-249 characters") == true)
        #expect(try IngestSettings.parse([]).resolved(topic: String(repeating: "t", count: 245), environment: [:]).deadLetterTopicProblem == nil)
    }

    @Test("the consumer's librdkafka defaults apply unless a property is given, and --help lists them")
    func kafkaDefaults() throws {
        var configuration = IngestConfiguration(kafka: KafkaConfiguration(bootstrapServers: "b:9092"), database: PGConfiguration())
        configuration.settings.group = "g"
        configuration.settings.instanceID = "i-1"
        var kafka = configuration.consumerKafka
        #expect(kafka["group.id"] == "g")
        #expect(kafka["group.instance.id"] == "i-1")
        #expect(kafka["session.timeout.ms"] == "6000")
        #expect(kafka["heartbeat.interval.ms"] == "2000")
        for (key, value, _) in IngestSettings.kafkaDefaults {
            #expect(kafka[key] == value)
            #expect(IngestSettings.kafkaDefaultsText.contains("\(key)=\(value)"))
        }
        configuration.kafka.set("fetch.wait.max.ms", "250")
        configuration.kafka.set("session.timeout.ms", "30000")
        kafka = configuration.consumerKafka
        #expect(kafka["fetch.wait.max.ms"] == "250")
        #expect(kafka["session.timeout.ms"] == "30000")
        #expect(kafka["heartbeat.interval.ms"] == nil, "librdkafka's own heartbeat for a session timeout of the operator's")
    }

    private static func parseError(_ arguments: [String]) -> any Error {
        do {
            _ = try IngestSettings.parse(arguments)
        } catch {
            return error
        }
        return CancellationError()
    }
}

