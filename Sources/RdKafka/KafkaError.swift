internal import CRdKafka

/// An error from librdkafka or from this wrapper.
///
/// It keeps librdkafka's code (`KafkaError.Code`), whether trying again may succeed
/// (`isRetriable`) and whether the client is unusable for good (`isFatal`).
public struct KafkaError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is: one of librdkafka's `rd_kafka_resp_err_t` values, or one of
    /// the wrapper's own. Extensible: switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: Hashable, Sendable {
            case librdkafka(Int32)
            case wrapper(String)
        }

        private let base: Base

        /// The code for librdkafka's `rd_kafka_resp_err_t` value `rawValue` (negative: errors
        /// raised by the client itself, positive: errors the broker sent).
        public init(librdkafka rawValue: Int32) { base = .librdkafka(rawValue) }

        init(_ error: rd_kafka_resp_err_t) { base = .librdkafka(error.rawValue) }

        private init(wrapper name: String) { base = .wrapper(name) }

        /// librdkafka's `rd_kafka_resp_err_t` value, or nil for the wrapper's own codes.
        public var librdkafkaValue: Int32? {
            if case .librdkafka(let value) = base { return value }
            return nil
        }

        /// A configuration property was refused, or a required one is missing (wrapper).
        public static let configuration = Code(wrapper: "configuration")
        /// librdkafka could not create a client (wrapper).
        public static let creation = Code(wrapper: "create")
        /// The client was closed before the call (wrapper).
        public static let closed = Code(wrapper: "closed")
        /// The mock cluster could not start, or is stopped (wrapper).
        public static let mockCluster = Code(wrapper: "mock")
        /// The linked librdkafka is too old (wrapper).
        public static let unsupportedVersion = Code(wrapper: "version")

        /// `_MSG_TIMED_OUT`: a record was not delivered within `message.timeout.ms`.
        public static let messageTimedOut = Code(RD_KAFKA_RESP_ERR__MSG_TIMED_OUT)
        /// `_TIMED_OUT`: an operation did not finish in time.
        public static let timedOut = Code(RD_KAFKA_RESP_ERR__TIMED_OUT)
        /// `_TRANSPORT`: a broker connection failed.
        public static let transport = Code(RD_KAFKA_RESP_ERR__TRANSPORT)
        /// `_ALL_BROKERS_DOWN`: no broker is reachable.
        public static let allBrokersDown = Code(RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN)
        /// `_RESOLVE`: a broker's host name did not resolve.
        public static let resolve = Code(RD_KAFKA_RESP_ERR__RESOLVE)
        /// `_QUEUE_FULL`: the producer's local queue is full.
        public static let queueFull = Code(RD_KAFKA_RESP_ERR__QUEUE_FULL)
        /// `_FATAL`: the client failed for good.
        public static let fatal = Code(RD_KAFKA_RESP_ERR__FATAL)
        /// `_PARTITION_EOF`: a consumer reached the end of a partition.
        public static let partitionEOF = Code(RD_KAFKA_RESP_ERR__PARTITION_EOF)
        /// `_NO_OFFSET`: there was no offset to commit.
        public static let noOffset = Code(RD_KAFKA_RESP_ERR__NO_OFFSET)
        /// `FENCED_INSTANCE_ID`: another consumer joined the group with the same
        /// `group.instance.id` (static membership), and the broker fenced this one.
        public static let fencedInstanceID = Code(RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID)

        /// librdkafka's name for the code (`_TRANSPORT`, `UNKNOWN_TOPIC_OR_PART`, …), or the wrapper's.
        public var description: String {
            switch base {
            case .wrapper(let name):
                return name
            case .librdkafka(let value):
                return rd_kafka_err2name(rd_kafka_resp_err_t(rawValue: value)).map { String(cString: $0) } ?? "\(value)"
            }
        }

        /// Codes after which the same request may succeed later: brokers away, leaders moving,
        /// timeouts, a full local queue.
        static let retriable: Set<Code> = [
            .messageTimedOut, .timedOut, .transport, .allBrokersDown, .resolve, .queueFull,
            Code(RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE), Code(RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION),
            Code(RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT), Code(RD_KAFKA_RESP_ERR_NETWORK_EXCEPTION),
            Code(RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS), Code(RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND),
            Code(RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS), Code(RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE),
            Code(RD_KAFKA_RESP_ERR_NOT_COORDINATOR), Code(RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART),
        ]
    }

    /// The kind of failure.
    public var code: Code
    /// A sentence saying what went wrong.
    public var message: String
    /// Whether trying the same operation again may succeed. From librdkafka's error object
    /// (`rd_kafka_error_is_retriable`) when it gave one, else from the code.
    public var isRetriable: Bool
    /// Whether the client can no longer be used and must be recreated. From librdkafka's error
    /// object (`rd_kafka_error_is_fatal`) when it gave one, else from the code (`_FATAL`,
    /// `FENCED_INSTANCE_ID`).
    public var isFatal: Bool

    /// Creates an error; `isRetriable` and `isFatal` default to what the code says.
    public init(code: Code, message: String, isRetriable: Bool? = nil, isFatal: Bool? = nil) {
        self.code = code
        self.message = message
        self.isRetriable = isRetriable ?? Code.retriable.contains(code)
        self.isFatal = isFatal ?? (code == .fatal || code == .fencedInstanceID)
    }

    init(_ error: rd_kafka_resp_err_t, context: String) {
        let text = rd_kafka_err2str(error).map { String(cString: $0) } ?? "unknown error"
        self.init(code: Code(error), message: "\(context): \(text)")
    }

    /// An error from librdkafka's error object (which the caller still owns and destroys).
    init(object error: OpaquePointer, context: String) {
        let text = rd_kafka_error_string(error).map { String(cString: $0) } ?? "unknown"
        self.init(
            code: Code(rd_kafka_error_code(error)), message: "\(context): \(text)",
            isRetriable: rd_kafka_error_is_retriable(error) != 0, isFatal: rd_kafka_error_is_fatal(error) != 0)
    }

    /// A configuration property was refused.
    static func configuration(_ message: String) -> KafkaError {
        KafkaError(code: .configuration, message: message)
    }

    /// Whether the broker fenced this consumer because another one joined its group with the
    /// same `group.instance.id` (static membership): fatal for this client.
    public var isFencedInstance: Bool { code == .fencedInstanceID }

    /// The message and the code: `delivery failed: Local: Message timed out [_MSG_TIMED_OUT]`.
    public var description: String { "\(message) [\(code)]" }
}

/// The text of a NUL-terminated error buffer that librdkafka filled.
func cBufferText(_ buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
