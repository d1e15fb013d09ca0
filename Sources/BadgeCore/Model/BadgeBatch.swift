public import Foundation

/// Coalesces a sequence of mutations into the net writes the store applies set-based in SQL.
///
/// Contract: for any prior own states, removing the subtree of every entry of ``forcedClears``
/// and then applying every entry of ``writes`` gives the same own states as applying the appended
/// mutations one by one, in order, at the same instant.
///
/// Composition of consecutive operations on one node: set then increment is a set with the sum
/// (the later expiry when given); increment then increment is one increment of the sum; anything
/// then set is the set; anything then clear is a clear; clear then increment(k) is a set of k
/// with no icon. A forced clear drops the pending writes of the user within its subtree; a write
/// on a node known to be empty (cleared earlier in the batch) is absolute.
///
/// An increment on a node whose state the batch does not know stays relative
/// (``BadgeWrite/increment(by:expiresAt:)``), because whether the stored state has expired is
/// decided when the store applies the write, at its own `now`. Expiries set within the batch are
/// taken as not yet passed when a later increment of the same batch composes with them: a
/// batch is applied as one instant, and an event that sets an already expired badge and then
/// increments it in the same batch gets the sum with the old expiry.
public struct BadgeBatch: Sendable {
    /// The pending writes and forced clears of one user.
    struct Pending: Sendable {
        var writes: [BadgePath: BadgeWrite] = [:]
        /// Forced-clear roots, none within another.
        var forcedClears: [BadgePath] = []

        /// Whether the node is known empty because a forced clear of this batch covers it.
        func isCleared(_ path: BadgePath) -> Bool {
            forcedClears.contains { path.isWithin($0) }
        }
    }

    var pending: [UserID: Pending] = [:]

    /// Every clear appended, in order: each also dismisses, for its user, the broadcasts stored
    /// at its path (with force, within its subtree), which coalescing the writes would forget.
    public private(set) var dismissals: [(user: UserID, path: BadgePath, force: Bool)] = []

    /// An empty batch.
    public init() {}

    /// Adds a mutation after the ones already appended.
    public mutating func append(_ mutation: BadgeMutation) {
        var entry = pending[mutation.user] ?? Pending()
        defer { pending[mutation.user] = entry }
        let path = mutation.path
        if case .clear(let force) = mutation.operation {
            dismissals.append((mutation.user, path, force))
        }
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
            entry.writes[path] = .set(count: max(count, 0), icon: icon, expiresAt: mutation.expiresAt)
        case .increment(let by):
            let by = max(by, 0)
            let expiresAt = mutation.expiresAt
            switch entry.writes[path] {
            case .set(let count, let icon, let previousExpiresAt):
                entry.writes[path] = .set(
                    count: count.addingSaturating(by), icon: icon, expiresAt: expiresAt ?? previousExpiresAt)
            case .increment(let previousBy, let previousExpiresAt):
                entry.writes[path] = .increment(
                    by: previousBy.addingSaturating(by), expiresAt: expiresAt ?? previousExpiresAt)
            case .clear:
                entry.writes[path] = .set(count: by, icon: nil, expiresAt: expiresAt)
            case nil:
                if entry.isCleared(path) {
                    entry.writes[path] = .set(count: by, icon: nil, expiresAt: expiresAt)
                } else {
                    entry.writes[path] = .increment(by: by, expiresAt: expiresAt)
                }
            }
        }
    }

    /// Adds mutations in order.
    public mutating func append(contentsOf mutations: some Sequence<BadgeMutation>) {
        for mutation in mutations { append(mutation) }
    }

    /// Whether nothing was appended.
    public var isEmpty: Bool { pending.isEmpty }

    /// The subtrees to remove before the writes, sorted by user then path; within one user no
    /// entry lies within another.
    public var forcedClears: [(user: UserID, path: BadgePath)] {
        pending.keys.sorted().flatMap { user in
            (pending[user]?.forcedClears ?? []).sorted().map { (user: user, path: $0) }
        }
    }

    /// The net write of each node, at most one per (user, path), sorted by user then path.
    public var writes: [(user: UserID, path: BadgePath, write: BadgeWrite)] {
        pending.keys.sorted().flatMap { user in
            (pending[user]?.writes ?? [:]).sorted { $0.key < $1.key }.map { (user: user, path: $0.key, write: $0.value) }
        }
    }

    /// Every user the batch touches (even by a no-op clear), sorted and unique.
    public var users: [UserID] { pending.keys.sorted() }
}

extension BadgeTree {
    /// Applies the net form of `batch` for `user`: that user's forced clears first, then the
    /// user's writes (see ``BadgeBatch`` for the contract).
    public mutating func apply(_ batch: BadgeBatch, for user: UserID, now: Date) {
        guard let entry = batch.pending[user] else { return }
        for path in entry.forcedClears {
            removeSubtree(at: path)
        }
        for (path, write) in entry.writes {
            apply(write, at: path, now: now)
        }
    }
}
