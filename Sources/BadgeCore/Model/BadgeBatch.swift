public import Foundation

/// Coalesces a sequence of mutations into the net writes the store applies set-based in SQL.
///
/// Contract: for any prior state, applying each of ``rounds`` in order (its forced clears, its
/// seens, then its writes), then recording ``clearMarks``, ``seenMarks``, then ``itemRemovals``,
/// then ``itemAdditions``,
/// gives the same tree as applying the appended mutations one by one, in order, at the same
/// instant (``BadgeTree/apply(_:for:now:)`` does exactly that).
///
/// Composition of consecutive counter operations on one node: set then increment is a set with
/// the sum (the later expiry when given); increment then increment is one increment of the sum;
/// decrement then decrement likewise; set then decrement is the set of the difference, or a clear
/// when nothing is left; anything then set is the set; anything then clear is a clear; clear then
/// increment(k) is a set of k with no icon; clear then decrement stays a clear. A forced clear
/// drops the pending writes of the user within its subtree; a write on a node known to be empty
/// (cleared earlier in the round) is absolute. An increment and a decrement of a node whose
/// stored state the batch does not know do not compose: the later one starts a new round; so do
/// a set after such a decrement, and a seen and a write within its subtree, whichever comes
/// second. A set carries the seen part the operations before it in the batch left (its
/// `seenCap`: 0 after a clear).
///
/// Items need no order: a node's items follow rules that give the same tree whatever order the
/// operations come in (see ``BadgeTree``), so the batch keeps, per item, whether it was removed
/// and the earliest time it was added, and per clear the latest time it applies up to. A
/// mutation without `occurredAt` takes the batch's ``now`` plus its position in microseconds
/// (so arrival order is kept); a later `occurredAt` is taken as that time.
///
/// An increment on a node whose state the batch does not know stays relative
/// (``BadgeWrite/increment(by:expiresAt:)``), because whether the stored state has expired is
/// decided when the store applies the write, at its own `now`. Expiries set within the batch are
/// taken as not yet passed when a later increment of the same batch composes with them: a
/// batch is applied as one instant, and an event that sets an already expired badge and then
/// increments it in the same batch gets the sum with the old expiry.
public struct BadgeBatch: Sendable {
    /// The pending writes and forced clears of one user in one round.
    struct Pending: Sendable {
        var writes: [BadgePath: BadgeWrite] = [:]
        /// Forced-clear roots, none within another.
        var forcedClears: [BadgePath] = []
        /// Roots of `seen`s (each covers its subtree), none within another; no write of the
        /// round lies within one (such a write, or such a seen, starts a new round).
        var seenRoots: [BadgePath] = []

        /// Whether the node is known empty because a forced clear of this round covers it.
        func isCleared(_ path: BadgePath) -> Bool {
            forcedClears.contains { path.isWithin($0) }
        }
    }

    /// One round of net counter writes: its forced clears first, then its seens, then its
    /// writes. A batch has more than one round only when a decrement follows an increment of a
    /// node whose stored state the batch does not know (or the other way round), or when a seen
    /// and a write of a node within it follow each other: those do not compose, so the later one
    /// starts a new round.
    public struct Round: Sendable {
        var pending: [UserID: Pending] = [:]

        /// The subtrees to remove before the writes, sorted by user then path; within one user
        /// no entry lies within another.
        public var forcedClears: [(user: UserID, path: BadgePath)] {
            pending.keys.sorted().flatMap { user in
                (pending[user]?.forcedClears ?? []).sorted().map { (user: user, path: $0) }
            }
        }

        /// The roots of the round's seens (each covers its subtree), sorted by user then path.
        public var seens: [(user: UserID, path: BadgePath)] {
            pending.keys.sorted().flatMap { user in
                (pending[user]?.seenRoots ?? []).sorted().map { (user: user, path: $0) }
            }
        }

        /// The net write of each node, at most one per (user, path), sorted by user then path.
        public var writes: [(user: UserID, path: BadgePath, write: BadgeWrite)] {
            pending.keys.sorted().flatMap { user in
                (pending[user]?.writes ?? [:]).sorted { $0.key < $1.key }.map { (user: user, path: $0.key, write: $0.value) }
            }
        }
    }

    /// A (user, path, item) key.
    struct ItemKey: Hashable, Sendable {
        var user: UserID
        var path: BadgePath
        var item: ItemID
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
    /// Clear marks: the latest time each clear of the batch applies up to.
    var marks: [MarkKey: Date] = [:]
    /// Seen marks: the latest time each `seen` of the batch applies up to.
    var seenMarkTimes: [MarkKey: Date] = [:]
    /// Users that any mutation touched (even a no-op).
    var touched: Set<UserID> = []
    /// Mutations appended so far (each one without `occurredAt` takes `now` plus its position in
    /// microseconds, so that arrival order is kept).
    var appended = 0

    /// Every clear appended, in order: each also dismisses, for its user, the broadcasts stored
    /// at its path (with force, within its subtree), which coalescing the writes would forget.
    public private(set) var dismissals: [(user: UserID, path: BadgePath, force: Bool)] = []

    /// When the batch is read: the time of mutations without `occurredAt`, and the latest time
    /// one with `occurredAt` may claim (a time in the future is taken as the read time).
    public let now: Date

    /// An empty batch read at `now`.
    public init(now: Date = Date()) {
        self.now = now
    }

    /// The time a mutation takes effect at when it is the `position`th (from 0) of a batch read
    /// at `now`: its `occurredAt`, but never later than when it was read; without one, when it
    /// was read (`now` plus `position` microseconds, so that arrival order is kept).
    static func effectiveTime(of mutation: BadgeMutation, position: Int, now: Date) -> Date {
        let read = now.addingTimeInterval(Double(position) / 1_000_000)
        guard let occurredAt = mutation.occurredAt else { return read }
        return min(occurredAt, read)
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
        let path = mutation.path
        switch mutation.operation {
        case .addItem(let item):
            let key = ItemKey(user: mutation.user, path: path, item: item)
            added[key] = min(added[key] ?? time, time)
            return
        case .removeItem(let item):
            removed.insert(ItemKey(user: mutation.user, path: path, item: item))
            return
        case .clear(let force):
            dismissals.append((mutation.user, path, force))
            let key = MarkKey(user: mutation.user, path: path, subtree: force)
            marks[key] = max(marks[key] ?? time, time)
        case .seen:
            let key = MarkKey(user: mutation.user, path: path, subtree: true)
            seenMarkTimes[key] = max(seenMarkTimes[key] ?? time, time)
        case .set, .increment, .decrement:
            break
        }
        if startsRound(mutation) { rounds.append(Round()) }
        var entry = rounds[rounds.count - 1].pending[mutation.user] ?? Pending()
        Self.coalesce(mutation, into: &entry)
        rounds[rounds.count - 1].pending[mutation.user] = entry
    }

    /// Whether `mutation` cannot compose with what its user's current round holds: a decrement
    /// after a relative increment of its node, an increment or a set after a relative decrement,
    /// a seen over a pending write, or a write under a pending seen.
    func startsRound(_ mutation: BadgeMutation) -> Bool {
        guard let entry = rounds[rounds.count - 1].pending[mutation.user] else { return false }
        if case .seen = mutation.operation {
            return entry.writes.keys.contains { $0.isWithin(mutation.path) }
        }
        if entry.seenRoots.contains(where: { mutation.path.isWithin($0) }) { return true }
        switch (mutation.operation, entry.writes[mutation.path]) {
        case (.decrement, .increment?), (.increment, .decrement?), (.set, .decrement?): return true
        default: return false
        }
    }

    /// Composes a counter mutation with the pending writes of its user in the current round.
    static func coalesce(_ mutation: BadgeMutation, into entry: inout Pending) {
        let path = mutation.path
        switch mutation.operation {
        case .clear(force: true):
            entry.writes = entry.writes.filter { !$0.key.isWithin(path) }
            if !entry.isCleared(path) {
                entry.forcedClears.removeAll { $0.isWithin(path) }
                entry.forcedClears.append(path)
            }
        case .clear(force: false):
            if entry.isCleared(path) {
                entry.writes[path] = nil
            } else {
                entry.writes[path] = .clear
            }
        case .set(let count, let icon):
            let count = max(count, 0)
            var seenCap: Int64?
            switch entry.writes[path] {
            case .set(let previousCount, _, _, let previousCap):
                seenCap = min(previousCap ?? previousCount, count)
            case .clear:
                seenCap = 0
            case nil where entry.isCleared(path):
                seenCap = 0
            case .increment, .decrement, nil:
                // After a pending decrement a new round began (see startsRound).
                break
            }
            entry.writes[path] = .set(count: count, icon: icon, expiresAt: mutation.expiresAt, seenCap: seenCap == count ? nil : seenCap)
        case .increment(let by):
            let by = max(by, 0)
            let expiresAt = mutation.expiresAt
            switch entry.writes[path] {
            case .set(let count, let icon, let previousExpiresAt, let seenCap):
                entry.writes[path] = .set(
                    count: count.addingSaturating(by), icon: icon, expiresAt: expiresAt ?? previousExpiresAt,
                    seenCap: by == 0 ? seenCap : (seenCap ?? count))
            case .increment(let previousBy, let previousExpiresAt):
                entry.writes[path] = .increment(
                    by: previousBy.addingSaturating(by), expiresAt: expiresAt ?? previousExpiresAt)
            case .clear:
                entry.writes[path] = .set(count: by, icon: nil, expiresAt: expiresAt, seenCap: 0)
            case .decrement, nil:
                // A pending decrement started a new round before this (see startsRound).
                if entry.isCleared(path) {
                    entry.writes[path] = .set(count: by, icon: nil, expiresAt: expiresAt, seenCap: 0)
                } else {
                    entry.writes[path] = .increment(by: by, expiresAt: expiresAt)
                }
            }
        case .decrement(let by):
            let by = max(by, 0)
            switch entry.writes[path] {
            case .set(let count, let icon, let expiresAt, let seenCap):
                let left = count - min(by, count)
                let cap = min(seenCap ?? count, left)
                entry.writes[path] = left > 0 ? .set(count: left, icon: icon, expiresAt: expiresAt, seenCap: cap == left ? nil : cap) : .clear
            case .decrement(let previousBy):
                entry.writes[path] = .decrement(by: previousBy.addingSaturating(by))
            case .clear:
                break
            case .increment, nil:
                // A pending increment started a new round before this (see startsRound).
                if !entry.isCleared(path) { entry.writes[path] = .decrement(by: by) }
            }
        case .seen:
            if !entry.seenRoots.contains(where: { path.isWithin($0) }) {
                entry.seenRoots.removeAll { $0.isWithin(path) }
                entry.seenRoots.append(path)
            }
        case .addItem, .removeItem:
            break
        }
    }

    /// Adds mutations in order.
    public mutating func append(contentsOf mutations: some Sequence<BadgeMutation>) {
        for mutation in mutations { append(mutation) }
    }

    /// Whether nothing was appended.
    public var isEmpty: Bool { touched.isEmpty }

    /// The first round's forced clears (see ``Round/forcedClears``); the store applies
    /// ``rounds``.
    public var forcedClears: [(user: UserID, path: BadgePath)] { rounds.first?.forcedClears ?? [] }

    /// The first round's writes (see ``Round/writes``); the store applies ``rounds``.
    public var writes: [(user: UserID, path: BadgePath, write: BadgeWrite)] { rounds.first?.writes ?? [] }

    /// The clear marks to record, one per (user, path, reach), with the latest time it applies
    /// up to; sorted by user, path, then reach.
    public var clearMarks: [(user: UserID, path: BadgePath, subtree: Bool, through: Date)] {
        marks.sorted { ($0.key.user, $0.key.path, $0.key.subtree ? 1 : 0) < ($1.key.user, $1.key.path, $1.key.subtree ? 1 : 0) }
            .map { (user: $0.key.user, path: $0.key.path, subtree: $0.key.subtree, through: $0.value) }
    }

    /// The seen marks to record, one per (user, path), with the latest time it applies up to;
    /// sorted by user then path.
    public var seenMarks: [(user: UserID, path: BadgePath, through: Date)] {
        seenMarkTimes.sorted { ($0.key.user, $0.key.path) < ($1.key.user, $1.key.path) }
            .map { (user: $0.key.user, path: $0.key.path, through: $0.value) }
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

    /// Every user the batch touches (even by a no-op clear), sorted and unique.
    public var users: [UserID] { touched.sorted() }
}

extension BadgeTree {
    /// Applies the net form of `batch` for `user`, in the store's order: each round's forced
    /// clears then writes; then the clear marks (at their times), the item removals and the
    /// item additions (see ``BadgeBatch`` for the contract; the item rules do not depend on the
    /// order, see ``BadgeTree``).
    public mutating func apply(_ batch: BadgeBatch, for user: UserID, now: Date) {
        for round in batch.rounds {
            guard let entry = round.pending[user] else { continue }
            for path in entry.forcedClears {
                removeSubtree(at: path)
            }
            for path in entry.seenRoots {
                markCountersSeen(path, now: now)
            }
            for (path, write) in entry.writes {
                apply(write, at: path, now: now)
            }
        }
        for mark in batch.clearMarks where mark.user == user {
            markCleared(mark.path, subtree: mark.subtree, through: mark.through)
        }
        for mark in batch.seenMarks where mark.user == user {
            markItemsSeen(mark.path, through: mark.through)
        }
        for removal in batch.itemRemovals where removal.user == user {
            removeItem(removal.item, at: removal.path)
        }
        for addition in batch.itemAdditions where addition.user == user {
            addItem(addition.item, at: addition.path, occurredAt: addition.occurredAt)
        }
    }
}
