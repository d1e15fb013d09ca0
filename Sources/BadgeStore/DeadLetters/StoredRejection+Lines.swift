import Foundation

extension StoredRejection {
    /// One line for `reddot dlq list`: `#id  time  reason  topic/partition@offset  id=…  [flags]  message`.
    public var textLine: String {
        let record = self
        var flags: [String] = []
        if record.publishedAt != nil { flags.append("published") }
        if record.replayedAt != nil { flags.append("replayed") }
        let origin = "\(record.record.topic)/\(record.record.partition)@\(record.record.offset)"
        let when = ISO8601DateFormatter().string(from: record.rejectedAt)
        return "#\(record.id)  \(when)  \(record.reason)  \(origin)  id=\(record.eventID ?? "-")  [\(flags.joined(separator: ","))]  \(record.message)"
    }

    /// One JSON object for `reddot dlq list --json` (sorted keys; key and payload as UTF-8 text).
    public var jsonLine: String {
        let record = self
        let formatter = ISO8601DateFormatter()
        let object: [String: Any] = [
            "id": record.id, "reason": record.reason, "message": record.message, "event_id": record.eventID ?? NSNull(),
            "topic": record.record.topic, "partition": record.record.partition, "offset": record.record.offset,
            "key": record.record.key.map { String(decoding: $0, as: UTF8.self) } ?? NSNull(),
            "payload": record.record.payload.map { String(decoding: $0, as: UTF8.self) } ?? NSNull(),
            "rejected_at": formatter.string(from: record.rejectedAt),
            "published_at": record.publishedAt.map { formatter.string(from: $0) } ?? NSNull(),
            "replayed_at": record.replayedAt.map { formatter.string(from: $0) } ?? NSNull(),
        ]
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }
}
