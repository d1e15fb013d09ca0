public import Foundation
import LibPQ

/// A dead letter as stored in `rejected_record`, waiting to be published.
public struct StoredRejection: Sendable, Hashable {
    /// Decodes the columns `id, topic, partition, record_offset, record_key, payload, reason,
    /// message, event_id, rejected_at[, published_at, replayed_at]`.
    init(row: PGRow, statement: String) throws(PGError) {
        func bytes(_ column: Int) throws(PGError) -> [UInt8]? {
            guard let text = try row.decode(column, as: String?.self) else { return nil }
            guard let bytes = ByteaHex.decode(text) else {
                throw PGError(code: .decoding, message: "column \(column) is not bytea in hex form", statement: statement)
            }
            return bytes
        }
        let record = StoredRecord(
            topic: try row.decode(1, as: String.self), partition: try row.decode(2, as: Int32.self),
            offset: try row.decode(3, as: Int64.self), key: try bytes(4), payload: try bytes(5))
        self.init(
            id: try row.decode(0, as: Int64.self), record: record, reason: try row.decode(6, as: String.self),
            message: try row.decode(7, as: String.self), eventID: try row.decode(8, as: String?.self),
            rejectedAt: try row.decode(9, as: Date.self),
            publishedAt: row.values.count > 10 ? try row.decode(10, as: Date?.self) : nil,
            replayedAt: row.values.count > 11 ? try row.decode(11, as: Date?.self) : nil)
    }

    /// The row id (for ``DeadLetterStore/markPublished(ids:on:)``).
    public var id: Int64
    /// The original record, bytes unchanged.
    public var record: StoredRecord
    /// The ``RejectionReason`` raw value (`malformed_json`, …).
    public var reason: String
    /// The rejection message.
    public var message: String
    /// The event id, when the record had a readable one.
    public var eventID: String?
    /// When it was stored.
    public var rejectedAt: Date
    /// When it was sent to the dead-letter topic (nil: not yet).
    public var publishedAt: Date?
    /// When `reddot dlq replay` applied it (nil: not replayed).
    public var replayedAt: Date?

    /// Creates a stored rejection.
    public init(
        id: Int64, record: StoredRecord, reason: String, message: String, eventID: String?, rejectedAt: Date,
        publishedAt: Date? = nil, replayedAt: Date? = nil
    ) {
        self.id = id
        self.record = record
        self.reason = reason
        self.message = message
        self.eventID = eventID
        self.rejectedAt = rejectedAt
        self.publishedAt = publishedAt
        self.replayedAt = replayedAt
    }
}
