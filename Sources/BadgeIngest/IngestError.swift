/// An error of the ingest pipeline's own making (database and Kafka errors keep their own types:
/// `PGError`, `KafkaError`).
public struct IngestError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong. Switch with a `default`: more cases may come.
    public enum Code: Sendable, Hashable {
        /// The stored offset of `partition` was not the one this consumer expected (`nil`: no
        /// stored row): another consumer owns the partition now. The caller must roll back the
        /// batch's transaction and give up the partition; retrying cannot succeed.
        case fenced(TopicPartition, expected: Int64?, found: Int64?)
    }

    /// The kind of failure.
    public var code: Code
    /// A message an operator can act on.
    public var message: String

    /// Creates an error.
    public init(code: Code, message: String) {
        self.code = code
        self.message = message
    }

    /// The error for a lost compare-and-set on `partition`'s stored offset.
    public static func fenced(_ partition: TopicPartition, expected: Int64?, found: Int64?) -> IngestError {
        func show(_ offset: Int64?) -> String { offset.map(String.init) ?? "none" }
        return IngestError(
            code: .fenced(partition, expected: expected, found: found),
            message: "stored offset of \(partition) is \(show(found)), not the expected \(show(expected)); "
                + "another consumer owns the partition")
    }

    /// Whether running the unit of work again may succeed (never, for the codes so far).
    public var isRetriable: Bool { false }

    public var description: String { message }
}
