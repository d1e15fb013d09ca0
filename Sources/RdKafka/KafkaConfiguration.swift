internal import CRdKafka

/// librdkafka properties (`bootstrap.servers`, `security.protocol`, …), passed through as given,
/// like kcat's `-X key=value`.
public struct KafkaConfiguration: Sendable {
    /// The properties, in the order they are set (a later one wins).
    public var properties: [(key: String, value: String)]

    /// Creates a configuration from properties.
    public init(_ properties: [(key: String, value: String)] = []) {
        self.properties = properties
    }

    /// Creates a configuration for `bootstrap.servers`.
    public init(bootstrapServers: String) {
        self.properties = [("bootstrap.servers", bootstrapServers)]
    }

    /// `session.timeout.ms` for a consumer group member, unless the configuration sets it.
    public static let groupSessionTimeout = "6000"
    /// `heartbeat.interval.ms` with ``groupSessionTimeout``: a third of it.
    public static let groupHeartbeatInterval = "2000"

    /// Sets the group timers a consumer needs unless they are set. A member that dies without
    /// leaving (kill -9, a lost node) holds its partitions until its session times out;
    /// librdkafka's 45 s default stalls the partitions (and, on brokers that wait for every
    /// member to rejoin, the whole group) that long. 6 s is the broker's default minimum
    /// (`group.min.session.timeout.ms`); heartbeats at a third of it.
    public mutating func setGroupTimerDefaults() {
        if self["session.timeout.ms"] == nil { set("session.timeout.ms", Self.groupSessionTimeout) }
        if self["heartbeat.interval.ms"] == nil, self["session.timeout.ms"] == Self.groupSessionTimeout {
            set("heartbeat.interval.ms", Self.groupHeartbeatInterval)
        }
    }

    /// Sets (or overrides) a property.
    public mutating func set(_ key: String, _ value: String) {
        properties.append((key, value))
    }

    /// The last value set for `key`.
    public subscript(key: String) -> String? {
        properties.last { $0.key == key }?.value
    }

    /// Parses `key=value` (as kcat's `-X`).
    ///
    /// - Throws: `KafkaError` when there is no `=` or the key is empty.
    public static func parse(assignment: String) throws(KafkaError) -> (key: String, value: String) {
        guard let equals = assignment.firstIndex(of: "="), equals != assignment.startIndex else {
            throw KafkaError.configuration("'\(assignment.prefix(80))' is not key=value")
        }
        return (String(assignment[..<equals]), String(assignment[assignment.index(after: equals)...]))
    }

    /// A new `rd_kafka_conf_t` holding every property; the caller owns it.
    ///
    /// - Throws: `KafkaError` naming the property librdkafka refused (values are not echoed:
    ///   they may be secrets).
    func makeNative() throws(KafkaError) -> OpaquePointer {
        guard let conf = rd_kafka_conf_new() else { throw KafkaError.configuration("librdkafka could not allocate a configuration") }
        var buffer = [CChar](repeating: 0, count: 512)
        for (key, value) in properties {
            let result = rd_kafka_conf_set(conf, key, value, &buffer, buffer.count)
            if result != RD_KAFKA_CONF_OK {
                rd_kafka_conf_destroy(conf)
                let reason = cBufferText(buffer)
                throw KafkaError.configuration("Kafka property '\(key)' was refused: \(reason)")
            }
        }
        return conf
    }
}

/// librdkafka's version, and the oldest RedDot supports.
public enum RdKafkaVersion {
    /// The linked library's version as text (`2.0.2`).
    public static var text: String { rd_kafka_version_str().map { String(cString: $0) } ?? "unknown" }
    /// The linked library's version as librdkafka encodes it (`0x020002ff`).
    public static var number: Int32 { rd_kafka_version() }
    /// The oldest supported: 2.0.0.
    public static let minimum: Int32 = 0x0200_0000

    /// Throws when the linked librdkafka is older than 2.0.
    public static func requireSupported() throws(KafkaError) {
        guard number >= minimum else {
            throw KafkaError(code: .unsupportedVersion, message: "librdkafka \(text) is too old; RedDot needs 2.0 or newer")
        }
    }
}
