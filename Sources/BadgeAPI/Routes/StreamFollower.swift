import BadgeCore
import BadgeStore

/// What one Server-Sent Events stream of a user's subtree has sent, and how it moves on at each
/// wake-up of the ``ChangeHub``.
///
/// A change of the user's own is taken in by applying the versions the rollup logged to the
/// view the stream holds (``ChangeHub/followLog(of:from:)``: one read of the log per user and
/// burst of notifications, shared by the user's streams and cached tree, and batched with the
/// other users' reads of the moment, ``LogReadBatches``); a broadcast change
/// by rebasing that view on the hub's set of broadcasts. Each keeps the view on the path of
/// versions the user's tree went through, as a read would be (``UserView/applying(_:broadcasts:)``);
/// when that cannot be done (no view, a version the log no longer has, a broadcast version the
/// hub has not followed yet, a failed read of the log) the stream reads the tree. A broadcast
/// wake-up after a notification of the user's own that the stream has not taken in yet (its
/// wake-up dropped or still queued) takes that in first, so a view never pairs an old own
/// version with a newer broadcast version.
struct StreamFollower: Sendable {
    let user: UserID
    /// Whether own changes are followed through the log (false: the tree is read each time).
    let followsLog: Bool
    /// The tree last sent.
    private(set) var current: UserBadgeTree
    /// The view `current` was made from, when known (nil after a resume replayed from the log:
    /// the next wake-up reads).
    private(set) var view: UserView?
    /// The hub's count of the user's notifications when `view` was made.
    private var generation: UInt64

    /// A follower that has sent `current`, made from `view` at the hub's notification count
    /// `generation` (read before the view was).
    init(user: UserID, current: UserBadgeTree, view: UserView?, generation: UInt64, followsLog: Bool) {
        self.user = user
        self.current = current
        self.view = view
        self.generation = generation
        self.followsLog = followsLog
    }

    /// The `change` event to send after `wake` (not a heartbeat), nil when what the stream shows
    /// did not change. `read` reads the stream's view from the database; `render` makes the tree
    /// of a view.
    ///
    /// - Throws: what `read` throws (the view and what was sent stay as they were).
    mutating func next(
        after wake: ChangeHub.Wake, hub: ChangeHub, read: () async throws -> UserView, render: (UserView) -> UserBadgeTree
    ) async throws -> String? {
        let notifications = hub.logReads.generation(of: user)
        let held: UserView
        if wake == .broadcasts, notifications == generation, let known = view, let set = hub.broadcastSet,
            set.version <= known.broadcastVersion
        {
            return nil
        } else if wake == .broadcasts, notifications == generation, let known = view, let set = hub.broadcastSet,
            let rebased = known.rebased(on: set)
        {
            // A newer set the view can follow (else, read).
            held = rebased
        } else if followsLog, let known = view, let followed = await hub.followLog(of: user, from: known) {
            held = followed
        } else {
            held = try await read()
        }
        view = held
        generation = notifications
        let next = render(held)
        // Never back: a read from a replica may be behind what a resume read from the primary.
        guard next.version > current.version else { return nil }
        let event = StreamController.changeEvent(from: current, to: next)
        current = next
        return event
    }
}
