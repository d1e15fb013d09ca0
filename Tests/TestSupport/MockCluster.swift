public import Logging
public import RdKafka

/// librdkafka's mock cluster with `topics` created, made on a thread of its own: creating a topic
/// waits for the mock cluster's thread, and on a busy machine that wait held one of the two
/// cooperative threads every test shares.
public func mockCluster(topics: [(name: String, partitions: Int32)], logger: Logger) async throws -> KafkaMockCluster {
    try await onThread {
        let cluster = try KafkaMockCluster(logger: logger)
        do {
            for topic in topics { try cluster.createTopic(topic.name, partitions: topic.partitions) }
        } catch {
            cluster.close()
            throw error
        }
        return cluster
    }
}
