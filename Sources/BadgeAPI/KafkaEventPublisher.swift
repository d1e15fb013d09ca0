public import Logging
public import RdKafka

/// `POST /v1/events` through a Kafka producer: each record goes to `topic` with its key.
public struct KafkaEventPublisher: EventPublisher {
    /// The producer the records go through.
    public let producer: KafkaProducer
    /// The events topic.
    public let topic: String

    /// A publisher through `producer`.
    public init(producer: KafkaProducer, topic: String) {
        self.producer = producer
        self.topic = topic
    }

    /// A publisher with a producer of its own for `brokers`, named reddot-serve, that gives up
    /// on a record after 10 seconds.
    ///
    /// - Throws: `ServeSettingsError` for a topic that is not a valid name or a producer that cannot be made.
    public init(brokers: String, topic: String, logger: Logger) throws(ServeSettingsError) {
        if let problem = KafkaConfiguration.nameProblem(topic, kind: "topic") { throw ServeSettingsError(problem) }
        var kafka = KafkaConfiguration(bootstrapServers: brokers)
        kafka.set("client.id", "reddot-serve")
        kafka.set("message.timeout.ms", "10000")
        do {
            self.init(producer: try KafkaProducer(configuration: kafka, logger: logger), topic: topic)
        } catch {
            throw ServeSettingsError("cannot create the Kafka producer: \(error.message)")
        }
    }

    /// Sends the records in order and waits for every delivery report.
    ///
    /// - Throws: `KafkaError` for the first record that was not delivered.
    public func publish(_ records: [(key: String, payload: [UInt8])]) async throws -> [PublishedRecord] {
        let outgoing = records.map { KafkaOutgoingRecord(topic: topic, key: Array($0.key.utf8), payload: $0.payload) }
        return try await producer.sendAll(outgoing).map { result in
            let delivery = try result.get()
            return PublishedRecord(partition: delivery.partition, offset: delivery.offset)
        }
    }
}
