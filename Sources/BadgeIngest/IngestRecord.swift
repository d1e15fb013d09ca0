public import RdKafka

/// One Kafka record as ingest sees it (topic, partition, offset, key, payload, headers).
public typealias IngestRecord = KafkaRecord

/// A topic and one of its partitions.
public typealias TopicPartition = RdKafka.TopicPartition
