public import BadgeCore
public import Foundation
public import LibPQ

/// Badge state in PostgreSQL: applies operations set-based, recomputes aggregates, reads trees.
///
/// The `static` functions run on a connection the caller leased, inside the caller's transaction
/// (ingest puts them in one transaction with its offsets and dedupe); the instance methods are
/// conveniences that lease a connection and open the transaction themselves.
public struct BadgeStore: Sendable {
    /// The pool the convenience methods lease connections from.
    public let pool: PGPool
    /// How counts are displayed in answers.
    public var display: BadgeDisplay

    /// The channel `recomputeAggregates` notifies on, with `{"user": …, "version": …}`.
    public static let changeChannel = "reddot_badges"

    /// Creates a store on `pool`.
    public init(pool: PGPool, display: BadgeDisplay = BadgeDisplay()) {
        self.pool = pool
        self.display = display
    }

    /// Session settings the store's connections should use: JIT off (its compilation costs more
    /// than the rollup statements it would speed up).
    public static let recommendedSessionSettings: [(name: String, value: String)] = [("jit", "off")]

    // MARK: - writing

    /// Applies a coalesced batch: forced clears first, then every node's net write, each kind as
    /// one statement over arrays; then the batch's clears dismiss, for their users, the active
    /// broadcasts they hit. Does not mark users dirty (see `markDirty`).
    ///
    /// - Returns: the own-state rows written or deleted, and the users who dismissed a broadcast
    ///   (pass them as `bumping` to `markDirty` or `recomputeAggregates`: their view changed
    ///   though no aggregate did).
    @discardableResult
    public static func apply(_ batch: BadgeBatch, on connection: PGConnection) throws(PGError) -> BadgeApplyOutcome {
        var outcome = BadgeApplyOutcome()
        outcome.touchedRows = try applyOwnState(batch, on: connection)
        let dismissals = batch.dismissals
        if !dismissals.isEmpty {
            var users: Set<UserID> = []
            let result = try connection.query(
                BadgeSQL.dismissBroadcasts,
                [dismissals.map(\.user.rawValue), dismissals.map(\.path.rawValue), dismissals.map(\.force)])
            for row in result.rows {
                if let user = try? UserID(validating: try row.decode(0, as: String.self)) { users.insert(user) }
            }
            outcome.dismissedBroadcasts = users.sorted()
        }
        return outcome
    }

    private static func applyOwnState(_ batch: BadgeBatch, on connection: PGConnection) throws(PGError) -> Int {
        var touched = 0
        let forced = batch.forcedClears
        if !forced.isEmpty {
            touched += try connection.query(
                BadgeSQL.forceClear, [forced.map(\.user.rawValue), forced.map(\.path.rawValue)]
            ).affectedRows
        }
        var clearUsers: [String] = [], clearPaths: [String] = []
        var setUsers: [String] = [], setPaths: [String] = [], setCounts: [Int64] = [], setIcons: [String?] = [], setExpiries: [Date?] = []
        var incrementUsers: [String] = [], incrementPaths: [String] = [], increments: [Int64] = [], incrementExpiries: [Date?] = []
        for (user, path, write) in batch.writes {
            switch write {
            case .clear:
                clearUsers.append(user.rawValue)
                clearPaths.append(path.rawValue)
            case .set(let count, let icon, let expiresAt):
                setUsers.append(user.rawValue)
                setPaths.append(path.rawValue)
                setCounts.append(count)
                setIcons.append(icon?.rawValue)
                setExpiries.append(expiresAt)
            case .increment(let amount, let expiresAt):
                incrementUsers.append(user.rawValue)
                incrementPaths.append(path.rawValue)
                increments.append(amount)
                incrementExpiries.append(expiresAt)
            }
        }
        if !clearUsers.isEmpty {
            touched += try connection.query(BadgeSQL.clear, [clearUsers, clearPaths]).affectedRows
        }
        if !setUsers.isEmpty {
            touched += try connection.query(BadgeSQL.set, [setUsers, setPaths, setCounts, setIcons, setExpiries]).affectedRows
        }
        if !incrementUsers.isEmpty {
            touched += try connection.query(
                BadgeSQL.increment, [incrementUsers, incrementPaths, increments, incrementExpiries]
            ).affectedRows
        }
        return touched
    }

    /// Marks users dirty so a rollup worker recomputes them; keeps the first dirty time. Users
    /// in `bumping` get a new version at their rollup even if no aggregate changes.
    public static func markDirty(_ users: [UserID], bumping: [UserID] = [], on connection: PGConnection) throws(PGError) {
        guard !users.isEmpty || !bumping.isEmpty else { return }
        let sorted = Array(Set(users.map(\.rawValue) + bumping.map(\.rawValue))).sorted()  // one lock order for every writer
        try connection.query(BadgeSQL.markDirty, [sorted, bumping.map(\.rawValue)])
    }

    /// Bumps the version of the set of active broadcasts (every user's visible version moves)
    /// and notifies `changeChannel` with `{"broadcast_version": …}`.
    ///
    /// - Returns: the new broadcast version.
    @discardableResult
    public static func bumpBroadcastVersion(on connection: PGConnection) throws(PGError) -> Int64 {
        let result = try connection.query(BadgeSQL.bumpBroadcastVersion, [changeChannel])
        guard let row = result.rows.first else {
            throw PGError(code: .decoding, message: "broadcast_version has no row (is migration 0002 applied?)", statement: "badges.bump_broadcast_version")
        }
        return try row.decode(0, as: Int64.self)
    }

    /// Recomputes the aggregates of `users` from their own state (set-based, in SQL), bumps the
    /// version of each user whose visible tree changed, notifies `changeChannel`, and removes
    /// their dirty marks.
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

    // MARK: - reading

    /// One user's visible version and the aggregates of the shown nodes within `path`, down to
    /// `depth` levels below it (`nil`: all), with the broadcasts the user has not dismissed
    /// merged in. One statement, one snapshot.
    ///
    /// The version is the user's own version plus the broadcast version: both only grow, so it
    /// grows with every change the user can see.
    public static func readAggregates(
        for user: UserID, within path: BadgePath = .root, depth: Int? = nil, on connection: PGConnection
    ) throws(PGError) -> (version: Int64, aggregates: [BadgePath: BadgeAggregate]) {
        let levelsBelow = min(max(depth ?? BadgePath.maximumDepth, 0), BadgePath.maximumDepth)
        let maximumLevel = path.depth + 1 + levelsBelow
        let result = try connection.query(BadgeSQL.readTree, [user.rawValue, path.rawValue, maximumLevel])
        var version: Int64 = 0
        var aggregates: [BadgePath: BadgeAggregate] = [:]
        var broadcasts: [BroadcastBadge] = []
        for row in result.rows {
            let kind = try row.decode(0, as: Int32.self)
            if kind == 0 {
                version = try row.decode(1, as: Int64.self)
                continue
            }
            let text = try row.decode(2, as: String.self)
            guard let nodePath = try? BadgePath(validating: text) else {
                throw PGError(code: .decoding, message: "stored path '\(text.prefix(80))' is not a valid badge path", statement: "badges.read_tree")
            }
            let count = try row.decode(3, as: Int64.self)
            let icon = try row.decode(4, as: String?.self).flatMap { try? BadgeIcon(validating: $0) }
            if kind == 1 {
                aggregates[nodePath] = BadgeAggregate(count: count, icon: icon)
            } else {
                broadcasts.append(BroadcastBadge(id: try row.decode(1, as: Int64.self), path: nodePath, count: count, icon: icon))
            }
        }
        BadgeAggregate.merge(broadcasts, into: &aggregates, within: path, maximumDepth: path.depth + levelsBelow)
        return (version, aggregates)
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

    // MARK: - conveniences

    /// Applies `mutations` in one transaction (coalesced in order), marks their users dirty, and,
    /// with `recomputeNow`, recomputes those users' aggregates in the same transaction so that a
    /// read right after sees the change.
    ///
    /// - Returns: the new version of every user whose visible tree changed (only with `recomputeNow`).
    @discardableResult
    public func apply(_ mutations: [BadgeMutation], recomputeNow: Bool) async throws -> [UserID: Int64] {
        var batch = BadgeBatch()
        for mutation in mutations { batch.append(mutation) }
        let finalBatch = batch
        return try await PGRetryPolicy().run(logger: pool.logger) {
            try await pool.withTransaction { connection in
                let outcome = try Self.apply(finalBatch, on: connection)
                if recomputeNow {
                    return try Self.recomputeAggregates(
                        for: finalBatch.users, bumping: outcome.dismissedBroadcasts, on: connection)
                }
                try Self.markDirty(finalBatch.users, bumping: outcome.dismissedBroadcasts, on: connection)
                return [:]
            }
        }
    }

    /// One user's tree (or the subtree at `path`, down to `depth`) in the answer shape.
    public func tree(for user: UserID, at path: BadgePath = .root, depth: Int? = nil) async throws -> UserBadgeTree {
        let display = self.display
        return try await pool.withConnection { connection in
            let (version, aggregates) = try Self.readAggregates(for: user, within: path, depth: depth, on: connection)
            return UserBadgeTree(
                user: user, version: version,
                tree: BadgeNode.build(aggregates: aggregates, at: path, depth: depth, display: display))
        }
    }
}

/// What `BadgeStore.apply` did.
public struct BadgeApplyOutcome: Sendable, Hashable {
    /// Own-state rows written or deleted.
    public var touchedRows = 0
    /// Users with a newly dismissed broadcast, sorted.
    public var dismissedBroadcasts: [UserID] = []

    /// An outcome with nothing done.
    public init() {}
}

/// A user's tree as answered by `reddot badges show` and the API: `{"user", "version", "tree"}`.
public struct UserBadgeTree: Sendable, Hashable, Codable {
    /// Whose tree.
    public var user: UserID
    /// The user's version; it grows with every visible change.
    public var version: Int64
    /// The requested node; `nil` (JSON `null`) for a subtree with nothing shown.
    public var tree: BadgeNode?

    /// Creates an answer.
    public init(user: UserID, version: Int64, tree: BadgeNode?) {
        self.user = user
        self.version = version
        self.tree = tree
    }

    enum CodingKeys: String, CodingKey { case user, version, tree }

    /// Encodes `tree` as an explicit `null` when nothing is shown.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(user, forKey: .user)
        try container.encode(version, forKey: .version)
        try container.encode(tree, forKey: .tree)
    }
}
