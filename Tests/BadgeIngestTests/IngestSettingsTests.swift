import BadgeIngest
import LibPQ
import RdKafka
import Testing

/// `reddot ingest`'s settings: ranges, defaults from the variables, member names; no Kafka or database needed.
@Suite("Ingest settings")
struct IngestSettingsTests {
    @Test("each flag out of range is named in a sentence")
    func flagProblems() {
        let named = ["REDDOT_INSTANCE_ID": "ingest-1"]
        #expect(IngestSettings().flagProblem(environment: named) == nil)
        var settings = IngestSettings()
        settings.batchSize = 0
        #expect(settings.flagProblem(environment: named) == "--batch-size takes 1…100000")
        settings = IngestSettings()
        settings.writers = 17
        #expect(settings.flagProblem(environment: named) == "--writers takes 1…16")
        settings = IngestSettings()
        settings.startFrom = "middle"
        #expect(settings.flagProblem(environment: named) == "--start-from takes earliest or latest")
        settings = IngestSettings()
        settings.eventRetentionDays = .infinity
        #expect(settings.flagProblem(environment: named) == "--event-retention-days takes a number > 0 and ≤ 36500")
        for days in [-1, .nan, .infinity, 36_501] {
            settings = IngestSettings()
            settings.deadLetterRetentionDays = days
            #expect(settings.flagProblem(environment: named) == "--dead-letter-retention-days takes a number ≥ 0 (0: keep them) and ≤ 36500")
        }
        settings = IngestSettings()
        settings.instanceID = "bad name"
        #expect(settings.flagProblem(environment: named)?.hasSuffix("(--instance-id or REDDOT_INSTANCE_ID)") == true)
    }

    @Test("the flag wins over the variable, and none makes a dynamic member")
    func instanceName() {
        var settings = IngestSettings()
        #expect(settings.instanceName(environment: ["REDDOT_INSTANCE_ID": "from-variable"]) == "from-variable")
        settings.instanceID = "from-flag"
        #expect(settings.instanceName(environment: ["REDDOT_INSTANCE_ID": "from-variable"]) == "from-flag")
        settings.instanceID = "none"
        #expect(settings.instanceName(environment: [:]) == nil)
        #expect(IngestSettings.memberName(host: "pod 7/ü") == "pod-7--")
        #expect(IngestSettings.memberName(host: "..") == nil)
        #expect(IngestSettings.memberName(host: String(repeating: "h", count: 300))?.count == 200)
    }

    @Test("group and dead-letter topic come from the variables, else the defaults")
    func apply() {
        var configuration = IngestConfiguration(kafka: KafkaConfiguration(bootstrapServers: "localhost:9092"), database: PGConfiguration())
        configuration.topic = "events"
        var settings = IngestSettings()
        (settings.instanceID, settings.startFrom, settings.eventRetentionDays) = ("none", "latest", 1)
        settings.apply(to: &configuration, environment: [:])
        #expect(configuration.group == "reddot-ingest")
        #expect(configuration.deadLetterTopic == "events.dlq")
        #expect(configuration.instanceID == nil)
        #expect(configuration.startFromEnd)
        #expect(configuration.eventRetention == .seconds(86_400))
        #expect(configuration.deadLetterRetention == .seconds(30 * 86_400))
        settings.deadLetterRetentionDays = 0
        settings.apply(to: &configuration, environment: [:])
        #expect(configuration.deadLetterRetention == nil)
        settings.apply(to: &configuration, environment: ["REDDOT_KAFKA_GROUP": "g", "REDDOT_KAFKA_DLQ_TOPIC": "dead"])
        #expect(configuration.group == "g")
        #expect(configuration.deadLetterTopic == "dead")
    }
}
