public import BadgeCore
public import Foundation
public import LibPQ

/// Every write of one ingest batch (DESIGN §4), in the caller's transaction: the stored Kafka
/// offsets (compare-and-set), event-id dedupe, badge operations, broadcasts and rejected
/// records; plus the pruning of old event ids. The statements are in `IngestSQL`, beside this.
///
/// Every function runs on a connection the caller leased; none opens a transaction itself.
public enum IngestTransaction {
    /// The stored next offsets of `group` for `partitions`; a partition without a stored row is
    /// absent from the answer.
    public static func storedOffsets(
        group: String, partitions: [StoredPartition], on connection: PGConnection
    ) throws(PGError) -> [StoredPartition: Int64] {
        guard !partitions.isEmpty else { return [:] }
        let result = try connection.query(
            IngestSQL.storedOffsets, [group, partitions.map(\.topic), partitions.map(\.partition)])
        var offsets: [StoredPartition: Int64] = [:]
        for row in result.rows {
            let partition = StoredPartition(
                topic: try row.decode(0, as: String.self), partition: try row.decode(1, as: Int32.self))
            offsets[partition] = try row.decode(2, as: Int64.self)
        }
        return offsets
    }

    /// Writes one batch. The caller wraps it in one transaction and rolls back if it throws.
    ///
    /// In order: (1) compare-and-set the stored offset of every partition of the batch;
    /// (2) record the accepted event ids, skipping every id applied before or earlier in this
    /// batch; (3) apply the new events' per-user mutations as one coalesced ``BadgeBatch`` and
    /// mark their users dirty; (4) store broadcasts once (set, incr: a new row; clear: withdraw
    /// the active ones at the path, with force within its subtree); (5) store every rejected
    /// record, once per topic, partition and offset; (6) with ``IngestBatchWrite/rollUp``, bring
    /// the batch's users current where no other transaction holds them (`rollUpNow`), their
    /// rollup locks taken before step 2 (`lockForRollUp`), so that step 3 leaves those who only
    /// add without a dirty mark. Each step is one or two statements over arrays, whatever the
    /// batch size.
    ///
    /// - Throws: ``OffsetConflict`` before any other write when a stored offset is not the
    ///   expected one (another consumer owns the partition: roll back, give it up); `PGError`
    ///   from the database (retry the whole batch when `isRetriable`).
    public static func commit(_ batch: IngestBatchWrite, on connection: PGConnection) throws -> BatchOutcome {
        try advanceOffsets(batch.offsets, group: batch.group, on: connection)

        var outcome = BatchOutcome()
        for rejected in batch.rejected {
            outcome.rejected[rejected.rejection.reason, default: 0] += 1
        }

        let owned = batch.rollUp ? try lockForRollUp(batch.events, limit: batch.rollUpLimit, on: connection) : []
        let written = try applyEvents(batch.events, into: &outcome, newRowsFirst: batch.newRowsFirst, owned: Set(owned), on: connection)
        try insertRejected(batch.rejected, on: connection)
        if batch.rollUp { outcome.rolledUp = try rollUpNow(owned, unmarked: written.unmarked, on: connection) }
        return outcome
    }

    /// Steps 2–4 of `commit`, also used to replay dead letters: records the events' ids,
    /// skipping those applied before (counted as duplicates), applies the new ones' per-user
    /// mutations as one coalesced batch, marks their users dirty, and stores broadcasts once.
    ///
    /// With `newRowsFirst` (the default), the ids, increments and item additions go in with plain
    /// inserts inside a savepoint (``RowConflicts/fail``), as nearly every batch has only new
    /// ones; when one is stored already (a duplicate event, an increment at a time its node has,
    /// an item added before), the batch rolls back to the savepoint and is written again with
    /// merging inserts, and `outcome.rewrites` counts it. Without it, only the merging write runs.
    /// Either way, call it inside a transaction (the savepoint needs one).
    ///
    /// - Returns: the users whose badge state the events wrote (marked dirty), sorted.
    @discardableResult
    public static func applyEvents(
        _ events: [MappedOperation], into outcome: inout BatchOutcome, newRowsFirst: Bool = true,
        on connection: PGConnection
    ) throws(PGError) -> [UserID] {
        try applyEvents(events, into: &outcome, newRowsFirst: newRowsFirst, owned: [], on: connection).users
    }

    /// `applyEvents`, leaving the users of `owned` whose new rows only add without a dirty mark
    /// (`BadgeStore.applyMarked`'s `owned`): returned as `unmarked` with their deltas, for
    /// `rollUpNow`.
    static func applyEvents(
        _ events: [MappedOperation], into outcome: inout BatchOutcome, newRowsFirst: Bool, owned: Set<UserID>,
        on connection: PGConnection
    ) throws(PGError) -> (users: [UserID], unmarked: UnmarkedWrites) {
        // On Citus, a transaction that writes a reference table (a broadcast) must not have
        // touched distributed tables over several connections to a node first: Citus refuses
        // the write ("there was a parallel operation on a distributed table"). One connection
        // per node, for such a batch only.
        if events.contains(where: \.isBroadcast), try BadgeStore.citusInstalled(on: connection) {
            try connection.execute(script: "SET LOCAL citus.multi_shard_modify_mode TO 'sequential'", name: "ingest.citus_sequential")
        }
        let events = try droppingErased(events, into: &outcome, on: connection)
        guard !events.isEmpty else { return ([], UnmarkedWrites()) }
        let slot = try dedupeSlot(on: connection)
        guard newRowsFirst else {
            return try applyEvents(events, into: &outcome, conflicts: .merge, slot: slot, owned: owned, on: connection)
        }
        let start = outcome
        let (written, rewritten) = try BadgeStore.writeNewRowsFirst(on: connection) { conflicts throws(PGError) in
            var attempt = start
            let users = try applyEvents(events, into: &attempt, conflicts: conflicts, slot: slot, owned: owned, on: connection)
            return (attempt, users)
        }
        outcome = written.0
        if rewritten { outcome.rewrites += 1 }
        return written.1
    }

    /// `events` without the users erased on request (`UserData.erase`): their events are
    /// dropped, not recorded, while the mark lasts (one probe per user, of an index empty while
    /// nobody is marked), once per batch, before either write of `applyEvents`.
    private static func droppingErased(
        _ events: [MappedOperation], into outcome: inout BatchOutcome, on connection: PGConnection
    ) throws(PGError) -> [MappedOperation] {
        let erased = try UserData.erased(among: Array(Set(events.flatMap(AppliedKey.users(of:)))), on: connection)
        guard !erased.isEmpty else { return events }
        return events.compactMap { operation in
            guard case .users(let users) = operation.audience else { return operation }
            let kept = users.filter { !erased.contains($0.rawValue) }
            guard !kept.isEmpty else {
                outcome.erased += 1
                return nil
            }
            var operation = operation
            operation.audience = .users(kept)
            return operation
        }
    }

    /// The current dedupe generation's slot, held until the transaction ends
    /// (`IngestSQL.dedupeSlot`): read before any key is written or looked for, by ingest and by
    /// a user's action with an id (`BadgeStore.act`).
    static func dedupeSlot(on connection: PGConnection) throws(PGError) -> Int32 {
        guard let slot = try connection.query(IngestSQL.dedupeSlot).rows.first?.decode(0, as: Int32.self) else {
            throw PGError(code: .decoding, message: "dedupe_generation has no row (is migration 0030 applied?)", statement: IngestSQL.dedupeSlot.name)
        }
        return slot
    }

    private static func applyEvents(
        _ events: [MappedOperation], into outcome: inout BatchOutcome, conflicts: RowConflicts, slot: Int32, owned: Set<UserID>,
        on connection: PGConnection
    ) throws(PGError) -> (users: [UserID], unmarked: UnmarkedWrites) {
        // Dedupe by key (user and event id; a broadcast's id alone): a key is new once, at its
        // first record in the batch. A plain insert succeeds only when every key is; the
        // merging one sends the new keys only when some are not (see `IngestSQL.recordEvents`).
        var allFresh = false
        var fresh: Set<AppliedKey> = []
        if !events.isEmpty {
            let keys = events.flatMap(AppliedKey.keys(of:))
            (allFresh, fresh) = try BadgeStore.citusInstalled(on: connection)
                ? recordKeysByShard(keys, conflicts: conflicts, slot: slot, on: connection)
                : recordKeys(keys, conflicts: conflicts, slot: slot, with: (IngestSQL.recordNewEvents, IngestSQL.recordEvents), on: connection)
        }

        var badges = BadgeBatch()
        var broadcasts = BroadcastWrites()
        for var operation in events {
            switch operation.audience {
            case .users(let users):
                let newUsers = allFresh ? users : users.filter { fresh.remove(AppliedKey(user: $0.rawValue, eventID: operation.eventID.rawValue)) != nil }
                guard !newUsers.isEmpty else {
                    outcome.duplicates += 1
                    continue
                }
                operation.audience = .users(newUsers)
                badges.append(contentsOf: operation.mutations())
            case .everyone:
                guard allFresh || fresh.remove(AppliedKey(user: "", eventID: operation.eventID.rawValue)) != nil else {
                    outcome.duplicates += 1
                    continue
                }
                broadcasts.append(operation)
                outcome.broadcasts += 1
            }
            outcome.applied += 1
        }

        var users: [UserID] = [], unmarked = UnmarkedWrites()
        if !badges.isEmpty {
            unmarked = try BadgeStore.applyMarked(badges, conflicts: conflicts, owned: owned, on: connection)
            users = badges.users
            outcome.users = users.count
        }
        try broadcasts.write(on: connection)
        return (users, unmarked)
    }

    /// Records `keys` with `statements` (`IngestSQL.recordNewEvents` and `recordEvents`, or their
    /// forms for one shard's users): whether every key was new and given once, else the new
    /// ones. With `.fail`, a key applied before fails it, as a key stored in the current slot
    /// would: `writeNewRowsFirst` rolls back and merges.
    private static func recordKeys(
        _ keys: [AppliedKey], conflicts: RowConflicts, slot: Int32, with statements: (fail: PGStatement, merge: PGStatement),
        on connection: PGConnection
    ) throws(PGError) -> (allFresh: Bool, fresh: Set<AppliedKey>) {
        let arrays: [any PGBindable] = [keys.map(\.user), keys.map(\.eventID), slot]
        switch conflicts {
        case .fail:
            let earlier = try connection.query(statements.fail, arrays).rows.first?.decode(0, as: Int64.self) ?? 0
            guard earlier == 0 else {
                throw PGError(
                    code: .server, sqlState: "23505", message: "\(earlier) event ids of the batch were applied in an earlier dedupe generation",
                    statement: statements.fail.name)
            }
            return (true, [])
        case .merge:
            let rows = try connection.query(statements.merge, arrays).rows
            if rows.count == 1, try rows[0].decode(1, as: String?.self) == nil { return (true, []) }
            var fresh: Set<AppliedKey> = []
            for row in rows {
                fresh.insert(AppliedKey(user: try row.decode(0, as: String.self), eventID: try row.decode(1, as: String.self)))
            }
            return (false, fresh)
        }
    }

    /// `applyEvents`' dedupe where Citus distributes the users' tables (docs/SHARDING.md, rule
    /// 10): the broadcasts' ids in a statement of their own, the users' keys a shard of users a
    /// statement. Whether every key was new and given once, and otherwise the new ones, as
    /// `IngestSQL.recordEvents` tells; with `.fail`, a key applied before fails it as there.
    private static func recordKeysByShard(
        _ keys: [AppliedKey], conflicts: RowConflicts, slot: Int32, on connection: PGConnection
    ) throws(PGError) -> (allFresh: Bool, fresh: Set<AppliedKey>) {
        var allFresh = true
        var fresh: Set<AppliedKey> = []
        let broadcasts = keys.filter { $0.user.isEmpty }.map(\.eventID)
        if !broadcasts.isEmpty {
            let stored = try connection.query(IngestSQL.recordBroadcastEvents, [broadcasts]).rows
            let new = try Set(stored.map { row throws(PGError) in try row.decode(0, as: String.self) })
            if conflicts == .fail, new.count < broadcasts.count {
                throw PGError(
                    code: .server, sqlState: "23505", message: "\(broadcasts.count - new.count) broadcast ids of the batch were applied before",
                    statement: IngestSQL.recordNewEvents.name)
            }
            allFresh = new.count == broadcasts.count
            fresh.formUnion(new.map { AppliedKey(user: "", eventID: $0) })
        }
        let users = keys.filter { !$0.user.isEmpty }
        for group in try BadgeStore.usersByShard(Array(Set(users.map(\.user))), on: connection) {
            let members = Set(group)
            let part = users.filter { members.contains($0.user) }
            let recorded = try recordKeys(
                part, conflicts: conflicts, slot: slot, with: (IngestSQL.recordNewUserEventsOfShard, IngestSQL.recordUserEventsOfShard),
                on: connection)
            allFresh = allFresh && recorded.allFresh
            fresh.formUnion(recorded.allFresh ? Set(part) : recorded.fresh)
        }
        // As the shipped statements say it: "all fresh" leaves `fresh` unused.
        return (allFresh, allFresh ? [] : fresh)
    }

    /// The most users a batch brings current itself (`rollUpNow`) unless it is given another
    /// limit (`IngestBatchWrite.rollUpLimit`), and the least `rollUpLimit(writers:on:)` gives;
    /// the rest wait for the rollup. Each user's rollup lock is an entry of PostgreSQL's shared
    /// lock table, which holds about `max_locks_per_transaction` × `max_connections` entries for
    /// the whole server (6,400 by default): two writers with 5,000 users each would run it out
    /// ("out of shared memory"). A rollup round holds 500 (`--rollup-batch-size`).
    public static let rollUpLimit = 1_000

    /// The most users one batch of each of `writers` writers may bring current itself, from the
    /// server's lock table (`max_locks_per_transaction` × `max_connections`): a quarter of it
    /// shared among the writers, so that rollup rounds, other ingest processes and every
    /// transaction's own locks keep the rest; never fewer than `rollUpLimit` (which the server's
    /// defaults hold with room to spare), nor more than 100,000. A server with
    /// `max_locks_per_transaction` raised lets batches of spread users bring more of them current
    /// (at 10,000 events/s over 100,000 users, a batch of 5,000 records has about 4,900).
    public static func rollUpLimit(writers: Int, on connection: PGConnection) throws(PGError) -> Int {
        let slots = try connection.query(IngestSQL.lockTableEntries).rows.first?.decode(0, as: Int64.self) ?? 0
        return lockShare(slots: slots, writers: writers)
    }

    /// `rollUpLimit(writers:on:)`'s rule for a lock table of `slots` entries.
    static func lockShare(slots: Int64, writers: Int) -> Int {
        let share = max(0, slots) / 4 / Int64(max(1, writers))
        return Int(min(max(share, Int64(rollUpLimit)), 100_000))
    }

    /// The users of `events` (at most `limit`, in user order) whose rollup locks this
    /// transaction takes without waiting, held until it ends (`BadgeStore.tryLockForRollUp`):
    /// those the batch brings current itself (`rollUpNow`). A user a round or an action holds is
    /// left to the rollup, which finds the user's marks. Taken before the batch writes, so that
    /// the users who only add need no dirty mark (`BadgeStore.applyMarked`'s `owned`).
    static func lockForRollUp(_ events: [MappedOperation], limit: Int, on connection: PGConnection) throws(PGError) -> [UserID] {
        var candidates: Set<UserID> = []
        for event in events {
            if case .users(let users) = event.audience { candidates.formUnion(users) }
        }
        return try BadgeStore.tryLockForRollUp(Array(candidates.sorted().prefix(max(0, limit))), on: connection)
    }

    /// Brings `owned` (`lockForRollUp`'s) current in the batch's own transaction
    /// (`BadgeStore.rollUpOwned`), so that their new versions commit with the batch instead of
    /// waiting for a rollup round: those with marks, and `unmarked`, the ones whose writes in
    /// this batch only added and left no mark. None when a writer of the set of broadcasts
    /// holds its lock (`unmarked` then get their marks). Ingest so never waits for a rollup
    /// round or a broadcast writer while it holds anything they wait for.
    ///
    /// - Returns: how many users it brought current.
    static func rollUpNow(_ owned: [UserID], unmarked: UnmarkedWrites, on connection: PGConnection) throws(PGError) -> Int {
        let outcome = try BadgeStore.rollUpOwned(owned, unmarked: unmarked, on: connection)
        return outcome.recounted + outcome.added
    }

    /// Step 1 of `commit`: one statement for every partition, then the first lost one, if any.
    static func advanceOffsets(_ advances: [OffsetAdvance], group: String, on connection: PGConnection) throws {
        guard !advances.isEmpty else { return }
        let sorted = advances.sorted { $0.partition < $1.partition }  // one lock order for every writer
        let result = try connection.query(
            IngestSQL.advanceOffsets,
            [
                group, sorted.map(\.partition.topic), sorted.map(\.partition.partition), sorted.map(\.expected),
                sorted.map(\.next), sorted.map(\.waiting),
            ])
        var moved: Set<StoredPartition> = []
        for row in result.rows {
            moved.insert(StoredPartition(topic: try row.decode(0, as: String.self), partition: try row.decode(1, as: Int32.self)))
        }
        guard let lost = sorted.first(where: { !moved.contains($0.partition) }) else { return }
        let found = try storedOffsets(group: group, partitions: [lost.partition], on: connection)[lost.partition]
        throw OffsetConflict(partition: lost.partition, expected: lost.expected, found: found)
    }

    /// Step 5 of `commit`.
    static func insertRejected(_ rejected: [RejectedRow], on connection: PGConnection) throws(PGError) {
        guard !rejected.isEmpty else { return }
        var topics: [String] = [], partitions: [Int32] = [], offsets: [Int64] = []
        var keys: [String?] = [], payloads: [String?] = []
        var reasons: [String] = [], messages: [String] = [], eventIDs: [String?] = []
        for entry in rejected {
            topics.append(entry.record.topic)
            partitions.append(entry.record.partition)
            offsets.append(entry.record.offset)
            keys.append(entry.record.key.map(ByteaHex.encode))
            payloads.append(entry.record.payload.map(ByteaHex.encode))
            reasons.append(entry.rejection.reason.rawValue)
            messages.append(storable(entry.rejection.message))
            eventIDs.append(entry.eventID.map(storable))
        }
        try connection.query(
            IngestSQL.insertRejected, [topics, partitions, offsets, keys, payloads, reasons, messages, eventIDs])
    }

    /// Text PostgreSQL accepts: without NUL characters.
    static func storable(_ text: String) -> String {
        guard text.utf8.contains(0) else { return text }
        return String(text.unicodeScalars.map { $0 == "\0" ? "\u{FFFD}" : Character($0) })
    }

    /// Which of `keys` were applied before (their key is in the dedupe tables). Holds the
    /// current dedupe slot first, as a write does (`dedupeSlot`): a caller that writes keys in the
    /// same transaction afterwards (a replay) then never holds the tables a rotation empties
    /// while waiting for the rotation (a deadlock).
    public static func appliedAmong(_ keys: [AppliedKey], on connection: PGConnection) throws(PGError) -> Set<AppliedKey> {
        guard !keys.isEmpty else { return [] }
        _ = try dedupeSlot(on: connection)
        func found(_ result: PGResult) throws(PGError) -> [AppliedKey] {
            try result.rows.map { row throws(PGError) in AppliedKey(user: try row.decode(0, as: String.self), eventID: try row.decode(1, as: String.self)) }
        }
        guard try BadgeStore.citusInstalled(on: connection) else {
            return Set(try found(try connection.query(IngestSQL.appliedAmong, [keys.map(\.user), keys.map(\.eventID)])))
        }
        // On Citus: broadcasts' ids in their own statement, users' keys a shard at a time.
        let broadcasts = keys.filter { $0.user.isEmpty }.map(\.eventID)
        var applied = broadcasts.isEmpty ? [] : Set(try found(try connection.query(IngestSQL.appliedBroadcastsAmong, [broadcasts])))
        let byUser = Dictionary(grouping: keys.filter { !$0.user.isEmpty }, by: \.user)
        for users in try BadgeStore.usersByShard(byUser.keys.sorted(), on: connection) {
            let shardKeys = users.flatMap { byUser[$0, default: []] }
            applied.formUnion(try found(try connection.query(IngestSQL.appliedAmongOfShard, [shardKeys.map(\.user), shardKeys.map(\.eventID), users])))
        }
        return applied
    }

    /// Starts the next dedupe generation when the current one started before `startedBefore`
    /// (now less the dedupe retention), emptying the slot it takes: that slot holds the
    /// generation before the current one, every id of it older than the retention. Its own
    /// transaction: it waits for the ingest transactions that hold the current slot, holds new
    /// ones until it commits (a few milliseconds), and gives up after `lockTimeout` (a long
    /// transaction reading the ids; the next prune tries again).
    ///
    /// - Returns: whether it started one.
    public static func rotateDedupeGeneration(
        startedBefore: Date, lockTimeout: Duration = .seconds(5), on connection: PGConnection
    ) throws(PGError) -> Bool {
        guard try connection.query(IngestSQL.generationDue, [startedBefore]).rows.first?.decode(0, as: Bool.self) == true else {
            return false
        }
        let milliseconds = max(1, min(lockTimeout.components.seconds, 3_600)) * 1_000
        do {
            return try connection.withTransaction { connection in
                try connection.execute(script: "SET LOCAL lock_timeout = '\(milliseconds)ms'", name: "ingest.rotation_lock_timeout")
                try connection.execute(script: IngestSQL.fenceWriters, name: "ingest.fence_writers")
                guard let slot = try connection.query(IngestSQL.rotateGeneration, [startedBefore]).rows.first?.decode(0, as: Int32.self) else {
                    return false
                }
                try connection.execute(script: IngestSQL.emptySlot(slot), name: "ingest.empty_slot")
                return true
            }
        } catch let error as PGError {
            throw error
        } catch {
            throw PGError(code: .client, message: "starting a dedupe generation failed: \(error)", statement: IngestSQL.rotateGeneration.name)
        }
    }

    /// How long ago, in seconds, the current dedupe generation started (by the database's clock).
    public static func dedupeGenerationAge(on connection: PGConnection) throws(PGError) -> Double {
        try connection.query(IngestSQL.generationAge).rows.first?.decode(0, as: Double.self) ?? 0
    }

    /// Deletes the applied event ids recorded before `olderThan`, and the clients' action ids,
    /// item tombstones and clear marks of the same age, `limit` rows per statement (each its own transaction unless
    /// the caller opened one), skipping rows another transaction holds; then folds the
    /// increments stored before `olderThan` into their states (`BadgeStore.foldIncrements`, in
    /// transactions of its own, about `limit` increments each).
    ///
    /// Users' event ids are not counted: they go a generation at a time
    /// (`rotateDedupeGeneration`), which the caller runs once per prune.
    ///
    /// - Returns: how many rows were deleted or folded.
    public static func pruneAppliedEvents(olderThan: Date, limit: Int, on connection: PGConnection) throws(PGError) -> Int {
        guard limit > 0 else { return 0 }
        var total = 0
        // The broadcasts' ids (one small table, a reference table under Citus), then the users'
        // tables, each part by part (`PerUserPrune`).
        while true {
            let deleted = try connection.query(IngestSQL.pruneAppliedEvents, [olderThan, limit]).affectedRows
            total += deleted
            if deleted < limit { break }
        }
        for prune in [
            IngestSQL.pruneAppliedUserEvents, UserDataSQL.pruneMarks, IngestSQL.pruneAppliedActions, IngestSQL.pruneGoneItems, IngestSQL.pruneClearMarks,
        ] {
            total += try prune.run(before: olderThan, limit: limit, on: connection)
        }
        total += try BadgeStore.foldIncrements(storedBefore: olderThan, limit: limit, on: connection).increments
        return total
    }
}

extension MappedOperation {
    /// Whether the operation is for every user (a broadcast).
    var isBroadcast: Bool {
        if case .everyone = audience { true } else { false }
    }
}
