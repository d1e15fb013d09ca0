import BadgeCore
public import LibPQ

extension BadgeStore {
    /// Deletes up to `limit` own-state rows whose expiry has passed and marks their users dirty,
    /// in the caller's transaction, so the next rollup removes them and their ancestors' share.
    ///
    /// - Returns: how many users were marked.
    @discardableResult
    public static func expireBadges(limit: Int, on connection: PGConnection) throws(PGError) -> Int {
        var users: [UserID] = []
        for row in try connection.query(BadgeSQL.expireBadges, [limit]).rows {
            if let user = try? UserID(validating: try row.decode(0, as: String.self)) { users.append(user) }
        }
        try markDirty(users, on: connection)
        return users.count
    }

    /// Withdraws the broadcasts whose expiry has passed and, if any, bumps the broadcast version
    /// (every user's view changes), in the caller's transaction.
    ///
    /// - Returns: how many broadcasts expired.
    @discardableResult
    public static func expireBroadcasts(on connection: PGConnection) throws(PGError) -> Int {
        let expired = try connection.query(BadgeSQL.expireBroadcasts).affectedRows
        if expired > 0 {
            try bumpBroadcastVersion(on: connection)
        }
        return expired
    }

    /// How many users wait for a rollup.
    public static func queueDepth(on connection: PGConnection) throws(PGError) -> Int64 {
        try connection.query(BadgeSQL.queueDepth).rows.first?.decode(0, as: Int64.self) ?? 0
    }
}
