import BadgeCore
public import LibPQ

extension BadgeStore {
    /// Deletes up to `limit` own-state rows whose expiry has passed and marks their users dirty,
    /// in the caller's transaction, so the next rollup removes them and their ancestors' share.
    ///
    /// - Returns: how many users had rows deleted (a few more may be marked).
    /// The users come from `part`, a part of `badge_state` (`expiryParts`); on the shipped
    /// schema the table itself.
    @discardableResult
    public static func expireBadges(limit: Int, part: String = "badge_state", on connection: PGConnection) throws(PGError) -> Int {
        let candidates = TableParts.statement(BadgeSQL.expiredUsers, over: part, table: "badge_state") { BadgeSQL.expiredUsers(in: $0) }
        return try markingUsers(of: candidates, limit: limit, on: connection) { users, shard throws(PGError) in
            try connection.query(BadgeSQL.expireBadges.form(shard), [limit, users.map(\.rawValue)]).rows.count
        }
    }

    /// Wakes up to `limit` snoozes whose end has passed (DESIGN §2, Mute and snooze): marks their
    /// users for a recount, in the caller's transaction, so the next rollup counts the nodes in
    /// their ancestors again and makes a version without them among the muted nodes.
    ///
    /// - Returns: how many snoozes woke.
    /// The snoozes come from `part`, a part of `badge_mute` (`expiryParts`); on the shipped
    /// schema the table itself.
    @discardableResult
    public static func wakeSnoozes(limit: Int, part: String = "badge_mute", on connection: PGConnection) throws(PGError) -> Int {
        let candidates = TableParts.statement(BadgeSQL.endedSnoozeUsers, over: part, table: "badge_mute") {
            BadgeSQL.endedSnoozeUsers(in: $0)
        }
        return try markingUsers(of: candidates, limit: limit, on: connection) { users, shard throws(PGError) in
            try connection.query(BadgeSQL.wakeSnoozes.form(shard), [limit, users.map(\.rawValue)]).affectedRows
        }
    }

    /// The parts the sweeper reads one at a time (`TableParts`): those of `badge_state` (for
    /// `expireBadges`) and of `badge_mute` (for `wakeSnoozes`). Where the tables are partitioned
    /// by user, each candidate statement then reads one partition.
    public static func expiryParts(on connection: PGConnection) throws(PGError) -> (states: [String], mutes: [String]) {
        var states = TableParts(of: "badge_state"), mutes = TableParts(of: "badge_mute")
        try states.refresh(on: connection)
        try mutes.refresh(on: connection)
        return (states.inTurn, mutes.inTurn)
    }

    /// Reads the users `candidates` (a statement of `$1` = `limit`) names, marks them dirty (the
    /// marks first, as ingest takes them: one lock order), then runs `act` for them (with
    /// whether they share a Citus shard: its statements' forms for one shard); 0 without one.
    /// Where Citus distributes the tables, a shard's users at a time (docs/SHARDING.md, rule 10:
    /// Citus takes row locks only in a statement for one shard).
    private static func markingUsers(
        of candidates: PGStatement, limit: Int, on connection: PGConnection, then act: ([UserID], Bool) throws(PGError) -> Int
    ) throws(PGError) -> Int {
        var users: [UserID] = []
        for row in try connection.query(candidates, [limit]).rows {
            if let user = try? UserID(validating: try row.decode(0, as: String.self)) { users.append(user) }
        }
        guard !users.isEmpty else { return 0 }
        guard try citusInstalled(on: connection) else {
            try markDirty(users, on: connection)
            return try act(users, false)
        }
        var done = 0
        for group in try usersByShard(users.map(\.rawValue), on: connection) {
            let part = group.compactMap { try? UserID(validating: $0) }
            try markDirty(part, bumping: [], additive: [], unmarked: [], markedLater: [], shard: true, on: connection)
            done += try act(part, true)
        }
        return done
    }

    /// Withdraws the broadcasts whose expiry has passed and, if any, bumps the broadcast version
    /// (every user's view changes), in the caller's transaction. The exclusive broadcast lock,
    /// which waits for every rollup round and holds up the next ones, is taken only when a
    /// broadcast has expired.
    ///
    /// - Returns: how many broadcasts expired.
    @discardableResult
    public static func expireBroadcasts(on connection: PGConnection) throws(PGError) -> Int {
        guard try connection.query(BadgeSQL.anyBroadcastExpired).rows.first?.decode(0, as: Bool.self) == true else { return 0 }
        try lockBroadcastsExclusive(on: connection)
        let expired = try connection.query(BadgeSQL.expireBroadcasts).affectedRows
        if expired > 0 {
            try bumpBroadcastVersion(on: connection)
        }
        return expired
    }

    /// Whether any user waits for a rollup (a dirty mark committed before this statement).
    public static func queueHasMarks(on connection: PGConnection) throws(PGError) -> Bool {
        try !connection.query(BadgeSQL.queueHasMarks).rows.isEmpty
    }

    /// How many users wait for a rollup.
    public static func queueDepth(on connection: PGConnection) throws(PGError) -> Int64 {
        try connection.query(BadgeSQL.queueDepth).rows.first?.decode(0, as: Int64.self) ?? 0
    }
}
