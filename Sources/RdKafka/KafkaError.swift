internal import CRdKafka

/// An error from librdkafka or from this wrapper.
public struct KafkaError: Error, Sendable, CustomStringConvertible {
    /// librdkafka's `rd_kafka_resp_err_t` value (negative: local errors), or 0 for wrapper errors.
    public var code: Int32
    /// librdkafka's name for the code (`_TRANSPORT`, `UNKNOWN_TOPIC_OR_PART`, …), or the wrapper's.
    public var name: String
    /// A sentence saying what went wrong.
    public var message: String

    /// Creates an error.
    public init(code: Int32 = 0, name: String, message: String) {
        self.code = code
        self.name = name
        self.message = message
    }

    init(_ error: rd_kafka_resp_err_t, context: String) {
        let name = rd_kafka_err2name(error).map { String(cString: $0) } ?? "\(error.rawValue)"
        let text = rd_kafka_err2str(error).map { String(cString: $0) } ?? "unknown error"
        self.init(code: error.rawValue, name: name, message: "\(context): \(text)")
    }

    /// A configuration property was refused.
    static func configuration(_ message: String) -> KafkaError {
        KafkaError(name: "configuration", message: message)
    }

    /// Whether the broker fenced this consumer because another one joined its group with the
    /// same `group.instance.id` (static membership): fatal for this client.
    public var isFencedInstance: Bool { code == RD_KAFKA_RESP_ERR_FENCED_INSTANCE_ID.rawValue }

    public var description: String { "\(message) [\(name)]" }
}

/// The text of a NUL-terminated error buffer that librdkafka filled.
func cBufferText(_ buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
