import BadgeCore
import LibPQ

/// Visible roots (the own root with the broadcasts merged in) on Citus: the change log's and push's.
///
/// Elsewhere a round's statement merges the active broadcasts into each logged root itself
/// (`badge_plain_root`, `badge_visible_root`: migration 0014). Citus runs neither inside a
/// statement it sends to a shard: it plans no call with parameters of a SQL function that reads
/// distributed tables, and refuses a distributed query (every table read, reference tables
/// too) from a function a shard's statement calls (docs/SHARDING.md, "What Citus refuses"). So
/// on Citus the round logs the user's own root, and this step, in the round's transaction,
/// reads what the merge needs a shard of users at a time and sets the logged roots to the
/// model's merge (`BadgeAggregate.merge`, the rule those functions follow).
extension BadgeStore {
    /// Sets the root totals of the change-log records of `versions` (user → the version the
    /// round just made) to their own root with the active broadcasts the user has not cleared
    /// by that version merged in under the modes and the version's mutes. The caller holds the
    /// users' rollup locks and the shared broadcast lock.
    static func mergeBroadcastsIntoLoggedRoots(_ versions: [UserID: Int64], moded: Bool, on connection: PGConnection) throws(PGError) {
        guard !versions.isEmpty else { return }
        let set = try readBroadcastSet(on: connection)
        guard !set.active.isEmpty else { return }
        let modes = moded ? try aggregationModes(on: connection) : .none
        for group in try usersByShard(versions.keys.map(\.rawValue), on: connection) {
            var users: [String] = []
            var numbers: [Int64] = []
            var counts: [Int64] = []
            var unseens: [Int64] = []
            for (name, root) in try visibleRoots(ofShard: group, broadcasts: set, modes: modes, on: connection) {
                guard let user = try? UserID(validating: name), let version = versions[user], root.ownVersion == version else { continue }
                users.append(name)
                numbers.append(version)
                counts.append(root.count)
                unseens.append(root.unseen)
            }
            if !users.isEmpty {
                try connection.query(BadgeSQL.citusSetLoggedRoots, [group, users, numbers, counts, unseens])
            }
        }
    }

    /// A user's visible root now, as the change log counts it.
    struct VisibleRoot {
        /// The user's own version (0: none yet).
        var ownVersion: Int64
        /// The visible version: own plus the broadcast version.
        var visibleVersion: Int64
        var count: Int64
        var unseen: Int64
    }

    /// The visible root now of each of `users` (the users of one Citus shard): their own root
    /// with the active broadcasts of `broadcasts` they have not cleared by their version merged
    /// in under `modes` and the version's mutes (`BadgeAggregate.merge`, the rule of
    /// `badge_visible_root`, which Citus runs only on the coordinator: docs/SHARDING.md).
    /// Read in three statements for the shard.
    static func visibleRoots(
        ofShard users: [String], broadcasts: BroadcastSet, modes: AggregationModes, on connection: PGConnection
    ) throws(PGError) -> [(String, VisibleRoot)] {
        var states: [String: UserRootState] = [:]
        for name in users { states[name] = UserRootState(version: 0, through: 0, muted: []) }
        for row in try connection.query(BadgeSQL.citusVersionsOfShard, [users]).rows {
            let name = try row.decode(0, as: String.self)
            guard let user = try? UserID(validating: name) else { continue }
            let mutes = try storedMutes(try row.decode(3, as: String?.self), of: user, statement: BadgeSQL.citusVersionsOfShard)
            states[name] = UserRootState(
                version: try row.decode(1, as: Int64.self), through: try row.decode(2, as: Int64.self), muted: Set(mutes.map(\.path)))
        }
        if !broadcasts.active.isEmpty {
            for row in try connection.query(BadgeSQL.citusDismissalsOfShard, [users, broadcasts.active.keys.sorted()]).rows {
                let name = try row.decode(0, as: String.self)
                guard let shownIn = try row.decode(2, as: Int64?.self), shownIn <= states[name]?.through ?? 0 else { continue }
                let id = try row.decode(1, as: Int64.self)
                if try row.decode(3, as: Bool.self) { states[name]?.cleared.insert(id) } else { states[name]?.seen.insert(id) }
            }
        }
        // The nodes the merge looks at: the root, each broadcast's node and their ancestors.
        let chains = Set(["root"] + broadcasts.active.values.map(\.path.rawValue)).sorted()
        for row in try connection.query(BadgeSQL.citusChainAggregatesOfShard, [users, chains]).rows {
            let name = try row.decode(0, as: String.self)
            states[name]?.aggregates[try storedPath(row, 1)] = BadgeAggregate(
                count: try row.decode(2, as: Int64.self), unseen: try row.decode(3, as: Int64?.self) ?? 0)
        }
        return users.compactMap { name in
            guard var state = states[name] else { return nil }
            BadgeAggregate.merge(
                broadcasts.active.values.filter { !state.cleared.contains($0.id) }, seen: state.seen, into: &state.aggregates,
                modes: modes, muted: state.muted)
            let root = state.aggregates[.root]
            let (visible, overflow) = state.version.addingReportingOverflow(broadcasts.version)
            return (
                name,
                VisibleRoot(
                    ownVersion: state.version, visibleVersion: overflow ? .max : visible, count: root?.count ?? 0, unseen: root?.unseen ?? 0))
        }
    }

    /// What the merge of one user's root reads.
    private struct UserRootState {
        /// The user's own version (0: none).
        var version: Int64
        /// How far the version's writes reach: dismissals numbered up to it count.
        var through: Int64
        /// The version's muted nodes.
        var muted: Set<BadgePath>
        var cleared: Set<Int64> = []
        var seen: Set<Int64> = []
        /// The user's aggregates at the root and on the broadcasts' chains.
        var aggregates: [BadgePath: BadgeAggregate] = [:]
    }
}

extension BadgeSQL {
    /// Of the users `$1` (one Citus shard), each one's version, how far its writes reach (a
    /// version from before migration 0007 reaches its own number), and its mute list.
    static let citusVersionsOfShard = PGStatement(
        "badges.versions_of_shard",
        "SELECT v.user_id, v.version, coalesce(v.writes_through, v.version), v.mutes::text FROM user_version v WHERE v.user_id = ANY($1::text[])")

    /// The clears (true) and seens (false) by the users `$1` (one Citus shard) of the broadcasts
    /// `$2`, with the write that made each.
    static let citusDismissalsOfShard = PGStatement(
        "badges.broadcast_dismissals_of_shard",
        """
        SELECT c.user_id, c.broadcast_id, c.shown_in, true FROM broadcast_clear c
        WHERE c.user_id = ANY($1::text[]) AND c.broadcast_id = ANY($2::bigint[])
        UNION ALL
        SELECT s.user_id, s.broadcast_id, s.shown_in, false FROM broadcast_seen s
        WHERE s.user_id = ANY($1::text[]) AND s.broadcast_id = ANY($2::bigint[])
        """)

    /// The aggregates of the users `$1` (one Citus shard) at the nodes `$2` and their ancestors.
    static let citusChainAggregatesOfShard = PGStatement(
        "badges.chain_aggregates_of_shard",
        "SELECT a.user_id, a.path::text, a.count, a.unseen FROM badge_aggregate a WHERE a.user_id = ANY($1::text[]) AND a.path @> ANY($2::ltree[])")

    /// Sets the root totals of the change-log records (`$2[i]`, `$3[i]`) to (`$4[i]`, `$5[i]`);
    /// `$1`: the users of the Citus shard they are in.
    static let citusSetLoggedRoots = PGStatement(
        "badges.set_logged_roots_of_shard",
        """
        UPDATE badge_change c SET root_count = u.count, root_unseen = u.unseen
        FROM unnest($2::text[], $3::bigint[], $4::bigint[], $5::bigint[]) AS u(user_id, version, count, unseen)
        WHERE c.user_id = u.user_id AND c.version = u.version AND c.user_id = ANY($1::text[])
        """)
}
