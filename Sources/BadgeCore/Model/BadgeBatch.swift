public import Foundation
import Synchronization

/// Coalesces a sequence of mutations into the net writes the store applies set-based in SQL.
///
/// Every operation follows rules that do not depend on the order operations arrive in (see
/// ``BadgeTree``), so a batch keeps, per node, what holds among its own: the latest time of each
/// clear (``clearMarks``, which clear counters and items) and of each seen (``seens``), the set
/// that supersedes the others (``sets``, ``BadgeSet/supersedes(_:)``), the increments and
/// decrements by time (``increments``: amounts at one microsecond add up, a decrement as a
/// negative amount), the items added (with the earliest time) and removed, and each node's mute
/// that holds.
///
/// Contract: for any prior state, applying the clears' counter part, then the seens (their marks,
/// then the counters), then the sets, then the increments, then recording the clear marks, the
/// item removals, the item additions and the mutes, gives the same tree as applying the appended
/// mutations one by one, at the same instant (``BadgeTree/apply(_:for:now:)`` does exactly
/// that). The sets and increments that a clear of the batch reaches by time are left out here, as
/// the clear marks are recorded last. A mutation without `occurredAt` takes the batch's ``now``
/// plus its position in microseconds (so arrival order is kept); a later `occurredAt` is taken as
/// that time.
///
/// One thing still follows arrival order: whether a stored state has expired, decided when the
/// store applies the batch, at its own `now`: an increment of an expired state starts from
/// nothing.
public struct BadgeBatch: Sendable {
    /// The pending sets, seens and increments of one user.
    struct Pending: Sendable {
        /// The set of each node that supersedes the batch's others.
        var sets: [BadgePath: BadgeSet] = [:]
        /// The latest time of the seens of each node (each covers its subtree).
        var seenMarks: [BadgePath: Date] = [:]
        /// The increments (above 0) and decrements (below 0) of each node, by time (to the
        /// microsecond).
        var increments: [BadgePath: [Date: Int64]] = [:]
        /// The expiry the increments of each node gave, by time (at one time, the latest).
        var incrementExpiries: [BadgePath: [Date: Date]] = [:]
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

    /// What the batch holds of each user's sets, seens and increments.
    var pending: [UserID: Pending] = [:]
    /// Items added, with the earliest time any add of the batch says they occurred.
    var added: [ItemKey: Date] = [:]
    /// Items removed.
    var removed: Set<ItemKey> = []
    /// The mute or unmute of each node that holds among the batch's (see ``BadgeMute``).
    var muteChanges: [MuteKey: BadgeMute] = [:]
    /// Clear marks: the latest time each clear of the batch applies up to.
    var marks: [MarkKey: Date] = [:]
    /// Users that any mutation touched (even a no-op).
    private(set) var touched: Set<UserID> = []
    /// `touched` sorted, once for the batch as it stands: every list below is in user order,
    /// and sorting the users again for each was about 4% of the services' CPU at 10,000 events/s
    /// over 100,000 users (`perf`, BENCHMARKS.md). A new user gives the batch a new one; copies
    /// share it until then, as they share `touched`.
    private var sortedTouched = SortedUsers()
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
        if touched.insert(mutation.user).inserted { sortedTouched = SortedUsers() }
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
            pending[mutation.user, default: Pending()].seenMarks[path] = max(pending[mutation.user]?.seenMarks[path] ?? time, time)
        case .increment(let by):
            addIncrement(of: mutation.user, at: path, by: max(by, 0), time: time, expiresAt: mutation.expiresAt)
        case .decrement(let by):
            addIncrement(of: mutation.user, at: path, by: -max(by, 0), time: time, expiresAt: nil)
        case .set(let count, let icon):
            let set = BadgeSet(count: count, icon: icon, expiresAt: mutation.expiresAt, at: time)
            if let held = pending[mutation.user]?.sets[path], !set.supersedes(held) { return }
            pending[mutation.user, default: Pending()].sets[path] = set
        }
    }

    /// Keeps an increment (a decrement when `by` is below 0) unless a clear appended earlier
    /// reaches it by time (``increments`` leaves out those a later one reaches).
    private mutating func addIncrement(of user: UserID, at path: BadgePath, by: Int64, time: Date, expiresAt: Date?) {
        guard by != 0, !isCovered(user, path, at: time) else { return }
        let time = time.toMicroseconds
        // In place: a copy of the entry would copy its dictionaries at the first change.
        pending[user, default: Pending()].increments[path, default: [:]][time, default: 0].addSaturating(by)
        if let expiresAt {
            let given = pending[user]?.incrementExpiries[path]?[time]
            pending[user]?.incrementExpiries[path, default: [:]][time] = max(expiresAt, given ?? expiresAt)
        }
    }

    /// Whether the mutation can only add to counts: an increment without an expiry.
    static func onlyAdds(_ mutation: BadgeMutation) -> Bool {
        guard case .increment = mutation.operation else { return false }
        return mutation.expiresAt == nil
    }

    /// Whether a clear of the batch reaches `path` of `user` at or after `time`.
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

    /// The users with pending entries of one kind, sorted (only those are sorted: most batches
    /// have no sets or seens, and sorting every user for each kind was a large part of ingest's
    /// own time).
    private func users(with kind: (Pending) -> Bool) -> [UserID] {
        users.filter { user in pending[user].map(kind) ?? false }
    }

    /// The seens: one per (user, path), with the latest time it applies up to; sorted by user
    /// then path. Each marks seen what occurred in its subtree up to then, and the counters whose
    /// set occurred up to then.
    public var seens: [(user: UserID, path: BadgePath, through: Date)] {
        users { !$0.seenMarks.isEmpty }.flatMap { user in
            (pending[user]?.seenMarks ?? [:]).sorted { $0.key < $1.key }.map { (user: user, path: $0.key, through: $0.value) }
        }
    }

    /// The sets that hold, one per (user, path), sorted by user then path; those a clear of the
    /// batch reaches by time are left out.
    public var sets: [(user: UserID, path: BadgePath, set: BadgeSet)] {
        users { !$0.sets.isEmpty }.flatMap { user in
            (pending[user]?.sets ?? [:]).sorted { $0.key < $1.key }.compactMap { path, set in
                isCovered(user, path, at: set.at) ? nil : (user: user, path: path, set: set)
            }
        }
    }

    /// The increments and decrements (`by` below 0), one per (user, path, time), each with the
    /// expiry an increment at that time gave (the latest); sorted by user, path, then time. Those
    /// a clear of the batch reaches by time are left out.
    public var increments: [(user: UserID, path: BadgePath, occurredAt: Date, by: Int64, expiresAt: Date?)] {
        users { !$0.increments.isEmpty }.flatMap { user -> [(user: UserID, path: BadgePath, occurredAt: Date, by: Int64, expiresAt: Date?)] in
            guard let entry = pending[user] else { return [] }
            return entry.increments.sorted { $0.key < $1.key }.flatMap { path, amounts in
                amounts.sorted { $0.key < $1.key }.compactMap { time, by in
                    guard !isCovered(user, path, at: time) else { return nil }
                    return (user: user, path: path, occurredAt: time, by: by, expiresAt: entry.incrementExpiries[path]?[time])
                }
            }
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
    public var users: [UserID] { sortedTouched.users(of: touched) }

    /// How many users the batch touches (without sorting them).
    public var userCount: Int { touched.count }

    /// The users whose every mutation is an increment without an expiry, sorted: what the batch
    /// does to their trees only adds, so their rollup can add it (DESIGN §5). Every other user's
    /// tree must be recounted.
    public var additiveUsers: [UserID] { users.filter { !recounted.contains($0) } }

    /// The part of the batch that is `users`' (the others' mutations left out): each user's
    /// writes are the same as in the whole batch, since a batch coalesces per user. For a store
    /// that writes a batch in parts, a part per shard of users (docs/SHARDING.md, rule 10).
    public func restricted(to users: Set<UserID>) -> BadgeBatch {
        var part = BadgeBatch(now: now)
        part.appended = appended
        part.pending = pending.filter { users.contains($0.key) }
        part.added = added.filter { users.contains($0.key.user) }
        part.removed = removed.filter { users.contains($0.user) }
        part.muteChanges = muteChanges.filter { users.contains($0.key.user) }
        part.marks = marks.filter { users.contains($0.key.user) }
        part.touched = touched.intersection(users)
        part.recounted = recounted.intersection(users)
        part.dismissals = dismissals.filter { users.contains($0.user) }
        part.broadcastSeens = broadcastSeens.filter { users.contains($0.user) }
        return part
    }
}

/// A batch's users in order, sorted when first asked for (`BadgeBatch.sortedTouched`).
private final class SortedUsers: Sendable {
    private let sorted = Mutex<[UserID]?>(nil)

    /// `touched` sorted: the list made at the first call, which every later call gets.
    func users(of touched: Set<UserID>) -> [UserID] {
        sorted.withLock { sorted in
            if let sorted { return sorted }
            let users = touched.sorted()
            sorted = users
            return users
        }
    }
}

extension BadgeTree {
    /// Applies the net form of `batch` for `user`, in the store's order: the clears' counter
    /// part, the seens (marks, then counters), the sets, the increments; then the clear marks (at
    /// their times), the item removals, the item additions and the mutes (see ``BadgeBatch`` for
    /// the contract).
    public mutating func apply(_ batch: BadgeBatch, for user: UserID, now: Date) {
        for mark in batch.clearMarks where mark.user == user {
            if mark.subtree {
                clearSubtree(at: mark.path, through: mark.through, now: now)
            } else {
                clearCounter(mark.path, through: mark.through, now: now)
            }
        }
        let seens = batch.seens.filter { $0.user == user }
        for seen in seens {
            markItemsSeen(seen.path, through: seen.through)
        }
        for seen in seens {
            markCountersSeen(seen.path, through: seen.through, now: now)
        }
        for set in batch.sets where set.user == user {
            applySet(set.set, at: set.path, now: now)
        }
        for increment in batch.increments where increment.user == user {
            self.increment(increment.path, by: increment.by, occurredAt: increment.occurredAt, expiresAt: increment.expiresAt, now: now)
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
