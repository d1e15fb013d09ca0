/// Where `POST /v1/events` sends checked events: the Kafka topic that ingest consumes.
/// `KafkaEventPublisher` implements it with a Kafka producer.
public protocol EventPublisher: Sendable {
    /// Sends the records in order and waits until the broker has acknowledged every one.
    ///
    /// - Returns: where each record landed, in order.
    /// - Throws: when any record could not be delivered (the answer is then 503; records
    ///   before it may have been delivered, and event ids make a retry safe).
    func publish(_ records: [(key: String, payload: [UInt8])]) async throws -> [PublishedRecord]
}

/// Where a published record landed.
public struct PublishedRecord: Sendable, Hashable {
    /// Its partition.
    public var partition: Int32
    /// Its offset.
    public var offset: Int64

    /// A record position.
    public init(partition: Int32, offset: Int64) {
        self.partition = partition
        self.offset = offset
    }
}
