public import BadgeCore
public import Foundation
public import LibPQ

extension BadgeStore {
    /// Applies a coalesced batch: forced clears first, then every node's net write, each kind as
    /// one statement over arrays; then the batch's clears dismiss, and its seens mark seen, for
    /// their users, the active broadcasts they reach; then its mutes and unmutes are stored. Does not mark users dirty: call `markDirty` for the batch's users
    /// first, in the same transaction, which takes the write number every row is stamped with
    /// (see `BadgeSQL.writeNumber(of:)`; without it the write fails).
    ///
    /// - Parameter conflicts: what the batch's increments and item additions do when their row is
    ///   stored already (``RowConflicts``); `.fail` is for a caller that writes again with
    ///   `.merge` after rolling back to a savepoint.
    /// - Returns: the own-state and mute rows written or deleted, and the users who dismissed or saw a
    ///   broadcast (pass them as `bumping` to `markDirty` or `recomputeAggregates`: their view
    ///   changed though no aggregate did).
    @discardableResult
    ///
    /// Where Citus distributes the tables, the batch is written a shard of users at a time, as
    /// `applyMarked` writes it.
    public static func apply(
        _ batch: BadgeBatch, conflicts: RowConflicts = .merge, on connection: PGConnection
    ) throws(PGError) -> BadgeApplyOutcome {
        guard try citusInstalled(on: connection) else { return try apply(batch, conflicts: conflicts, holding: [], on: connection) }
        var outcome = BadgeApplyOutcome()
        for group in try usersByShard(batch.users.map(\.rawValue), on: connection) {
            let users = Set(group.compactMap { try? UserID(validating: $0) })
            let part = try apply(batch.restricted(to: users), conflicts: conflicts, holding: [], shard: true, on: connection)
            outcome.touchedRows += part.touchedRows
            outcome.viewChangedUsers += part.viewChangedUsers
            outcome.held.append(contentsOf: part.held)
        }
        outcome.viewChangedUsers.sort()
        return outcome
    }

    /// `apply`, holding the deltas of the users of `holding` (with `.fail`) in the outcome
    /// instead of storing them (``HeldDeltas``), and giving the users of `marking` (with
    /// `.fail`; `markDirty` left them unmarked for this) the dirty mark that carries their
    /// deltas (`BadgeSQL.addIncrements`' `$7`).
    static func apply(
        _ batch: BadgeBatch, conflicts: RowConflicts, holding: [UserID], marking: [UserID] = [], shard: Bool = false,
        on connection: PGConnection
    ) throws(PGError) -> BadgeApplyOutcome {
        var outcome = BadgeApplyOutcome()
        outcome.touchedRows = try applyOwnState(
            batch, conflicts: conflicts, holding: holding, marking: marking, shard: shard, into: &outcome.held, on: connection)
        var users: Set<UserID> = []
        let dismissals = batch.dismissals
        if !dismissals.isEmpty {
            let result = try connection.query(
                BadgeSQL.dismissBroadcasts.form(shard),
                [
                    dismissals.map(\.user.rawValue), dismissals.map(\.path.rawValue), dismissals.map(\.force), dismissals.map(\.time),
                    dismissals.map { _ in Int64?.none },
                ])
            users.formUnion(returnedUsers(result))
        }
        let seens = batch.broadcastSeens
        if !seens.isEmpty {
            let result = try connection.query(
                BadgeSQL.seeBroadcasts.form(shard),
                [
                    seens.map(\.user.rawValue), seens.map(\.path.rawValue), seens.map { _ in true }, seens.map(\.time),
                    seens.map { _ in Int64?.none },
                ])
            users.formUnion(returnedUsers(result))
        }
        let mutes = batch.mutes
        if !mutes.isEmpty {
            outcome.touchedRows += try connection.query(
                BadgeSQL.storeMutes.form(shard),
                [
                    mutes.map(\.user.rawValue), mutes.map(\.path.rawValue), mutes.map(\.mute.muted), mutes.map(\.mute.until),
                    mutes.map(\.mute.occurredAt),
                ]
            ).affectedRows
        }
        outcome.viewChangedUsers = users.sorted()
        return outcome
    }

    /// The valid user ids of the first column of `result`.
    private static func returnedUsers(_ result: PGResult) -> [UserID] {
        result.rows.compactMap { row in (try? row.decode(0, as: String.self)).flatMap { try? UserID(validating: $0) } }
    }

    /// The batch's own-state writes, in the order ``BadgeTree/apply(_:for:now:)`` models: the
    /// clears' counter part (on the states that reach increments, `carryIncrements`), the seens
    /// (marks, then counters), the sets, the increments and decrements; then the clear marks, the
    /// item removals and the item additions.
    private static func applyOwnState(
        _ batch: BadgeBatch, conflicts: RowConflicts, holding: [UserID], marking: [UserID], shard: Bool, into held: inout HeldDeltas,
        on connection: PGConnection
    ) throws(PGError) -> Int {
        var touched = 0
        let marks = batch.clearMarks
        if !marks.isEmpty {
            let users = marks.map(\.user.rawValue), paths = marks.map(\.path.rawValue), subtrees = marks.map(\.subtree)
            try connection.query(BadgeSQL.carryIncrements.form(shard), [users, paths, subtrees])
            let result = try connection.query(BadgeSQL.clearCounters.form(shard), [users, paths, marks.map(\.through), subtrees])
            touched += Int(clamping: try result.rows.first?.decode(0, as: Int64.self) ?? 0)
        }
        let seens = batch.seens
        if !seens.isEmpty {
            let users = seens.map(\.user.rawValue), paths = seens.map(\.path.rawValue), times = seens.map(\.through)
            touched += try connection.query(BadgeSQL.markSeen.form(shard), [users, paths, times]).affectedRows
            touched += try connection.query(BadgeSQL.markCountersSeen.form(shard), [users, paths, times]).affectedRows
        }
        let sets = batch.sets
        if !sets.isEmpty {
            touched += try connection.query(
                BadgeSQL.set.form(shard),
                [
                    sets.map(\.user.rawValue), sets.map(\.path.rawValue), sets.map(\.set.count), sets.map(\.set.icon?.rawValue),
                    sets.map(\.set.expiresAt), sets.map(\.set.at),
                ]
            ).affectedRows
        }
        touched += try addIncrements(batch.increments, conflicts: conflicts, holding: holding, marking: marking, shard: shard, into: &held, on: connection)
        if !marks.isEmpty {
            touched += try connection.query(
                BadgeSQL.markCleared.form(shard),
                [marks.map(\.user.rawValue), marks.map(\.path.rawValue), marks.map(\.subtree), marks.map(\.through)]
            ).affectedRows
        }
        let removals = batch.itemRemovals
        if !removals.isEmpty {
            touched += try connection.query(
                BadgeSQL.removeItems.form(shard),
                [removals.map(\.user.rawValue), removals.map(\.path.rawValue), removals.map(\.item.rawValue)]
            ).affectedRows
        }
        let additions = batch.itemAdditions
        if !additions.isEmpty {
            touched += try connection.query(
                BadgeSQL.addItems(conflicts).form(shard),
                [
                    additions.map(\.user.rawValue), additions.map(\.path.rawValue), additions.map(\.item.rawValue),
                    additions.map(\.occurredAt),
                ]
            ).affectedRows
        }
        return touched
    }

    /// Adds a batch's increments and decrements; those of nodes whose state has expired go in a second step,
    /// after the expired states (and their increments) are dropped. With `.fail`, the deltas of
    /// the users of `holding` go to `held` instead of `badge_delta`, and those of `marking` on
    /// the dirty mark the first step gives each of them (the second step's users have one that
    /// asks for a recount already: their state had expired).
    private static func addIncrements(
        _ increments: [(user: UserID, path: BadgePath, occurredAt: Date, by: Int64, expiresAt: Date?)],
        conflicts: RowConflicts, holding: [UserID], marking: [UserID], shard: Bool, into held: inout HeldDeltas, on connection: PGConnection
    ) throws(PGError) -> Int {
        guard !increments.isEmpty else {
            // No increment left to carry (a batch's clears covered them): plain marks.
            if conflicts == .fail, !marking.isEmpty { try connection.query(BadgeSQL.markWritten.form(shard), [marking.map(\.rawValue).sorted()]) }
            return 0
        }
        var users: [String] = [], paths: [String] = [], times: [Date] = [], amounts: [Int64] = [], expiries: [Date?] = []
        users.reserveCapacity(increments.count)
        paths.reserveCapacity(increments.count)
        times.reserveCapacity(increments.count)
        amounts.reserveCapacity(increments.count)
        expiries.reserveCapacity(increments.count)
        for increment in increments {
            users.append(increment.user.rawValue)
            paths.append(increment.path.rawValue)
            times.append(increment.occurredAt)
            amounts.append(increment.by)
            expiries.append(increment.expiresAt)
        }
        // The expired nodes (no amount), then the held deltas.
        func add(_ arrays: [any PGBindable], marking: [UserID]) throws(PGError) -> [String: Set<String>] {
            var nodes: [String: Set<String>] = [:]
            let holders: [any PGBindable] = conflicts == .fail ? [holding.map(\.rawValue), marking.map(\.rawValue)] : []
            for row in try connection.query(BadgeSQL.addIncrements(conflicts).form(shard), arrays + holders).rows {
                let user = try row.decode(0, as: String.self)
                if try row.decode(2, as: Int64?.self) == nil {
                    nodes[user, default: []].insert(try row.decode(1, as: String.self))
                } else {
                    try held.append(user: user, from: row)
                }
            }
            return nodes
        }
        let nodes = try add([users, paths, times, amounts, expiries], marking: marking)
        guard !nodes.isEmpty else { return increments.count }
        let again = increments.filter { nodes[$0.user.rawValue]?.contains($0.path.rawValue) == true }
        try connection.query(BadgeSQL.dropExpiredStates.form(shard), [again.map(\.user.rawValue), again.map(\.path.rawValue)])
        _ = try add(
            [again.map(\.user.rawValue), again.map(\.path.rawValue), again.map(\.occurredAt), again.map(\.by), again.map(\.expiresAt)],
            marking: [])
        return increments.count
    }

    /// Marks users dirty so a rollup worker recomputes them: takes each user's next write number
    /// (held until the transaction ends; what the transaction writes afterwards is stamped with
    /// it) and leaves a mark with it. Users in `bumping` get a new version at their rollup even
    /// if no aggregate changes. The rollup recounts a user's tree unless every writer since
    /// their last round named them in `additive` (only increments changed, recorded as deltas by
    /// `apply` with `.fail`; see ``BadgeBatch/additiveUsers``). Never waits for a rollup round;
    /// waits for another writer of the same users.
    ///
    /// A user of `unmarked` who is also `additive` and not bumped gets a write number and no
    /// mark: the caller holds their rollup lock and rolls them up in the same transaction
    /// (`rollUp(_:unmarked:)`), which covers the write by its number. A write the increments'
    /// statement finds needs a recount (a timed state) leaves a mark that asks for one.
    public static func markDirty(
        _ users: [UserID], bumping: [UserID] = [], additive: [UserID] = [], unmarked: Set<UserID> = [], on connection: PGConnection
    ) throws(PGError) {
        try markDirty(users, bumping: bumping, additive: additive, unmarked: unmarked, markedLater: [], shard: false, on: connection)
    }

    /// `markDirty`, leaving also the additive users of `markedLater` unmarked: the increments'
    /// statement gives each the mark that carries their deltas (`apply`'s `marking`).
    static func markDirty(
        _ users: [UserID], bumping: [UserID], additive: [UserID], unmarked: Set<UserID>, markedLater: Set<UserID>, shard: Bool,
        on connection: PGConnection
    ) throws(PGError) {
        guard !users.isEmpty || !bumping.isEmpty else { return }
        // One lock order for every writer: sorted (by UTF-8 bytes) and unique. Ingest passes its
        // batch's users already so, and nothing to bump.
        let alreadySorted = bumping.isEmpty && zip(users, users.dropFirst()).allSatisfy { $0 < $1 }
        let sorted = alreadySorted ? users : Set(users).union(bumping).sorted()
        let bumped = Set(bumping), added = Set(additive)
        let recount = sorted.map { !added.contains($0) || bumped.contains($0) }
        let mark = zip(sorted, recount).map { user, recount in recount || !(unmarked.contains(user) || markedLater.contains(user)) }
        try connection.query(BadgeSQL.markDirty.form(shard), [sorted.map(\.rawValue), sorted.map { bumped.contains($0) }, recount, mark])
    }

    /// Takes the users' rollup locks (`BadgeSQL.lockUsers`) for a writer that rolls them up
    /// itself: before it takes their write numbers, so that while it waits for a rollup round of
    /// the same users it holds nothing an ingest transaction needs.
    static func lockForRecount(_ users: [UserID], on connection: PGConnection) throws(PGError) {
        guard !users.isEmpty else { return }
        try connection.query(BadgeSQL.lockUsers, [Set(users).sorted().map(\.rawValue)])
    }

    /// Takes each user's next write number without leaving a dirty mark, for a writer that rolls
    /// the users up itself in the same transaction (`applyAndRecompute`, an action).
    static func takeWriteNumbers(_ users: [UserID], on connection: PGConnection) throws(PGError) {
        guard !users.isEmpty else { return }
        try connection.query(BadgeSQL.takeWriteNumbers, [Set(users).sorted().map(\.rawValue)])
    }

    /// Applies `batch` as ingest does, in the caller's transaction: marks its users dirty first
    /// (taking the write numbers its rows are stamped with), applies it, and marks the users who
    /// dismissed a broadcast for a new version. With `.fail`, the users whose batch only adds
    /// (``BadgeBatch/additiveUsers``) get their deltas added by the rollup instead of a recount;
    /// a merging write recounts (a merged increment's row is not new, so it records no delta).
    ///
    /// With `.fail`, the additive users of `owned` (whose rollup locks the caller holds) are left
    /// without a mark (`markDirty`'s `unmarked`), and their deltas are held in the answer
    /// (``HeldDeltas``) instead of stored: pass it to `rollUpOwned(_:unmarked:)` in the same
    /// transaction, or their write is never rolled up.
    ///
    /// - Returns: the users left without a mark, and their deltas.
    @discardableResult
    ///
    /// Where Citus distributes the tables (`citusInstalled`), the batch is written a shard of
    /// users at a time (`usersByShard`, `BadgeBatch.restricted(to:)`), each part with the
    /// statements' forms for one shard (docs/SHARDING.md, rule 10), all in the caller's
    /// transaction.
    public static func applyMarked(
        _ batch: BadgeBatch, conflicts: RowConflicts, owned: Set<UserID> = [], on connection: PGConnection
    ) throws(PGError) -> UnmarkedWrites {
        guard try citusInstalled(on: connection) else { return try applyMarked(batch, conflicts: conflicts, owned: owned, shard: false, on: connection) }
        var unmarked = UnmarkedWrites()
        for group in try usersByShard(batch.users.map(\.rawValue), on: connection) {
            let users = Set(group.compactMap { try? UserID(validating: $0) })
            let part = try applyMarked(batch.restricted(to: users), conflicts: conflicts, owned: owned, shard: true, on: connection)
            unmarked.users += part.users
            unmarked.deltas.append(contentsOf: part.deltas)
        }
        return unmarked
    }

    /// `applyMarked` with the statements' forms for one Citus shard when `shard` is set.
    private static func applyMarked(
        _ batch: BadgeBatch, conflicts: RowConflicts, owned: Set<UserID>, shard: Bool, on connection: PGConnection
    ) throws(PGError) -> UnmarkedWrites {
        let additive = conflicts == .fail ? batch.additiveUsers : []
        var unmarked = UnmarkedWrites()
        unmarked.users = owned.isEmpty ? [] : additive.filter(owned.contains)
        // The other additive users' marks carry their deltas: the increments' statement leaves
        // them (`addIncrements` marks them plainly should it not run).
        let held = Set(unmarked.users)
        let marking = additive.filter { !held.contains($0) }
        try markDirty(batch.users, bumping: [], additive: additive, unmarked: held, markedLater: Set(marking), shard: shard, on: connection)
        let applied = try apply(batch, conflicts: conflicts, holding: unmarked.users, marking: marking, shard: shard, on: connection)
        unmarked.deltas = applied.held
        try markDirty([], bumping: applied.viewChangedUsers, additive: [], unmarked: [], markedLater: [], shard: shard, on: connection)
        return unmarked
    }

    /// Runs `write` with `.fail` inside a savepoint, and when a key it writes is stored already
    /// (``RowConflicts/isStoredKey(_:)``), rolls back to the savepoint and runs it again with
    /// `.merge`. Call it inside a transaction. One savepoint per transaction keeps far below
    /// PostgreSQL's cache of 64 subtransactions.
    ///
    /// - Returns: what the write that stayed returned, and whether it was the second.
    public static func writeNewRowsFirst<Value>(
        on connection: PGConnection, _ write: (RowConflicts) throws(PGError) -> Value
    ) throws(PGError) -> (value: Value, rewritten: Bool) {
        try connection.execute(script: "SAVEPOINT new_rows", name: "ingest.savepoint")
        do {
            let value = try write(.fail)
            try connection.execute(script: "RELEASE SAVEPOINT new_rows", name: "ingest.release_savepoint")
            return (value, false)
        } catch where RowConflicts.isStoredKey(error) {
            try connection.execute(
                script: "ROLLBACK TO SAVEPOINT new_rows; RELEASE SAVEPOINT new_rows", name: "ingest.rollback_to_savepoint")
        }
        return (try write(.merge), true)
    }

    /// Takes, until the transaction ends, the lock that orders changes of the set of active
    /// broadcasts before every recompute (DESIGN §6a). Take it before writing broadcast rows:
    /// they are stamped with the broadcast version the transaction will make.
    public static func lockBroadcastsExclusive(on connection: PGConnection) throws(PGError) {
        try connection.query(BadgeSQL.lockBroadcastsExclusive)
    }

    /// Bumps the version of the set of active broadcasts (every user's visible version moves),
    /// logs what it added and withdrew (`broadcast_change`), and notifies `changeChannel` with
    /// `{"broadcast_version": …}`. Takes `lockBroadcastsExclusive` if the caller has not.
    ///
    /// - Returns: the new broadcast version.
    @discardableResult
    public static func bumpBroadcastVersion(on connection: PGConnection) throws(PGError) -> Int64 {
        try lockBroadcastsExclusive(on: connection)
        let result = try connection.query(BadgeSQL.bumpBroadcastVersion, [changeChannel])
        guard let row = result.rows.first else {
            throw PGError(code: .decoding, message: "broadcast_version has no row (is migration 0002 applied?)", statement: "badges.bump_broadcast_version")
        }
        return try row.decode(0, as: Int64.self)
    }

    /// Applies `mutations` in one transaction (coalesced in order), marks their users dirty (first,
    /// see `apply(_:on:)`), and, with `recomputeNow`, recomputes those users' aggregates in the same
    /// transaction so that a read right after sees the change (the rollup finds nothing left).
    ///
    /// - Returns: the new version of every user whose visible tree changed (only with `recomputeNow`).
    @discardableResult
    public func apply(_ mutations: [BadgeMutation], recomputeNow: Bool) async throws -> [UserID: Int64] {
        var batch = BadgeBatch()
        for mutation in mutations { batch.append(mutation) }
        let finalBatch = batch
        return try await PGRetryPolicy().run(logger: pool.logger) {
            try await pool.withTransaction { connection in
                if recomputeNow { return try Self.applyAndRecompute(finalBatch, on: connection) }
                try Self.markDirty(finalBatch.users, on: connection)
                let outcome = try Self.apply(finalBatch, on: connection)
                try Self.markDirty([], bumping: outcome.viewChangedUsers, on: connection)
                return [:]
            }
        }
    }
}

extension BadgeStore {
    /// Applies `batch` and recounts its users in the same transaction (users who dismissed a
    /// broadcast get a new version even if no aggregate moves).
    ///
    /// - Returns: the new version of every user that changed.
    static func applyAndRecompute(_ batch: BadgeBatch, on connection: PGConnection) throws(PGError) -> [UserID: Int64] {
        try lockForRecount(batch.users, on: connection)
        try takeWriteNumbers(batch.users, on: connection)
        let outcome = try apply(batch, on: connection)
        return try recomputeAggregates(for: batch.users, bumping: outcome.viewChangedUsers, recountAll: true, on: connection)
    }
}

/// What a clear or a seen over the API did.
public enum ActionOutcome: Sendable, Hashable {
    /// Applied: the user's new visible version, or nil when nothing visible changed.
    case applied(Int64?)
    /// Nothing was done: the version the client sent is later than any the user's tree has had.
    /// `current`: the visible version now.
    case changedSince(current: Int64)
    /// Nothing was done: an action with the same id was applied before (a client's retry, or
    /// the replay of a tap it queued offline).
    case repeated
}

extension BadgeStore {
    /// Applies a user's action (a clear, or a seen) to their node at `path` and recomputes the
    /// user at once (DESIGN §2).
    ///
    /// With `seenVersion`, the version of the tree the client showed, nothing it did not show is
    /// cleared or marked seen: a clear or a seen takes what could show in that version (the
    /// rows' first versions, `BadgeTree.clearShown` and `markShownSeen`) and leaves what arrived
    /// after it, with its count and unseen. A version later than the user's tree ever had is
    /// `.changedSince`.
    ///
    /// With `actionID`, an action applied once is not applied again (`.repeated`): the id is
    /// recorded with the action in the current dedupe generation, and kept as long as users'
    /// event ids (between one and two retentions). An action that did nothing (`.changedSince`)
    /// records no id.
    ///
    /// The transaction takes the user's rollup lock (waiting for a round that holds the user),
    /// then the user's write number: an ingest transaction for this user waits for the rest of
    /// this one (short: the recount is of one user), never for a rollup round, and what it
    /// writes shows first in a later version.
    public func act(
        _ operation: BadgeOperation, at path: BadgePath, for user: UserID, seenVersion: Int64?, actionID: ActionID? = nil
    ) async throws -> ActionOutcome {
        // Timed when the request came, not when the user's lock was had: what occurred while it
        // waited (for a rollup round that holds the user) stays.
        var batch = BadgeBatch()
        batch.append(BadgeMutation(user: user, path: path, operation: operation))
        let timed = batch
        return try await PGRetryPolicy().run(logger: pool.logger) {
            try await pool.withTransaction { connection throws(PGError) -> ActionOutcome in
                // The user's lock orders the user's actions, so the id's check and its record
                // (with the action, or not at all) see no other action of the user in between.
                try Self.lockForRecount([user], on: connection)
                var slot: Int32 = 0
                if let actionID {
                    // The slot first, held to the end (`IngestTransaction.dedupeSlot`): a rotation
                    // waits for this action, or this action for it.
                    slot = try IngestTransaction.dedupeSlot(on: connection)
                    guard try connection.query(BadgeSQL.actionApplied, [user.rawValue, actionID.rawValue]).rows.isEmpty else {
                        return .repeated
                    }
                }
                let outcome = try Self.act(operation, timed, at: path, for: user, seenVersion: seenVersion, on: connection)
                if let actionID, case .applied = outcome {
                    try connection.query(BadgeSQL.recordAction, [user.rawValue, actionID.rawValue, slot])
                }
                return outcome
            }
        }
    }

    /// The action of ``act(_:at:for:seenVersion:actionID:)`` (`operation`, as `batch`) in the
    /// caller's transaction, which holds the user's rollup lock.
    private static func act(
        _ operation: BadgeOperation, _ batch: BadgeBatch, at path: BadgePath, for user: UserID, seenVersion: Int64?,
        on connection: PGConnection
    ) throws(PGError) -> ActionOutcome {
        guard let seenVersion else {
            return try visibleOutcome(applyAndRecompute(batch, on: connection)[user], for: user, on: connection)
        }
        try takeWriteNumbers([user], on: connection)
        let pending = try connection.query(BadgeSQL.hasPendingWrites, [user.rawValue]).rows.first?.decode(0, as: Bool.self) ?? true
        let versions = try connection.query(BadgeSQL.versions, [user.rawValue]).rows.first
        let own = try versions?.decode(0, as: Int64.self) ?? 0
        let broadcasts = try versions?.decode(1, as: Int64.self) ?? 0
        let (sum, overflow) = own.addingReportingOverflow(broadcasts)
        let current = overflow ? Int64.max : sum
        guard seenVersion <= current else { return .changedSince(current: current) }
        // What the client showed of the user's own tree: at most this version (less when
        // broadcasts moved since, which takes less).
        let (difference, below) = seenVersion.subtractingReportingOverflow(broadcasts)
        let through = below ? Int64.min : difference
        // Rows stamped with a write the rendered version covers showed in it; when it is
        // the current version and nothing waits for the rollup, every row did.
        let reach = try connection.query(BadgeSQL.writesThroughVersion, [user.rawValue, through]).rows.first?
            .decode(0, as: Int64.self) ?? 0
        let settled = !pending && through == own
        // The broadcasts the rendered version certainly showed: its broadcast part is at least
        // the rendered version less the own version now.
        let (broadcastPart, beyond) = seenVersion.subtractingReportingOverflow(own)
        let shownThrough = beyond ? Int64.min : broadcastPart
        var bumping: [UserID] = []
        // One user: on Citus, the statements' forms for one shard (their `$1`, the user).
        let citus = try citusInstalled(on: connection)
        switch operation {
        case .clear(let force):
            try connection.query(BadgeSQL.carryIncrements.form(citus), [[user.rawValue], [path.rawValue], [force]])
            try connection.query(BadgeSQL.clearShown, [user.rawValue, path.rawValue, force, reach, settled])
            let dismissed = try connection.query(
                BadgeSQL.dismissBroadcasts.form(citus), [[user.rawValue], [path.rawValue], [force], [Date?.none], [shownThrough]])
            if !dismissed.rows.isEmpty { bumping = [user] }
        case .seen:
            try connection.query(BadgeSQL.markShownSeen, [user.rawValue, path.rawValue, reach, settled])
            let seen = try connection.query(BadgeSQL.seeBroadcasts.form(citus), [[user.rawValue], [path.rawValue], [true], [Date?.none], [shownThrough]])
            if !seen.rows.isEmpty { bumping = [user] }
        case .set, .increment, .decrement, .addItem, .removeItem, .mute, .unmute:
            bumping = try apply(batch, on: connection).viewChangedUsers
        }
        let changed = try recomputeAggregates(for: [user], bumping: bumping, recountAll: true, on: connection)[user]
        return try visibleOutcome(changed, for: user, on: connection)
    }

    /// `.applied` with the user's visible version when their own version moved (`changed`).
    private static func visibleOutcome(_ changed: Int64?, for user: UserID, on connection: PGConnection) throws(PGError) -> ActionOutcome {
        guard let changed else { return .applied(nil) }
        let visible = try connection.query(BadgeSQL.visibleVersion, [user.rawValue]).rows.first?.decode(0, as: Int64.self)
        return .applied(visible ?? changed)
    }
}

extension BadgeStore {
    /// Folds the increments stored before `storedBefore` that their users' trees already show
    /// into their states' counts (`BadgeTree.foldIncrements`), until none is left, in
    /// transactions of about `limit` increments each (`FoldChunk`: a transaction takes every old
    /// increment of its users, as many users as the last one's increments per user allow; a
    /// user with more is folded alone). Each transaction first holds its users' write sequences
    /// (`BadgeSQL.holdWriteSequences`, one lock order with every writer), so no write of theirs
    /// runs meanwhile: the bound keeps those writers' waits short. It takes no write number and
    /// leaves no dirty mark: what the trees show does not change, so there is nothing for a
    /// rollup round to do (a recount of every folded user added about half the fold's own time).
    ///
    /// - Returns: what was folded, and in how many transactions.
    public static func foldIncrements(storedBefore: Date, limit: Int, on connection: PGConnection) throws(PGError) -> FoldReport {
        guard limit > 0 else { return FoldReport() }
        // Part by part (`TableParts`): where `badge_increment` is partitioned by user, each
        // statement reads one partition.
        var parts = TableParts(of: "badge_increment")
        try parts.refresh(on: connection)
        var report = FoldReport()
        var chunk = FoldChunk(target: limit)
        let citus = try citusInstalled(on: connection)
        for part in parts.inTurn {
            let candidates = TableParts.statement(BadgeSQL.foldCandidates, over: part, table: parts.table) {
                BadgeSQL.foldCandidates(in: $0)
            }
            try foldIncrements(storedBefore: storedBefore, chunk: &chunk, candidates: candidates, citus: citus, into: &report, on: connection)
        }
        return report
    }

    /// `foldIncrements` for the users `candidates` finds, `chunk.users` at a time.
    ///
    /// With `citus` (the tables are distributed), a chunk's users are folded a shard at a time,
    /// each shard's in a transaction of its own, with the statements Citus sends whole to that
    /// shard (`holdWriteSequencesOfShard`, `foldIncrementsOfShard`; docs/SHARDING.md, rule 10).
    private static func foldIncrements(
        storedBefore: Date, chunk: inout FoldChunk, candidates: PGStatement, citus: Bool, into report: inout FoldReport,
        on connection: PGConnection
    ) throws(PGError) {
        // Users with old increments that cannot fold yet (a younger-stored increment of their
        // node occurred before them): left out of the next candidates, so that the loop ends
        // and the users after them are reached.
        var unfoldable: Set<String> = []
        while true {
            let users = try connection.query(candidates, [storedBefore, chunk.candidateRows, chunk.users, unfoldable.sorted()]).rows
                .compactMap { row in try? UserID(validating: try row.decode(0, as: String.self)) }
            guard !users.isEmpty else { return }
            var (folded, none): (Int64, [String]) = (0, [])
            let groups = citus ? try usersByShard(users.map(\.rawValue), on: connection) : [users.map(\.rawValue)]
            for group in groups {
                let (hold, fold) = citus
                    ? (BadgeSQL.holdWriteSequencesOfShard, BadgeSQL.foldIncrementsOfShard) : (BadgeSQL.holdWriteSequences, BadgeSQL.foldIncrements)
                do {
                    let (count, left) = try connection.withTransaction { connection in
                        try connection.query(hold, [Set(group).sorted()])
                        // A chunk's sorts (tens of thousands of increments) spilled to disk at the
                        // default 4 MB.
                        try connection.execute(script: "SET LOCAL work_mem = '64MB'", name: "badges.fold_work_mem")
                        let rows = try connection.query(fold, [storedBefore, group]).rows
                        let none = try rows.compactMap { row throws(PGError) in try row.decode(1, as: String?.self) }
                        return (try rows.first?.decode(0, as: Int64.self) ?? 0, none)
                    }
                    folded += count
                    none += left
                } catch let error as PGError {
                    throw error
                } catch {
                    throw PGError(code: .client, message: "folding increments failed: \(error)", statement: "badges.fold_increments")
                }
            }
            // Every candidate's foldable increments are gone now, and the ones that folded
            // none are left out from here on, so the loop ends.
            unfoldable.formUnion(none)
            report.record(Int(clamping: folded))
            chunk.record(users: users.count, folded: Int(clamping: folded))
        }
    }
}

/// What `BadgeStore.apply` did.
public struct BadgeApplyOutcome: Sendable, Hashable {
    /// Own-state rows written or deleted.
    public var touchedRows = 0
    /// Users whose view changed though maybe no aggregate did (a broadcast newly dismissed or
    /// seen), sorted: they get a new version. (A change of muted nodes is found by the rollup,
    /// which compares them with the version's.)
    public var viewChangedUsers: [UserID] = []
    /// The deltas held instead of stored (`apply`'s `holding`).
    var held = HeldDeltas()

    /// An outcome with nothing done.
    public init() {}
}
