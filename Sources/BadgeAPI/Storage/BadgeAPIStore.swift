public import BadgeCore
public import BadgeStore

/// What the query service needs from storage: one user's version and aggregates, whether a user
/// exists, clears, and whether the storage is ready.
///
/// `BadgeStore` (PostgreSQL) is the production implementation; ``InMemoryBadgeStore`` keeps the
/// same rules in memory, so the routes can be tested without a database. Every call takes the
/// instant by which it must answer; an implementation that cannot answer by then throws (the API
/// answers 503 for `PGError` timeouts and connection failures, and for ``APIError``s it throws).
public protocol BadgeAPIStore: Sendable {
    /// `user`'s view of the subtree at `path`, down to `depth` levels below it (`nil`: all):
    /// their own aggregates, the active broadcasts within it and the ones they dismissed, at
    /// their own version and the broadcast version (one snapshot), at least as new as `floor`
    /// asks (a store that reads one database meets every floor).
    func readView(
        for user: UserID, within path: BadgePath, depth: Int?, floor: ReadFloor, deadline: ContinuousClock.Instant
    ) async throws -> UserView

    /// The broadcast version and the active broadcasts (one snapshot).
    func broadcastSet(deadline: ContinuousClock.Instant) async throws -> BroadcastSet

    /// The logged changes of the set of active broadcasts after version `after` up to
    /// `through`, in order; versions the log no longer has are missing.
    func broadcastChanges(after: Int64, through: Int64, deadline: ContinuousClock.Instant) async throws -> [BroadcastSetChange]

    /// `user`'s logged own versions after own version `after`, in order, up to `limit` of them
    /// (each with its changed nodes and the broadcasts it dismissed), for a stream that follows
    /// the user by applying them; empty when there is nothing newer, nil when the log does not
    /// hold the next version or is not kept: the stream reads the tree instead.
    func ownChanges(for user: UserID, after: Int64, limit: Int, deadline: ContinuousClock.Instant) async throws -> [OwnLayerChange]?

    /// What ``ownChanges(for:after:limit:deadline:)`` answers for each of `reads`, in their
    /// order: the reads of many users' streams that woke together, as one read where the store
    /// can (the default asks for each in turn).
    func ownChanges(of reads: [LogRead], limit: Int, deadline: ContinuousClock.Instant) async throws -> [[OwnLayerChange]?]

    /// `user`'s visible aggregates (the whole tree, broadcasts merged in) and muted nodes at
    /// visible version `since` and at every version after it up to now, in order, each with its
    /// version (with `stepwise` false: only at `since` and now). Nil when the change log does not
    /// reach back to `since`, `since` is later than now, or it is more than `limit` versions
    /// back: the client then needs the whole tree. The last point is at least as new as `floor`
    /// asks (a store that reads one database meets every floor).
    func history(
        for user: UserID, since: Int64, stepwise: Bool, limit: Int, floor: ReadFloor, deadline: ContinuousClock.Instant
    ) async throws -> [HistoryPoint]?

    /// Whether anything was ever stored for `user` (the API answers other users as missing).
    func userExists(_ user: UserID, deadline: ContinuousClock.Instant) async throws -> Bool

    /// Applies a user's action at `path` (a clear, with `force` of the whole subtree, or a seen)
    /// and makes the change visible at once; with `seenVersion`, only if the user's tree is still
    /// the one at that version (nothing the client did not show is cleared or marked seen); with
    /// `actionID`, only if no action of the user with that id was applied before (`.repeated`).
    func act(
        _ operation: BadgeOperation, at path: BadgePath, for user: UserID, seenVersion: Int64?, actionID: ActionID?,
        deadline: ContinuousClock.Instant
    ) async throws -> ActionOutcome

    /// Everything stored on `user`, as one JSON object (`UserData.export`).
    func exportUser(_ user: UserID, deadline: ContinuousClock.Instant) async throws -> String

    /// Removes everything stored on `user` and keeps their late events out (`UserData.erase`).
    func eraseUser(_ user: UserID, deadline: ContinuousClock.Instant) async throws -> UserData.Erasure

    /// The webhook subscriptions, by id (`WebhookStore`).
    func webhooks(deadline: ContinuousClock.Instant) async throws -> [WebhookSubscription]

    /// Stores `subscription`, replacing the one with its id; true when it is new.
    func putWebhook(_ subscription: WebhookSubscription, deadline: ContinuousClock.Instant) async throws -> Bool

    /// Removes the subscription `id` and its pending deliveries; false when there was none.
    func removeWebhook(_ id: String, deadline: ContinuousClock.Instant) async throws -> Bool

    /// Makes the dead deliveries of subscription `id` pending again; how many.
    func replayWebhook(_ id: String, deadline: ContinuousClock.Instant) async throws -> Int

    /// Registers `device` for `user` (replacing the one with its id); true when it is new.
    func registerDevice(_ device: PushDevice, for user: UserID, deadline: ContinuousClock.Instant) async throws -> Bool

    /// Removes the user's device `id`; false when there was none.
    func removeDevice(_ id: String, of user: UserID, deadline: ContinuousClock.Instant) async throws -> Bool

    /// Whether a read may answer from a replica that lags behind the writes (then the read after
    /// an action asks for ``ReadFloor/latest``). False by default.
    var readsMayLag: Bool { get }

    /// Why the storage cannot serve (unreachable, a schema this build does not expect), as
    /// sentences for `/readyz`; empty when ready.
    func readinessProblems(deadline: ContinuousClock.Instant) async -> [String]
}

extension BadgeAPIStore {
    /// One database: reads see every committed write.
    public var readsMayLag: Bool { false }

    /// Each read in turn.
    public func ownChanges(of reads: [LogRead], limit: Int, deadline: ContinuousClock.Instant) async throws -> [[OwnLayerChange]?] {
        var answers: [[OwnLayerChange]?] = []
        for read in reads { answers.append(try await ownChanges(for: read.user, after: read.after, limit: limit, deadline: deadline)) }
        return answers
    }

    /// `user`'s view, from whatever committed state the store reads (``ReadFloor/any``).
    public func readView(for user: UserID, within path: BadgePath, depth: Int?, deadline: ContinuousClock.Instant) async throws -> UserView {
        try await readView(for: user, within: path, depth: depth, floor: .any, deadline: deadline)
    }

    /// `user`'s history from whatever committed state the store reads (``ReadFloor/any``).
    public func history(
        for user: UserID, since: Int64, stepwise: Bool, limit: Int, deadline: ContinuousClock.Instant
    ) async throws -> [HistoryPoint]? {
        try await history(for: user, since: since, stepwise: stepwise, limit: limit, floor: .any, deadline: deadline)
    }

    /// `user`'s visible version and the aggregates of the shown nodes within `path`, down to
    /// `depth` levels below it (`nil`: all), broadcasts the user has not dismissed merged in.
    public func readAggregates(
        for user: UserID, within path: BadgePath, depth: Int?, floor: ReadFloor = .any, deadline: ContinuousClock.Instant
    ) async throws -> (version: Int64, aggregates: [BadgePath: BadgeAggregate]) {
        let view = try await readView(for: user, within: path, depth: depth, floor: floor, deadline: deadline)
        return (view.version, view.visibleAggregates)
    }
}

/// How new a read of a user's tree must be, for a store that may answer from a read replica
/// that lags behind the primary (``ReplicatedBadgeStore``). Visible versions only grow on the
/// primary, so a replica's answer below a version the client has seen is one it replayed
/// less of: it is answered from the primary instead.
public enum ReadFloor: Sendable, Hashable {
    /// Any committed state, however far behind.
    case any
    /// A visible version at least this one (one the client has seen, or wrote).
    case version(Int64)
    /// Everything committed before the read began: the primary's state (the read after the
    /// client's own action).
    case latest

    /// `version(v)` for a known version, `any` for nil.
    public init(atLeast version: Int64?) {
        self = version.map(ReadFloor.version) ?? .any
    }

    /// The version a read must reach; nil for none (`any`) or for the newest (`latest`).
    public var minimumVersion: Int64? {
        if case .version(let version) = self { return version }
        return nil
    }
}

/// What a user saw at one visible version (``BadgeAPIStore/history(for:since:stepwise:limit:deadline:)``).
public struct HistoryPoint: Sendable {
    /// The visible version.
    public var version: Int64
    /// The visible aggregates of the whole tree.
    public var aggregates: [BadgePath: BadgeAggregate]
    /// The user's muted nodes.
    public var mutes: [MutedNode]

    /// A point.
    public init(version: Int64, aggregates: [BadgePath: BadgeAggregate], mutes: [MutedNode] = []) {
        self.version = version
        self.aggregates = aggregates
        self.mutes = mutes
    }
}
