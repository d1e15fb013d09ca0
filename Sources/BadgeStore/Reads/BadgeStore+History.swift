public import BadgeCore
public import Foundation
public import LibPQ

extension BadgeStore {
    /// `user`'s current layers and the logged changes back to visible version `since`, read in
    /// one snapshot (a repeatable-read transaction of its own on `connection`); nil when `since`
    /// is negative, later than the current version, or more than `limit` versions back (the
    /// log is then not read). Whether the log still reaches back is ``BadgeHistory``'s answer.
    ///
    /// - Throws: `PGError`.
    public static func readHistory(
        for user: UserID, since: Int64, limit: Int, on connection: PGConnection
    ) throws -> BadgeHistory? {
        try connection.withTransaction(.repeatableRead) { connection throws -> BadgeHistory? in
            guard let head = try connection.query(BadgeSQL.historyHead, [user.rawValue]).rows.first else { return nil }
            let userVersion = try head.decode(0, as: Int64?.self) ?? 0
            let reachedAt = try head.decode(1, as: Int64?.self)
            let broadcastVersion = try head.decode(2, as: Int64.self)
            let (current, overflow) = userVersion.addingReportingOverflow(broadcastVersion)
            guard !overflow, since >= 0, since <= current, current - since <= Int64(clamping: limit) else { return nil }
            var layers = BadgeLayers(
                userVersion: userVersion, broadcastVersion: broadcastVersion,
                mutes: try storedMutes(try head.decode(3, as: String?.self), of: user, statement: BadgeSQL.historyHead),
                modes: try aggregationModes(on: connection))
            for row in try connection.query(BadgeSQL.historyAggregates, [user.rawValue]).rows {
                layers.aggregates[try storedPath(row, 0)] = BadgeAggregate(
                    count: try row.decode(1, as: Int64.self), icon: storedIcon(try row.decode(2, as: String?.self)),
                    unseen: try row.decode(3, as: Int64?.self) ?? 0)
            }
            for row in try connection.query(BadgeSQL.historyBroadcasts).rows {
                let broadcast = try storedBroadcast(row, from: 0)
                layers.broadcasts[broadcast.id] = broadcast
            }
            for row in try connection.query(BadgeSQL.historyDismissals, [user.rawValue]).rows {
                layers.dismissals[try row.decode(0, as: Int64.self)] = try row.decode(1, as: Int64.self)
            }
            for row in try connection.query(BadgeSQL.historySeens, [user.rawValue]).rows {
                layers.seens[try row.decode(0, as: Int64.self)] = try row.decode(1, as: Int64.self)
            }
            // A step back moves one of the two versions by one, so `since` lies within these.
            var own: [Int64: OwnLayerChange] = [:]
            let oldest = since - broadcastVersion
            for row in try connection.query(BadgeSQL.historyOwnChanges, [user.rawValue, oldest]).rows {
                let version = try row.decode(0, as: Int64.self)
                let madeUnder = try row.decode(1, as: Int64.self)
                var change =
                    try own[version]
                    ?? OwnLayerChange(
                        version: version, broadcastVersion: madeUnder, nodes: [],
                        mutes: try row.decode(9, as: String?.self).map { text throws(PGError) in
                            try storedMutes(text, of: user, statement: BadgeSQL.historyOwnChanges)
                        })
                if try row.decode(2, as: String?.self) != nil {
                    change.nodes.append(
                        .init(path: try storedPath(row, 2), before: try storedAggregate(row, from: 3), after: try storedAggregate(row, from: 6)))
                }
                own[version] = change
            }
            let broadcasts = try broadcastChanges(after: since - userVersion, through: broadcastVersion, on: connection)
            // Needed only to undo the oldest change of the mutes read.
            var mutesBefore: (version: Int64, mutes: [MutedNode])?
            if own.values.contains(where: { $0.mutes != nil }),
                let row = try connection.query(BadgeSQL.historyMutesAt, [user.rawValue, oldest]).rows.first
            {
                mutesBefore = (oldest, try storedMutes(try row.decode(0, as: String?.self), of: user, statement: BadgeSQL.historyMutesAt))
            }
            return BadgeHistory(
                current: layers, reachedAt: reachedAt, ownChanges: Array(own.values), broadcastChanges: broadcasts,
                mutesBefore: mutesBefore)
        }
    }

    /// `user`'s logged own versions after own version `after`, in order, up to `limit` of them,
    /// each with its changed nodes, the broadcasts it dismissed and saw and the muted nodes when it
    /// changed them: what a stream that holds
    /// the user's view at `after` applies to follow the user without reading the tree. Empty
    /// when the log has nothing after `after`; nil when it no longer holds the next version
    /// (pruned): read the tree instead. Versions after a gap are left out.
    ///
    /// - Throws: `PGError` (`.decoding` for a damaged log record).
    public static func ownChanges(for user: UserID, after: Int64, limit: Int, on connection: PGConnection) throws(PGError) -> [OwnLayerChange]? {
        try ownChanges(of: [LogRead(user: user, after: after)], limit: limit, on: connection)[0]
    }

    /// What ``ownChanges(for:after:limit:on:)`` answers for each of `reads`, in their order,
    /// read in one statement: the reads of the streams of many users that a burst of
    /// notifications woke (DESIGN §10). A user may be named more than once.
    ///
    /// - Throws: `PGError` (`.decoding` for a damaged log record).
    public static func ownChanges(of reads: [LogRead], limit: Int, on connection: PGConnection) throws(PGError) -> [[OwnLayerChange]?] {
        guard limit > 0, !reads.isEmpty else { return reads.map { _ in [] } }
        var rows: [[(version: Int64, row: PGRow)]] = reads.map { _ in [] }
        // On Citus, the reads of one shard's users a statement (docs/SHARDING.md, rule 10).
        let citus = try citusInstalled(on: connection)
        var groups: [(reads: [Int], users: [String])] = [(Array(reads.indices), [])]
        if citus {
            let shards = try usersByShard(Array(Set(reads.map(\.user.rawValue))), on: connection)
            var shardOf: [String: Int] = [:]
            for (shard, users) in shards.enumerated() { for name in users { shardOf[name] = shard } }
            groups = shards.map { (reads: [], users: $0) }
            for (index, read) in reads.enumerated() {
                guard let shard = shardOf[read.user.rawValue] else {
                    throw PGError(code: .decoding, message: "no Citus shard was named for user \(read.user.rawValue)", statement: "badges.users_by_shard")
                }
                groups[shard].reads.append(index)
            }
        }
        let statement = BadgeSQL.ownChangesAfter.form(citus)
        for group in groups where !group.reads.isEmpty {
            var arguments: [any PGBindable] = [group.reads.map { reads[$0].user.rawValue }, group.reads.map { reads[$0].after }, Int64(limit)]
            if citus { arguments.append(group.users) }
            for row in try connection.query(statement, arguments).rows {
                let position = try row.decode(0, as: Int64.self)
                guard position >= 1, position <= Int64(group.reads.count) else {
                    throw PGError(
                        code: .decoding, message: "the change log read answered for read \(position) of \(group.reads.count)",
                        statement: statement.name)
                }
                rows[group.reads[Int(position) - 1]].append((try row.decode(1, as: Int64.self), row))
            }
        }
        return try zip(reads, rows).map { (read, found) throws(PGError) -> [OwnLayerChange]? in
            var changes: [OwnLayerChange] = []
            for (version, row) in found.sorted(by: { $0.version < $1.version }) {
                let expected = changes.last?.version ?? read.after
                guard expected < Int64.max, version == expected + 1 else { return changes.isEmpty ? nil : changes }
                changes.append(try loggedChange(row, version: version, of: read.user))
            }
            return changes
        }
    }

    /// One row of `ownChangesAfter` (its columns from the second on) as the change it logged.
    private static func loggedChange(_ row: PGRow, version: Int64, of user: UserID) throws(PGError) -> OwnLayerChange {
        let nodes: [OwnLayerChange.Node]
        let dismissed: [Int64]
        let seen: [Int64]
        let mutes: [MutedNode]?
        do {
            nodes = try OwnLayerChange.Node.decodeLog(try row.decode(3, as: String.self))
            dismissed = try OwnLayerChange.decodeBroadcastLog(try row.decode(4, as: String.self))
            seen = try OwnLayerChange.decodeBroadcastLog(try row.decode(5, as: String.self), of: "seens")
            mutes = try row.decode(6, as: String?.self).map { text throws(ChangeLogFormatError) in try MutedNode.decodeLog(text) }
        } catch {
            throw PGError(
                code: .decoding, message: "the change log of \(user.rawValue) at version \(version) cannot be read: \(error)",
                statement: BadgeSQL.ownChangesAfter.shipped.name)
        }
        return OwnLayerChange(
            version: version, broadcastVersion: try row.decode(2, as: Int64.self), nodes: nodes, dismissed: dismissed,
            seenBroadcasts: seen, mutes: mutes)
    }

    /// The logged changes of the set of active broadcasts after version `after` up to
    /// `through`, in order (versions the log no longer has are missing).
    public static func broadcastChanges(after: Int64, through: Int64, on connection: PGConnection) throws(PGError) -> [BroadcastSetChange] {
        var changes: [Int64: BroadcastSetChange] = [:]
        for row in try connection.query(BadgeSQL.readBroadcastChanges, [after, through]).rows {
            let version = try row.decode(0, as: Int64.self)
            var change = changes[version] ?? BroadcastSetChange(version: version, added: [], withdrawn: [])
            if let added = try row.decode(1, as: Bool?.self) {
                let broadcast = try storedBroadcast(row, from: 2)
                if added { change.added.append(broadcast) } else { change.withdrawn.append(broadcast) }
            }
            changes[version] = change
        }
        return changes.values.sorted { $0.version < $1.version }
    }

    /// The broadcast version and the active broadcasts, in one snapshot.
    public static func readBroadcastSet(on connection: PGConnection) throws(PGError) -> BroadcastSet {
        var set = BroadcastSet(version: 0, active: [:])
        for row in try connection.query(BadgeSQL.readBroadcastSet).rows {
            if try row.decode(0, as: Int32.self) == 0 {
                set.version = try row.decode(1, as: Int64.self)
            } else {
                let broadcast = try storedBroadcast(row, from: 1)
                set.active[broadcast.id] = broadcast
            }
        }
        return set
    }

    /// Deletes change-log records older than `cutoff`, up to `limit` of each kind per call (so
    /// no call holds locks long); returns how many went, and how many of them the change feed
    /// had not published.
    @discardableResult
    public static func pruneChangeLog(
        olderThan cutoff: Date, limit: Int, on connection: PGConnection
    ) throws(PGError) -> (pruned: Int, unpublished: Int) {
        var pruned = 0, unpublished = 0
        var prunes: [(PGStatement, [any PGBindable])] = [(BadgeSQL.pruneOwnChanges, [cutoff, limit])]
        if try citusInstalled(on: connection) {
            prunes = []
            var users: [String] = [], versions: [Int64] = []
            for row in try connection.query(BadgeSQL.pruneOwnChangesDistributed, [cutoff, limit]).rows {
                users.append(try row.decode(0, as: String.self))
                versions.append(try row.decode(1, as: Int64.self))
            }
            pruned += users.count
            for row in try connection.query(BadgeSQL.dropFromFeedOutbox, [users, versions]).rows where try row.decode(0, as: Bool.self) {
                unpublished += 1
            }
        }
        prunes.append((BadgeSQL.pruneBroadcastChanges, [cutoff, limit]))
        for (statement, parameters) in prunes {
            for row in try connection.query(statement, parameters).rows {
                pruned += 1
                if try row.decode(0, as: Bool.self) { unpublished += 1 }
            }
        }
        return (pruned, unpublished)
    }

    /// How many records the change log holds, as PostgreSQL estimates it.
    public static func changeLogSize(on connection: PGConnection) throws(PGError) -> Int64 {
        try connection.query(BadgeSQL.changeLogSize).rows.first?.decode(0, as: Int64.self) ?? 0
    }

    /// Muted nodes as `user_version.mutes` and the change log keep them (NULL: none).
    static func storedMutes(_ text: String?, of user: UserID, statement: PGStatement) throws(PGError) -> [MutedNode] {
        guard let text else { return [] }
        do {
            return try MutedNode.decodeLog(text)
        } catch {
            throw PGError(code: .decoding, message: "the muted nodes of \(user.rawValue) cannot be read: \(error)", statement: statement.name)
        }
    }

    static func storedPath(_ row: PGRow, _ column: Int) throws(PGError) -> BadgePath {
        let text = try row.decode(column, as: String.self)
        guard let path = try? BadgePath(validating: text) else {
            throw PGError(code: .decoding, message: "stored path '\(text.prefix(80))' is not a valid badge path", statement: "badges.read")
        }
        return path
    }

    static func storedIcon(_ text: String?) -> BadgeIcon? {
        text.flatMap { try? BadgeIcon(validating: $0) }
    }

    /// The aggregate in three columns from `column` (count, icon, unseen); nil when the count is NULL.
    private static func storedAggregate(_ row: PGRow, from column: Int) throws(PGError) -> BadgeAggregate? {
        guard let count = try row.decode(column, as: Int64?.self) else { return nil }
        return BadgeAggregate(
            count: count, icon: storedIcon(try row.decode(column + 1, as: String?.self)),
            unseen: try row.decode(column + 2, as: Int64?.self) ?? 0)
    }

    /// The broadcast in four columns from `column` (id, path, count, icon).
    private static func storedBroadcast(_ row: PGRow, from column: Int) throws(PGError) -> BroadcastBadge {
        BroadcastBadge(
            id: try row.decode(column, as: Int64.self), path: try storedPath(row, column + 1),
            count: try row.decode(column + 2, as: Int64.self), icon: storedIcon(try row.decode(column + 3, as: String?.self)))
    }
}
