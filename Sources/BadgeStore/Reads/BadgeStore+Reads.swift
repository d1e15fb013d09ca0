public import BadgeCore
public import LibPQ

extension BadgeStore {
    /// One user's view of the subtree at `path`, down to `depth` levels below it (`nil`: all):
    /// their own aggregates, the active broadcasts within it and the ones they dismissed or saw, the
    /// nodes they muted that concern it, with both versions. One statement, one snapshot.
    public static func readView(
        for user: UserID, within path: BadgePath = .root, depth: Int? = nil, on connection: PGConnection
    ) throws(PGError) -> UserView {
        let levelsBelow = min(max(depth ?? BadgePath.maximumDepth, 0), BadgePath.maximumDepth)
        let maximumLevel = path.depth + 1 + levelsBelow
        let result = try connection.query(BadgeSQL.readTree, [user.rawValue, path.rawValue, maximumLevel])
        var view = UserView(path: path, depth: depth, userVersion: 0, broadcastVersion: 0, aggregates: [:], broadcasts: [:], dismissed: [])
        var modes: [(position: Int64, entry: AggregationModes.Entry)] = []
        for row in result.rows {
            let kind = try row.decode(0, as: Int32.self)
            if kind == 3 {
                if let entry = storedMode(pattern: try row.decode(3, as: String.self), mode: try row.decode(5, as: String.self)) {
                    modes.append((try row.decode(1, as: Int64.self), entry))
                }
                continue
            }
            if kind == 0 {
                view.userVersion = try row.decode(1, as: Int64.self)
                view.broadcastVersion = try row.decode(2, as: Int64.self)
                view.mutes = try storedMutes(try row.decode(3, as: String?.self), of: user, statement: BadgeSQL.readTree).filter {
                    $0.concerns(path)
                }
                continue
            }
            let nodePath = try storedPath(row, 3)
            let count = try row.decode(4, as: Int64.self)
            let icon = storedIcon(try row.decode(5, as: String?.self))
            if kind == 1 {
                view.aggregates[nodePath] = BadgeAggregate(count: count, icon: icon, unseen: try row.decode(6, as: Int64.self))
            } else {
                let id = try row.decode(1, as: Int64.self)
                view.broadcasts[id] = BroadcastBadge(id: id, path: nodePath, count: count, icon: icon)
                switch try row.decode(2, as: Int64.self) {
                case 1: view.dismissed.insert(id)
                case 2: view.seenBroadcasts.insert(id)
                default: break
                }
            }
        }
        view.modes = AggregationModes(entries: modes.sorted { $0.position < $1.position }.map(\.entry))
        return view
    }

    /// One user's visible version and the aggregates of the shown nodes within `path`, down to
    /// `depth` levels below it (`nil`: all), with the broadcasts the user has not dismissed
    /// merged in (``readView(for:within:depth:on:)``, merged).
    ///
    /// The version is the user's own version plus the broadcast version: both only grow, so it
    /// grows with every change the user can see.
    public static func readAggregates(
        for user: UserID, within path: BadgePath = .root, depth: Int? = nil, on connection: PGConnection
    ) throws(PGError) -> (version: Int64, aggregates: [BadgePath: BadgeAggregate]) {
        let view = try readView(for: user, within: path, depth: depth, on: connection)
        return (view.version, view.visibleAggregates)
    }

    /// The SQL of the tree read (`$1` user, `$2` subtree path, `$3` deepest `nlevel`), for
    /// `reddot bench query`'s pgbench comparison of the same statement.
    public static var treeQuerySQL: String { BadgeSQL.readTree.sql }

    /// Whether anything was ever stored for `user` (a version or own state). A user who never
    /// had a badge still sees the broadcasts; the API answers such a user as missing to anyone
    /// but themselves.
    public static func userExists(_ user: UserID, on connection: PGConnection) throws(PGError) -> Bool {
        try connection.query(BadgeSQL.userExists, [user.rawValue]).rows.first?.decode(0, as: Bool.self) ?? false
    }

    /// One user's tree (or the subtree at `path`, down to `depth`) in the answer shape.
    public func tree(for user: UserID, at path: BadgePath = .root, depth: Int? = nil) async throws -> UserBadgeTree {
        let display = self.display
        return try await pool.withConnection { connection in
            let view = try Self.readView(for: user, within: path, depth: depth, on: connection)
            return UserBadgeTree(
                user: user, version: view.version, aggregates: view.visibleAggregates, at: path, depth: depth, display: display,
                mutes: view.mutes)
        }
    }
}
