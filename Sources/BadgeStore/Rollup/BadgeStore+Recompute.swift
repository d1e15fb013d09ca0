public import BadgeCore
public import Foundation
public import LibPQ

extension BadgeStore {
    /// Recomputes the aggregates of `users` from their own state (set-based, in SQL), bumps the
    /// version of each user whose visible tree changed, logs each new version in the change log
    /// (`badge_change`), notifies `changeChannel`, and removes their dirty marks.
    ///
    /// Concurrent recomputes of one user are serialized (per-user advisory locks, taken in one
    /// global order), and a dirty mark held by another worker is left to it, so no update is lost
    /// and no two recomputes deadlock.
    ///
    /// - Returns: the new version of every user that changed.
    @discardableResult
    public static func recomputeAggregates(
        for users: [UserID], bumping: [UserID] = [], on connection: PGConnection
    ) throws(PGError) -> [UserID: Int64] {
        guard !users.isEmpty || !bumping.isEmpty else { return [:] }
        let names = Array(Set(users.map(\.rawValue) + bumping.map(\.rawValue))).sorted()
        try connection.query(BadgeSQL.lockUsers, [names])
        var claimed: [String] = []
        var bumped = Set(bumping.map(\.rawValue))
        for row in try connection.query(BadgeSQL.claimDirtyUsers, [names]).rows {
            let name = try row.decode(0, as: String.self)
            claimed.append(name)
            if try row.decode(1, as: Bool.self) { bumped.insert(name) }
        }
        // No broadcast change commits while this one records versions (DESIGN §6a).
        try connection.query(BadgeSQL.lockBroadcastsShared)
        let changed = try connection.query(BadgeSQL.recompute, [names, changeChannel, bumped.sorted()])
        if !claimed.isEmpty {
            try connection.query(BadgeSQL.removeDirty, [claimed])
        }
        var versions: [UserID: Int64] = [:]
        for row in changed.rows {
            let name = try row.decode(0, as: String.self)
            guard let user = try? UserID(validating: name) else { continue }
            versions[user] = try row.decode(1, as: Int64.self)
        }
        return versions
    }

    /// Claims up to `limit` dirty users, oldest first, skipping those another worker holds
    /// (`FOR UPDATE SKIP LOCKED`); the claim lasts until the transaction ends. Pass them to
    /// `recomputeAggregates` in the same transaction.
    ///
    /// - Returns: the users and when each was first marked dirty (for the rollup-lag measure).
    public static func claimDirtyUsers(limit: Int, on connection: PGConnection) throws(PGError) -> [(user: UserID, dirtiedAt: Date)] {
        var claimed: [(user: UserID, dirtiedAt: Date)] = []
        for row in try connection.query(BadgeSQL.claimOldestDirtyUsers, [limit]).rows {
            let name = try row.decode(0, as: String.self)
            let dirtiedAt = try row.decode(1, as: Date.self)
            guard let user = try? UserID(validating: name) else { continue }
            claimed.append((user, dirtiedAt))
        }
        return claimed
    }

    /// One rollup step: claims up to `limit` dirty users and recomputes them, in one transaction.
    ///
    /// - Returns: how many users were claimed (0: nothing was dirty, or others hold the rest).
    public func recomputeDirtyUsers(limit: Int) async throws -> Int {
        try await pool.withTransaction { connection in
            let claimed = try Self.claimDirtyUsers(limit: limit, on: connection).map(\.user)
            try Self.recomputeAggregates(for: claimed, on: connection)
            return claimed.count
        }
    }
}
