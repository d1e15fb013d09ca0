public import BadgeCore

/// A record that cannot be applied: the record itself, the reason, and its event id when one could
/// be read. Stored in `rejected_record` in the batch's transaction, then published to the
/// dead-letter topic.
public struct RejectedRecord: Sendable, Hashable {
    /// The record, bytes unchanged.
    public var record: IngestRecord
    /// Why it was rejected.
    public var rejection: EventRejection
    /// The event's `id`, when the record has a readable, valid one (``IntakeRejection/eventID``;
    /// none for a record that repeats a key).
    public var eventID: String?

    /// Creates a rejected record.
    public init(record: IngestRecord, rejection: EventRejection, eventID: String?) {
        self.record = record
        self.rejection = rejection
        self.eventID = eventID
    }
}
