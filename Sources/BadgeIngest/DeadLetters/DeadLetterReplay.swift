public import BadgeCore
public import BadgeStore
public import LibPQ

/// `reddot dlq replay`: the rejected records kept in `rejected_record` (`DeadLetterStore`, which
/// also lists them), applied again once their cause is fixed (a rule added, a bug fixed in a
/// producer's mapping).
public enum DeadLetterReplay {
    /// Replays the matching records not replayed yet, in the caller's transaction: each is decoded
    /// and mapped again with `rules`, as ingest would now. A record that passes is applied exactly
    /// once (its event id is deduplicated like any other: one applied since counts as done) and
    /// marked replayed; it stays in the table. One that still fails is left as it is.
    ///
    /// Rows are locked (`FOR UPDATE SKIP LOCKED`), so two replays never apply a record twice.
    public static func replay(_ filter: DeadLetterFilter, rules: RuleSet, on connection: PGConnection) throws -> ReplayOutcome {
        let stored = try DeadLetterStore.lockForReplay(filter, on: connection)
        var outcome = ReplayOutcome()
        guard !stored.isEmpty else { return outcome }
        var idByOrigin: [TopicPartition: [Int64: Int64]] = [:]
        for rejection in stored {
            idByOrigin[TopicPartition(topic: rejection.record.topic, partition: rejection.record.partition), default: [:]][rejection.record.offset] =
                rejection.id
        }
        func id(of topic: String, _ partition: Int32, _ offset: Int64) -> Int64? {
            idByOrigin[TopicPartition(topic: topic, partition: partition)]?[offset]
        }
        let prepared = PreparedBatch(records: stored.map { IngestRecord($0.record) }, rules: rules)
        for rejected in prepared.rejected {
            if let id = id(of: rejected.record.topic, rejected.record.partition, rejected.record.offset) {
                outcome.stillRejected.append((id, rejected.rejection))
            }
        }
        let appliedBefore = try IngestTransaction.appliedAmong(prepared.accepted.flatMap { AppliedKey.keys(of: $0.operation) }, on: connection)
        var batchOutcome = BatchOutcome()
        try IngestTransaction.applyEvents(prepared.accepted.map(\.operation), into: &batchOutcome, on: connection)
        for event in prepared.accepted {
            guard let id = id(of: event.topic, event.partition, event.offset) else { continue }
            if AppliedKey.keys(of: event.operation).allSatisfy(appliedBefore.contains) {
                outcome.alreadyApplied.append(id)
            } else {
                outcome.replayed.append(id)
            }
        }
        try DeadLetterStore.markReplayed(ids: outcome.replayed + outcome.alreadyApplied, on: connection)
        return outcome
    }
}

/// What a replay did, by rejected-record id.
public struct ReplayOutcome: Sendable {
    /// Applied now.
    public var replayed: [Int64] = []
    /// Their event had been applied since to each of its users (by a re-sent event): nothing
    /// applied, marked replayed.
    public var alreadyApplied: [Int64] = []
    /// Still not applicable, with today's reason; left as they were.
    public var stillRejected: [(id: Int64, rejection: EventRejection)] = []

    /// An empty outcome.
    public init() {}
}
