public import Foundation

/// Coalesces a sequence of mutations into the net writes the store applies set-based in SQL.
///
/// Contract: for any prior state, applying each of ``rounds`` in order (its forced clears, its
/// seens with their marks, its writes, then its increments), then recording ``clearMarks``, then
/// ``itemRemovals``, then ``itemAdditions``, then ``mutes``, gives the same tree as applying the appended
/// mutations one by one, in order, at the same instant (``BadgeTree/apply(_:for:now:)`` does
/// exactly that).
///
/// Composition of consecutive counter operations on one node within a round: anything then set
/// is the set (the round's earlier increments of the node are dropped); set then decrement is the
/// set of the difference, or a clear of everything when nothing is left; decrement then
/// decrement is one decrement of the sum; set or clear then clear is a clear; a clear drops the
/// round's increments of its reach that occurred up to it. Increments are not composed into
/// writes: each is kept with its time (amounts at one microsecond add up) and applied after the
/// round's writes, with the latest expiry given. These do not compose, so the later one starts a
/// new round: a decrement after an increment or a clear of its node; a clear or a set after a
/// decrement; a clear that leaves a pending increment of its reach (one that occurred after it);
/// a forced clear over a pending write within its subtree, or overlapping a forced clear of the
/// round that applies up to a later time; a seen and a write within its subtree,
/// whichever comes second. A set carries the seen part the operations before it in the batch
/// left (its `seenCap`: 0 after a clear).
///
/// Increments and items need no order among themselves and with clears and seens (see
/// ``BadgeTree``): an increment that a clear appended earlier reaches by time is dropped here,
/// the batch keeps per item whether it was removed and the earliest time it was added, and per
/// clear the latest time it applies up to. A mutation without `occurredAt` takes the batch's
/// ``now`` plus its position in microseconds (so arrival order is kept); a later `occurredAt` is
/// taken as that time.
///
/// Whether a stored state has expired is decided when the store applies a write, at its own
/// `now`: an increment of an expired state starts from nothing, also when a set of the same
/// batch gave it an expiry that has passed.
public struct BadgeBatch: Sendable {
    /// The pending writes, forced clears, seens and increments of one user in one round.
    struct Pending: Sendable {
        var writes: [BadgePath: BadgeWrite] = [:]
        /// Forced-clear roots, none within another, each with the time it applies up to.
        var forcedClears: [BadgePath: Date] = [:]
        /// Roots of `seen`s (each covers its subtree), none within another; no write of the
        /// round lies within one (such a write, or such a seen, starts a new round).
        var seenRoots: [BadgePath] = []
        /// The latest time of the round's seens of each node (each covers its subtree).
        var seenMarks: [BadgePath: Date] = [:]
        /// The increments of each node, by time (to the microsecond).
        var increments: [BadgePath: [Date: Int64]] = [:]
        /// The latest expiry the increments of each node gave.
        var incrementExpiries: [BadgePath: Date] = [:]

        /// Whether the node is known empty because a forced clear of this round covers it.
        func isCleared(_ path: BadgePath) -> Bool {
            forcedClears.keys.contains { path.isWithin($0) }
        }

        /// Drops the pending increments that a clear of `path` (with `subtree`, of its subtree)
        /// up to `through` reaches.
        mutating func dropIncrements(of path: BadgePath, subtree: Bool, through: Date) {
            for node in increments.keys where subtree ? node.isWithin(path) : node == path {
                increments[node] = increments[node]?.filter { $0.key > through }
                if increments[node]?.isEmpty == true {
                    increments[node] = nil
                    incrementExpiries[node] = nil
                }
            }
        }
    }

    /// One round of net counter writes: its forced clears first, then its seens, then its
    /// writes, then its increments. A batch has more than one round only when operations that
    /// do not compose follow each other (see ``BadgeBatch``): the later one starts a new round.
    public struct Round: Sendable {
        var pending: [UserID: Pending] = [:]

        /// The users whose pending entry has something of one kind, sorted (only those are
        /// sorted: most rounds have no clears or seens, and sorting every user for each kind
        /// was a large part of ingest's own time).
        func users(with kind: (Pending) -> Bool) -> [UserID] {
            pending.compactMap { kind($0.value) ? $0.key : nil }.sorted()
        }

        /// The subtrees to clear before the writes, each with the time it applies up to, sorted
        /// by user then path; within one user no entry lies within another.
        public var forcedClears: [(user: UserID, path: BadgePath, through: Date)] {
            users { !$0.forcedClears.isEmpty }.flatMap { user in
                (pending[user]?.forcedClears ?? [:]).sorted { $0.key < $1.key }.map { (user: user, path: $0.key, through: $0.value) }
            }
        }

        /// The roots of the round's seens (each covers its subtree), sorted by user then path.
        public var seens: [(user: UserID, path: BadgePath)] {
            users { !$0.seenRoots.isEmpty }.flatMap { user in
                (pending[user]?.seenRoots ?? []).sorted().map { (user: user, path: $0) }
            }
        }

        /// The seen marks to record with the round's seens, one per (user, path), with the
        /// latest time it applies up to; sorted by user then path.
        public var seenMarks: [(user: UserID, path: BadgePath, through: Date)] {
            users { !$0.seenMarks.isEmpty }.flatMap { user in
                (pending[user]?.seenMarks ?? [:]).sorted { $0.key < $1.key }.map { (user: user, path: $0.key, through: $0.value) }
            }
        }

        /// The net write of each node, at most one per (user, path), sorted by user then path.
        public var writes: [(user: UserID, path: BadgePath, write: BadgeWrite)] {
            users { !$0.writes.isEmpty }.flatMap { user in
                (pending[user]?.writes ?? [:]).sorted { $0.key < $1.key }.map { (user: user, path: $0.key, write: $0.value) }
            }
        }

        /// The increments to add after the writes, one per (user, path, time), with the
        /// latest expiry the increments of the node gave; sorted by user, path, then time.
        public var increments: [(user: UserID, path: BadgePath, occurredAt: Date, by: Int64, expiresAt: Date?)] {
            users { !$0.increments.isEmpty }.flatMap { user -> [(user: UserID, path: BadgePath, occurredAt: Date, by: Int64, expiresAt: Date?)] in
                guard let entry = pending[user] else { return [] }
                return entry.increments.sorted { $0.key < $1.key }.flatMap { path, amounts in
                    amounts.sorted { $0.key < $1.key }.map {
                        (user: user, path: path, occurredAt: $0.key, by: $0.value, expiresAt: entry.incrementExpiries[path])
                    }
                }
            }
        }
    }

    /// A (user, path, item) key.
    struct ItemKey: Hashable, Sendable {
        var user: UserID
        var path: BadgePath
        var item: ItemID
    }

    /// A (user, path) key of a mute.
    struct MuteKey: Hashable, Sendable {
        var user: UserID
        var path: BadgePath
    }

    /// A clear's reach: one node, or (`subtree`) a node and everything below it.
    struct MarkKey: Hashable, Sendable {
        var user: UserID
        var path: BadgePath
        var subtree: Bool
    }

    /// The counter rounds, in order; the last takes new mutations.
    public private(set) var rounds: [Round] = [Round()]
    /// Items added, with the earliest time any add of the batch says they occurred.
    var added: [ItemKey: Date] = [:]
    /// Items removed.
    var removed: Set<ItemKey> = []
    /// The mute or unmute of each node that holds among the batch's (see ``BadgeMute``).
    var muteChanges: [MuteKey: BadgeMute] = [:]
    /// Clear marks: the latest time each clear of the batch applies up to.
    var marks: [MarkKey: Date] = [:]
    /// Users that any mutation touched (even a no-op).
    var touched: Set<UserID> = []
    /// Users with a mutation other than an increment without an expiry.
    var recounted: Set<UserID> = []
    /// Mutations appended so far (each one without `occurredAt` takes `now` plus its position in
    /// microseconds, so that arrival order is kept).
    var appended = 0

    /// Every clear appended, in order, with its time when it carries one (`occurred_at`, at most
    /// the read time): each also dismisses, for its user, the broadcasts stored at its path
    /// (with force, within its subtree) up to that time
    /// (``BroadcastBadge/isReached(at:storedAt:shownIn:byActionAt:subtree:actedAt:shownThrough:)``),
    /// which coalescing the writes would forget.
    public private(set) var dismissals: [(user: UserID, path: BadgePath, force: Bool, time: Date?)] = []
    /// Every seen appended, in order, with its time when it carries one: each also marks seen,
    /// for its user, the broadcasts stored within its path up to that time (the same rule).
    public private(set) var broadcastSeens: [(user: UserID, path: BadgePath, time: Date?)] = []

    /// When the batch is read: the time of mutations without `occurredAt`, and the latest time
    /// one with `occurredAt` may claim (a time in the future is taken as the read time).
    public let now: Date

    /// An empty batch read at `now`.
    public init(now: Date = Date()) {
        self.now = now
    }

    /// The time a mutation takes effect at when it is the `position`th (from 0) of a batch read
    /// at `now`: its `occurredAt`, but never later than when it was read; without one, when it
    /// was read (`now` plus `position` microseconds, so that arrival order is kept). To the
    /// microsecond, as the store keeps times.
    static func effectiveTime(of mutation: BadgeMutation, position: Int, now: Date) -> Date {
        // Whole microseconds first, so that positions never meet when rounded.
        let read = Date(timeIntervalSince1970: ((now.timeIntervalSince1970 * 1_000_000).rounded() + Double(position)) / 1_000_000)
        guard let occurredAt = mutation.occurredAt else { return read }
        return min(occurredAt, read).toMicroseconds
    }

    /// `mutations` as a batch read at `now` times them: each with its effective time as
    /// `occurredAt`. Applying them one by one to a ``BadgeTree`` (``BadgeTree/apply(_:now:)``)
    /// gives what applying the batch does.
    public static func timed(_ mutations: some Sequence<BadgeMutation>, readAt now: Date) -> [BadgeMutation] {
        mutations.enumerated().map { position, mutation in
            var timed = mutation
            timed.occurredAt = effectiveTime(of: mutation, position: position, now: now)
            return timed
        }
    }

    /// Adds a mutation after the ones already appended.
    public mutating func append(_ mutation: BadgeMutation) {
        let time = Self.effectiveTime(of: mutation, position: appended, now: now)
        appended += 1
        touched.insert(mutation.user)
        if !Self.onlyAdds(mutation) { recounted.insert(mutation.user) }
        let path = mutation.path
        switch mutation.operation {
        case .addItem(let item):
            let key = ItemKey(user: mutation.user, path: path, item: item)
            added[key] = min(added[key] ?? time, time)
            return
        case .removeItem(let item):
            removed.insert(ItemKey(user: mutation.user, path: path, item: item))
            return
        case .mute(let until):
            recordMute(BadgeMute(muted: true, until: until, occurredAt: time), of: mutation.user, at: path)
            return
        case .unmute:
            recordMute(BadgeMute(muted: false, until: nil, occurredAt: time), of: mutation.user, at: path)
            return
        case .clear(let force):
            dismissals.append((mutation.user, path, force, mutation.occurredAt == nil ? nil : time))
            let key = MarkKey(user: mutation.user, path: path, subtree: force)
            marks[key] = max(marks[key] ?? time, time)
        case .seen:
            broadcastSeens.append((mutation.user, path, mutation.occurredAt == nil ? nil : time))
        case .increment(let by):
            guard by > 0, !isCovered(mutation.user, path, at: time) else { return }
        case .set, .decrement:
            break
        }
        if startsRound(mutation, at: time) { rounds.append(Round()) }
        // In place: a copy of the entry would copy its dictionaries at the first change.
        Self.coalesce(mutation, at: time, into: &rounds[rounds.count - 1].pending[mutation.user, default: Pending()])
    }

    /// Whether the mutation can only add to counts: an increment without an expiry.
    static func onlyAdds(_ mutation: BadgeMutation) -> Bool {
        guard case .increment = mutation.operation else { return false }
        return mutation.expiresAt == nil
    }

    /// Whether a clear appended earlier reaches `path` of `user` at or after `time`.
    func isCovered(_ user: UserID, _ path: BadgePath, at time: Date) -> Bool {
        guard !marks.isEmpty else { return false }
        let time = time.toMicroseconds
        if let own = marks[MarkKey(user: user, path: path, subtree: false)], own.toMicroseconds >= time { return true }
        var node: BadgePath? = path
        while let current = node {
            if let mark = marks[MarkKey(user: user, path: current, subtree: true)], mark.toMicroseconds >= time { return true }
            node = current.parent
        }
        return false
    }

    /// Whether `mutation` (taking effect at `time`) cannot compose with what its user's current
    /// round holds (see ``BadgeBatch``).
    func startsRound(_ mutation: BadgeMutation, at time: Date) -> Bool {
        guard let entry = rounds[rounds.count - 1].pending[mutation.user] else { return false }
        let path = mutation.path
        if case .clear(let force) = mutation.operation {
            // Increments it leaves were applied, with their expiry, before it.
            let time = time.toMicroseconds
            let keeps = entry.increments.contains { node, amounts in
                (force ? node.isWithin(path) : node == path) && amounts.keys.contains { $0 > time }
            }
            if keeps { return true }
        }
        switch mutation.operation {
        case .seen:
            return entry.writes.keys.contains { $0.isWithin(path) }
        case .increment:
            return false
        case .clear(force: true):
            if entry.writes.keys.contains(where: { $0.isWithin(path) }) { return true }
            let time = time.toMicroseconds
            return entry.forcedClears.contains { root, through in
                (root.isWithin(path) && through > time) || (path.isWithin(root) && through < time)
            }
        default:
            break
        }
        if entry.seenRoots.contains(where: { path.isWithin($0) }) { return true }
        switch (mutation.operation, entry.writes[path]) {
        case (.decrement, .clear?), (.set, .decrement?), (.clear, .decrement?): return true
        case (.decrement, _): return entry.increments[path] != nil
        default: return false
        }
    }

    /// Composes a counter mutation taking effect at `time` with the pending writes of its user
    /// in the current round.
    static func coalesce(_ mutation: BadgeMutation, at time: Date, into entry: inout Pending) {
        let path = mutation.path
        let time = time.toMicroseconds
        switch mutation.operation {
        case .clear(force: true):
            entry.dropIncrements(of: path, subtree: true, through: time)
            if !entry.forcedClears.contains(where: { path.isWithin($0.key) }) {
                entry.forcedClears = entry.forcedClears.filter { !$0.key.isWithin(path) }
                entry.forcedClears[path] = time
            }
        case .clear(force: false):
            entry.dropIncrements(of: path, subtree: false, through: time)
            switch entry.writes[path] {
            case .set?:
                entry.writes[path] = .clear(through: nil)
            case .clear(let through)?:
                entry.writes[path] = .clear(through: through.map { max($0, time) })
            case .decrement?, nil:
                // After a pending decrement a new round began (see startsRound).
                entry.writes[path] = .clear(through: time)
            }
        case .set(let count, let icon):
            let count = max(count, 0)
            entry.increments[path] = nil
            entry.incrementExpiries[path] = nil
            var seenCap: Int64?
            switch entry.writes[path] {
            case .set(let previousCount, _, _, let previousCap):
                seenCap = min(previousCap ?? previousCount, count)
            case .clear:
                seenCap = 0
            case nil where entry.isCleared(path):
                seenCap = 0
            case .decrement, nil:
                // After a pending decrement a new round began (see startsRound).
                break
            }
            entry.writes[path] = .set(count: count, icon: icon, expiresAt: mutation.expiresAt, seenCap: seenCap == count ? nil : seenCap)
        case .increment(let by):
            entry.increments[path, default: [:]][time, default: 0].addSaturating(by)
            if let expiresAt = mutation.expiresAt { entry.incrementExpiries[path] = expiresAt }
        case .decrement(let by):
            let by = max(by, 0)
            switch entry.writes[path] {
            case .set(let count, let icon, let expiresAt, let seenCap):
                let left = count - min(by, count)
                let cap = min(seenCap ?? count, left)
                entry.writes[path] = left > 0 ? .set(count: left, icon: icon, expiresAt: expiresAt, seenCap: cap == left ? nil : cap) : .clear(through: nil)
            case .decrement(let previousBy):
                entry.writes[path] = .decrement(by: previousBy.addingSaturating(by))
            case .clear, nil:
                // After a pending clear or increment a new round began (see startsRound).
                entry.writes[path] = .decrement(by: by)
            }
        case .seen:
            entry.seenMarks[path] = max(entry.seenMarks[path] ?? time, time)
            if !entry.seenRoots.contains(where: { path.isWithin($0) }) {
                entry.seenRoots.removeAll { $0.isWithin(path) }
                entry.seenRoots.append(path)
            }
        case .addItem, .removeItem, .mute, .unmute:
            break
        }
    }

    /// Keeps the mute or unmute of `path` that holds (``BadgeMute/supersedes(_:)``); `root` is
    /// never muted.
    mutating func recordMute(_ mute: BadgeMute, of user: UserID, at path: BadgePath) {
        guard path != .root else { return }
        let key = MuteKey(user: user, path: path)
        if let held = muteChanges[key], !mute.supersedes(held) { return }
        muteChanges[key] = mute
    }

    /// Adds mutations in order.
    public mutating func append(contentsOf mutations: some Sequence<BadgeMutation>) {
        for mutation in mutations { append(mutation) }
    }

    /// Whether nothing was appended.
    public var isEmpty: Bool { touched.isEmpty }

    /// The first round's forced clears (see ``Round/forcedClears``); the store applies
    /// ``rounds``.
    public var forcedClears: [(user: UserID, path: BadgePath, through: Date)] { rounds.first?.forcedClears ?? [] }

    /// The first round's writes (see ``Round/writes``); the store applies ``rounds``.
    public var writes: [(user: UserID, path: BadgePath, write: BadgeWrite)] { rounds.first?.writes ?? [] }

    /// The clear marks to record, one per (user, path, reach), with the latest time it applies
    /// up to; sorted by user, path, then reach.
    public var clearMarks: [(user: UserID, path: BadgePath, subtree: Bool, through: Date)] {
        marks.sorted { ($0.key.user, $0.key.path, $0.key.subtree ? 1 : 0) < ($1.key.user, $1.key.path, $1.key.subtree ? 1 : 0) }
            .map { (user: $0.key.user, path: $0.key.path, subtree: $0.key.subtree, through: $0.value) }
    }

    /// The items removed, sorted by user, path, then item.
    public var itemRemovals: [(user: UserID, path: BadgePath, item: ItemID)] {
        removed.sorted { ($0.user, $0.path, $0.item) < ($1.user, $1.path, $1.item) }
            .map { (user: $0.user, path: $0.path, item: $0.item) }
    }

    /// The items added and not removed in this batch, with the earliest time an add says they
    /// occurred; sorted by user, path, then item.
    public var itemAdditions: [(user: UserID, path: BadgePath, item: ItemID, occurredAt: Date)] {
        added.filter { !removed.contains($0.key) }
            .sorted { ($0.key.user, $0.key.path, $0.key.item) < ($1.key.user, $1.key.path, $1.key.item) }
            .map { (user: $0.key.user, path: $0.key.path, item: $0.key.item, occurredAt: $0.value) }
    }

    /// The mutes and unmutes to record (each node's that holds, see ``BadgeMute``), sorted by user
    /// then path. They need no order with the other writes: the store keeps each node's that
    /// holds.
    public var mutes: [(user: UserID, path: BadgePath, mute: BadgeMute)] {
        muteChanges.sorted { ($0.key.user, $0.key.path) < ($1.key.user, $1.key.path) }
            .map { (user: $0.key.user, path: $0.key.path, mute: $0.value) }
    }

    /// Every user the batch touches (even by a no-op clear), sorted and unique.
    public var users: [UserID] { touched.sorted() }

    /// How many users the batch touches (without sorting them).
    public var userCount: Int { touched.count }

    /// The users whose every mutation is an increment without an expiry, sorted: what the batch
    /// does to their trees only adds, so their rollup can add it (DESIGN §5). Every other user's
    /// tree must be recounted.
    public var additiveUsers: [UserID] { touched.subtracting(recounted).sorted() }
}

extension BadgeTree {
    /// Applies the net form of `batch` for `user`, in the store's order: each round's forced
    /// clears, seens, writes then increments; then the clear marks (at their times), the item removals and the
    /// item additions (see ``BadgeBatch`` for the contract; the item rules do not depend on the
    /// order, see ``BadgeTree``).
    public mutating func apply(_ batch: BadgeBatch, for user: UserID, now: Date) {
        for round in batch.rounds {
            guard let entry = round.pending[user] else { continue }
            for (path, through) in entry.forcedClears {
                clearSubtree(at: path, through: through, now: now)
            }
            for (path, through) in entry.seenMarks {
                markItemsSeen(path, through: through)
            }
            for path in entry.seenRoots {
                markCountersSeen(path, now: now)
            }
            for (path, write) in entry.writes {
                apply(write, at: path, now: now)
            }
            for (path, amounts) in entry.increments {
                for (time, by) in amounts {
                    increment(path, by: by, occurredAt: time, expiresAt: entry.incrementExpiries[path], now: now)
                }
            }
        }
        for mark in batch.clearMarks where mark.user == user {
            markCleared(mark.path, subtree: mark.subtree, through: mark.through)
        }
        for removal in batch.itemRemovals where removal.user == user {
            removeItem(removal.item, at: removal.path)
        }
        for addition in batch.itemAdditions where addition.user == user {
            addItem(addition.item, at: addition.path, occurredAt: addition.occurredAt)
        }
        for change in batch.mutes where change.user == user {
            recordMute(change.mute, at: change.path)
        }
    }
}
