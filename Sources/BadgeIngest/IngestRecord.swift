/// One Kafka record as ingest sees it: where it came from, and its bytes (either may be absent).
public struct IngestRecord: Sendable, Hashable {
    /// The topic it was read from.
    public var topic: String
    /// Its partition.
    public var partition: Int32
    /// Its offset in the partition.
    public var offset: Int64
    /// The record key (the user id, `*` for broadcasts), or nil.
    public var key: [UInt8]?
    /// The record value, or nil (a tombstone).
    public var payload: [UInt8]?

    /// Creates a record.
    public init(topic: String, partition: Int32, offset: Int64, key: [UInt8]?, payload: [UInt8]?) {
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.key = key
        self.payload = payload
    }

    /// The record's partition.
    public var topicPartition: TopicPartition { TopicPartition(topic: topic, partition: partition) }
}

/// A topic and one of its partitions.
public struct TopicPartition: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The topic.
    public var topic: String
    /// The partition.
    public var partition: Int32

    /// Creates a topic-partition.
    public init(topic: String, partition: Int32) {
        self.topic = topic
        self.partition = partition
    }

    public static func < (lhs: TopicPartition, rhs: TopicPartition) -> Bool {
        (lhs.topic, lhs.partition) < (rhs.topic, rhs.partition)
    }

    public var description: String { "\(topic)[\(partition)]" }
}
