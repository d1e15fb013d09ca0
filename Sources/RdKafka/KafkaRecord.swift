/// One Kafka record, copied out of librdkafka: where it came from, and its bytes.
public struct KafkaRecord: Sendable, Hashable {
    /// The topic.
    public var topic: String
    /// The partition.
    public var partition: Int32
    /// The offset in the partition.
    public var offset: Int64
    /// The key, or nil.
    public var key: [UInt8]?
    /// The value, or nil (a tombstone).
    public var payload: [UInt8]?
    /// The headers, in order (a name may repeat); a header's value may be nil.
    public var headers: [KafkaHeader]

    /// Creates a record.
    public init(topic: String, partition: Int32, offset: Int64, key: [UInt8]?, payload: [UInt8]?, headers: [KafkaHeader] = []) {
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.key = key
        self.payload = payload
        self.headers = headers
    }

    /// The record's partition.
    public var topicPartition: TopicPartition { TopicPartition(topic: topic, partition: partition) }
}

/// A record header.
public struct KafkaHeader: Sendable, Hashable {
    /// The header's name.
    public var name: String
    /// The header's value, or nil.
    public var value: [UInt8]?

    /// Creates a header.
    public init(name: String, value: [UInt8]?) {
        self.name = name
        self.value = value
    }

    /// A header with a UTF-8 text value.
    public init(name: String, text: String) {
        self.init(name: name, value: Array(text.utf8))
    }
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
