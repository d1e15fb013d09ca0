public import BadgeCore
public import Foundation
public import LibPQ

extension BadgeStore {
    /// Brings the aggregates of `users` current, bumps the version of each user whose visible
    /// tree changed, logs each new version in the change log (`badge_change`), notifies
    /// `changeChannel`, and removes the dirty marks of the writes the new versions cover.
    ///
    /// A user whose claimed marks say only increments changed since their last round (none asks
    /// for a recount) has the deltas ingest recorded added to their aggregates
    /// (`BadgeSQL.addDeltas`); every other user, and every user with `recountAll`, is recounted
    /// from their own state (`BadgeSQL.recompute`). Both give the same aggregates and log.
    ///
    /// No writer waits for this: it only reads the users' write sequences (`user_write`) and
    /// deletes marks no writer touches again. Concurrent recomputes of one user are serialized
    /// (per-user advisory locks, taken in one global order; a round's claim takes them without
    /// waiting), so no update is lost and no two recomputes deadlock.
    ///
    /// - Returns: the new version of every user that changed.
    @discardableResult
    public static func recomputeAggregates(
        for users: [UserID], bumping: [UserID] = [], recountAll: Bool = false, on connection: PGConnection
    ) throws(PGError) -> [UserID: Int64] {
        try rollUp(users, bumping: bumping, recountAll: recountAll, on: connection).versions
    }

    /// The users of `users` whose rollup locks this transaction takes without waiting, held until
    /// it ends, for a writer that rolls them up itself after writing (`rollUpOwned`). Taken
    /// before the writer's own writes; it waits for nothing, and takes nothing else: a writer
    /// that held the broadcasts' lock while it waited for another writer's rows could close a
    /// cycle with a writer of broadcasts.
    public static func tryLockForRollUp(_ users: [UserID], on connection: PGConnection) throws(PGError) -> [UserID] {
        guard !users.isEmpty else { return [] }
        var locked: [UserID] = []
        for row in try connection.query(BadgeSQL.tryLockUsers, [users.map(\.rawValue)]).rows {
            if let user = try? UserID(validating: try row.decode(0, as: String.self)) { locked.append(user) }
        }
        return locked
    }

    /// Brings `owned` (``tryLockForRollUp(_:on:)``'s users, written by this transaction since)
    /// current, with `unmarked` the ones whose writes only added and left no dirty mark, and
    /// their held deltas (`applyMarked`'s `owned`): only when this transaction takes the
    /// broadcasts' shared lock without waiting. When a writer of the set of broadcasts holds it,
    /// the users are left to the rollup: `unmarked` get the marks they did not leave (asking for
    /// no recount), and their deltas are stored.
    ///
    /// - Returns: the round's outcome; empty when the users were left to the rollup.
    public static func rollUpOwned(
        _ owned: [UserID], unmarked: UnmarkedWrites, recountAll: Bool = false, on connection: PGConnection
    ) throws(PGError) -> RollupOutcome {
        guard !owned.isEmpty else { return RollupOutcome() }
        guard try connection.query(BadgeSQL.tryLockBroadcastsShared).rows.first?.decode(0, as: Bool.self) == true else {
            if !unmarked.deltas.isEmpty { try connection.query(BadgeSQL.storeHeldDeltas, unmarked.deltas.arrays) }
            if !unmarked.users.isEmpty {
                let users = Set(unmarked.users).sorted().map(\.rawValue)
                // On Citus, a shard's users a statement (docs/SHARDING.md, rule 10).
                let citus = try citusInstalled(on: connection)
                for group in citus ? try usersByShard(users, on: connection) : [users] {
                    try connection.query(BadgeSQL.markWritten.form(citus), [group])
                }
            }
            return RollupOutcome()
        }
        return try rollUp(owned, recountAll: recountAll, onlyMarked: true, unmarked: unmarked, on: connection)
    }

    /// `recomputeAggregates`, telling also how many users took each way. With `onlyMarked`, a
    /// user of `users` with no dirty mark left is passed by: every write of theirs is covered by
    /// their version already (another worker's round took their marks between this round's
    /// claim and its lock), so a recount would change nothing. A user of `unmarked` (written
    /// additively by this transaction, which left no mark: `applyMarked`'s `owned`) counts as
    /// marked by an additive write; include them in `users`. Their held deltas are added with
    /// the stored ones, or dropped for a user recounted (the recount reads the increments).
    public static func rollUp(
        _ users: [UserID], bumping: [UserID] = [], recountAll: Bool = false, onlyMarked: Bool = false,
        unmarked: UnmarkedWrites = UnmarkedWrites(), on connection: PGConnection
    ) throws(PGError) -> RollupOutcome {
        guard !users.isEmpty || !bumping.isEmpty else { return RollupOutcome() }
        var names = Array(Set(users.map(\.rawValue) + bumping.map(\.rawValue))).sorted()
        try connection.query(BadgeSQL.lockUsers, [names])
        var bumped = Set(bumping.map(\.rawValue))
        var marked: Set<String> = []
        var additive: Set<String> = []
        var moded = false
        // Unknown (no marked user): the form that is right on any layout.
        var partitioned = true
        // On Citus, the users of one shard a statement (docs/SHARDING.md, rule 10).
        let citus = try citusInstalled(on: connection)
        for group in citus ? try usersByShard(names, on: connection) : [names] {
            let claimArguments: [any PGBindable] = [group, unmarked.users.map(\.rawValue), unmarked.deltas.users, unmarked.deltas.paths]
            for row in try connection.query(BadgeSQL.claimDirtyUsers.form(citus), claimArguments).rows {
                let name = try row.decode(0, as: String.self)
                marked.insert(name)
                if try row.decode(1, as: Bool.self) { bumped.insert(name) }
                if try !row.decode(2, as: Bool.self) { additive.insert(name) }
                if try row.decode(3, as: Bool.self) { moded = true }
                partitioned = try row.decode(4, as: Bool.self)
            }
        }
        // A round with no marked user (a bump, a repair) learns of the modes on its own.
        if marked.isEmpty { moded = try Self.modesDeclared(on: connection) }
        if onlyMarked {
            names = names.filter { marked.contains($0) || bumped.contains($0) }
            guard !names.isEmpty else { return RollupOutcome() }
        }
        if recountAll { additive = [] }
        additive.subtract(bumped)
        // No broadcast change commits while this one records versions (DESIGN §6a). With none
        // active, the round's statement has no step that merges them into the logged roots.
        try connection.query(BadgeSQL.lockBroadcastsShared)
        let broadcasts = try connection.query(BadgeSQL.activeBroadcasts).rows.first?.decode(0, as: Bool.self) ?? true
        var outcome = RollupOutcome()
        func collect(_ result: PGResult) throws(PGError) {
            for row in result.rows {
                let name = try row.decode(0, as: String.self)
                guard let user = try? UserID(validating: name) else { continue }
                outcome.versions[user] = try row.decode(1, as: Int64.self)
            }
        }
        let recounted = names.filter { !additive.contains($0) }
        if citus {
            // Each shard's users in a statement Citus sends whole to that shard, which returns
            // the new versions. Their logged roots are the users' own; the active broadcasts are
            // merged in after (`mergeBroadcastsIntoLoggedRoots`: Citus runs no merge inside a
            // shard's statement). The versions are notified here, on the coordinator, where the
            // query services listen, and recorded in the change feed's order there.
            let recount = BadgeSQL.roundStatement(.init(additive: false, moded: moded, partitioned: true, broadcasts: false, shard: true))
            for group in try usersByShard(recounted, on: connection) {
                try collect(try connection.query(recount, [group, changeChannel, bumped.sorted()]))
            }
            let add = BadgeSQL.roundStatement(.init(additive: true, moded: moded, partitioned: true, broadcasts: false, shard: true))
            for group in try usersByShard(additive.sorted(), on: connection) {
                let held = unmarked.deltas.only(Set(group))
                try collect(try connection.query(add, [group, changeChannel, [String]()] + held.arrays))
            }
            if broadcasts { try Self.mergeBroadcastsIntoLoggedRoots(outcome.versions, moded: moded, on: connection) }
            let versions = outcome.versions.sorted { $0.key.rawValue < $1.key.rawValue }
            if !versions.isEmpty {
                let (users, numbers) = (versions.map(\.key.rawValue), versions.map(\.value))
                try connection.query(BadgeSQL.notifyUserVersions, [changeChannel, users, numbers])
                // Their order for the change feed, on the coordinator (`change_feed_outbox`).
                try connection.query(BadgeSQL.recordFeedOutbox, [users, numbers])
            }
        } else {
            if !recounted.isEmpty {
                let statement = BadgeSQL.roundStatement(.init(additive: false, moded: moded, partitioned: partitioned, broadcasts: broadcasts))
                try collect(try connection.query(statement, [recounted, changeChannel, bumped.sorted()]))
            }
            if !additive.isEmpty {
                let statement = BadgeSQL.roundStatement(.init(additive: true, moded: moded, partitioned: partitioned, broadcasts: broadcasts))
                let held = unmarked.deltas.only(additive)
                try collect(try connection.query(statement, [additive.sorted(), changeChannel, [String]()] + held.arrays))
            }
        }
        outcome.recounted = recounted.count
        outcome.added = additive.count
        return outcome
    }

    /// Claims up to `limit` dirty users of one part of the queue (`RollupSweep`): the part at the
    /// sweep's `queue.next`, or the first after it that has users another round does not hold. In
    /// that part, users are claimed in user order from the first after the last one the sweep
    /// claimed there, wrapping around to the part's first user once past its last (a sweep:
    /// every dirty user is claimed within one pass over the parts, however many marks each
    /// has), passing by users another worker's round holds: the claim is the users' rollup
    /// locks, taken without waiting and held until the transaction ends. Pass them to
    /// `recomputeAggregates` in the same transaction.
    ///
    /// On the shipped schema the queue is one part (`dirty_mark`). Where `dirty_mark` is
    /// partitioned (by user), each partition is a part, so a round's users share a partition
    /// and every statement of the round that names them reaches that partition only, and the
    /// claim steps through one partition's index instead of merging all of them.
    ///
    /// With `settledFor` (seconds, 0: none), a user whose oldest mark is younger is passed by,
    /// left for a later round to cover more of their writes (`RollupService` while ingest is
    /// behind).
    ///
    /// - Returns: the users in claim order and when each was first marked dirty (for the
    ///   rollup-lag measure), and the sweep moved past them (`RollupSweep.claimedPart`).
    public static func claimDirtyUsers(
        limit: Int, sweep: RollupSweep, settledFor: Double = 0, on connection: PGConnection
    ) throws(PGError) -> (
        claimed: [(user: UserID, dirtiedAt: Date)], sweep: RollupSweep
    ) {
        var sweep = sweep
        sweep.claimedPart = nil
        guard limit > 0 else { return ([], sweep) }
        var queue = sweep.queue
        var last = sweep.last
        var claimedPart: String?
        // Within a day, and never NaN: what a setting gives is bounded where it is parsed.
        let settle = settledFor.isFinite ? min(max(settledFor, 0), 86_400) : 0
        let before = try connection.query(BadgeSQL.claimPlanSettings).singleRow()
        let settings = [try before.decode(0, as: String.self), try before.decode(1, as: String.self)]
        let citus = try citusInstalled(on: connection)
        let claimed = try queue.claimInTurn(on: connection) { part throws(PGError) in
            let statement = TableParts.statement(BadgeSQL.claimDirtyUsersInOrder, over: part, table: "dirty_mark", make: BadgeSQL.claimDirtyUsersInOrder(from:))
            var claimed: [(user: UserID, dirtiedAt: Date)] = []
            func sweepPart(_ limit: Int, after: String, through: String?) throws(PGError) {
                let rows: [PGRow]
                if citus {
                    // Twice the limit of candidates: some may be held by another round.
                    let candidates = try connection.query(BadgeSQL.dirtyCandidates, [min(limit, Int.max / 2) * 2, after, through]).rows
                    let users = try candidates.map { row throws(PGError) in try row.decode(0, as: String.self) }
                    let times = try candidates.map { row throws(PGError) in try row.decode(1, as: Date.self) }
                    rows = try connection.query(BadgeSQL.tryLockCandidates, [users, times, settle, limit]).rows
                } else {
                    rows = try connection.query(statement, [limit, after, through, settle]).rows
                }
                for row in rows {
                    let name = try row.decode(0, as: String.self)
                    let dirtiedAt = try row.decode(1, as: Date.self)
                    guard let user = try? UserID(validating: name) else { continue }
                    claimed.append((user, dirtiedAt))
                }
            }
            let cursor = last[part] ?? ""
            try sweepPart(limit, after: cursor, through: nil)
            if claimed.count < limit, !cursor.isEmpty {
                try sweepPart(limit - claimed.count, after: "", through: cursor)
            }
            if let user = claimed.last?.user { (last[part], claimedPart) = (user.rawValue, part) }
            return claimed
        }
        try connection.query(BadgeSQL.restorePlanSettings, settings)
        (sweep.queue, sweep.last, sweep.claimedPart) = (queue, last, claimedPart)
        return (claimed, sweep)
    }

    /// `claimDirtyUsers(limit:sweep:on:)` from a new sweep: the first users of the first part
    /// that has any.
    public static func claimDirtyUsers(limit: Int, on connection: PGConnection) throws(PGError) -> [(user: UserID, dirtiedAt: Date)] {
        try claimDirtyUsers(limit: limit, sweep: RollupSweep(), on: connection).claimed
    }

    /// How many records waited in Kafka after ingest's latest batches: the sum of what ingest
    /// stored with the offsets it moved in the last `seconds` (`OffsetAdvance.waiting`); nil
    /// when no such batch said (ingest idle, stopped, or of an older build).
    public static func ingestWaiting(within seconds: Double, on connection: PGConnection) throws(PGError) -> Int64? {
        try connection.query(BadgeSQL.ingestWaiting, [seconds]).rows.first?.decode(0, as: Int64?.self)
    }

    /// One rollup step: claims up to `limit` dirty users and recomputes them, in one transaction
    /// (with `recountAll`, every one recounted from their own state; see `recomputeAggregates`).
    ///
    /// - Returns: how many users were claimed (0: nothing was dirty, or others hold the rest).
    public func recomputeDirtyUsers(limit: Int, recountAll: Bool = false) async throws -> Int {
        try await rollupRound(limit: limit, recountAll: recountAll).claimed.count
    }

    /// One rollup round, the rollup's one transaction: claims up to `limit` dirty users of the
    /// sweep's next part (`claimDirtyUsers`), calls `onClaim` with the sweep moved past them, and
    /// rolls them up (`rollUp`). `onClaim` runs before the round's statements: a worker that
    /// shares the sweep can start its own claim after these users instead of stepping over
    /// them (with two workers, each claim otherwise read about twice the users it took).
    /// With `settledFor`, only users whose oldest mark is that many seconds old are claimed.
    ///
    /// - Returns: the users claimed, in claim order, with when each was first marked dirty (for
    ///   the rollup-lag measure), what the round did, and the sweep moved past them.
    public func rollupRound(
        limit: Int, sweep: RollupSweep = RollupSweep(), recountAll: Bool = false, settledFor: Double = 0,
        onClaim: @escaping @Sendable (RollupSweep) -> Void = { _ in }
    ) async throws -> (
        claimed: [(user: UserID, dirtiedAt: Date)], outcome: RollupOutcome, sweep: RollupSweep
    ) {
        try await pool.withTransaction { connection in
            let (claimed, sweep) = try Self.claimDirtyUsers(limit: limit, sweep: sweep, settledFor: settledFor, on: connection)
            onClaim(sweep)
            return (claimed, try Self.rollUp(claimed.map(\.user), recountAll: recountAll, onlyMarked: true, on: connection), sweep)
        }
    }
}

/// Where a rollup worker's sweep of the dirty queue stands: the queue's parts (`TableParts` of
/// `dirty_mark`: its leaf partitions, or the table itself on the shipped schema), the part the
/// next round tries first (`queue.next`), and the last user claimed in each part. Workers of
/// one process share one (`RollupService`).
public struct RollupSweep: Sendable {
    /// The queue's parts, and which the next round tries first.
    public var queue = TableParts(of: "dirty_mark")
    /// The last user claimed in each part (none: start from its first).
    public var last: [String: String] = [:]
    /// The part the last claim took its users from (nil: none).
    public internal(set) var claimedPart: String?

    /// A sweep from the start of the first part.
    public init() {}

    /// Takes what `other` (this sweep after a round) learned: its reading of the parts, if
    /// newer, and where it left the part it claimed from. `queue.next` stays: the caller moves it.
    public mutating func merge(_ other: RollupSweep) {
        queue.merge(other.queue)
        last = last.filter { queue.names.isEmpty || queue.names.contains($0.key) }
        if let part = other.claimedPart, let user = other.last[part] { last[part] = user }
    }
}

/// What one rollup round did (`BadgeStore.rollUp`).
public struct RollupOutcome: Sendable {
    /// The new version of every user whose visible tree changed.
    public var versions: [UserID: Int64] = [:]
    /// Users recounted from their own state.
    public var recounted = 0
    /// Users whose deltas were added to their aggregates.
    public var added = 0

    /// Nothing done.
    public init() {}
}
