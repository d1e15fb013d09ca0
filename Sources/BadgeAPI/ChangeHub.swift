public import BadgeCore
import BadgeStore
import Foundation
public import LibPQ
public import Logging
import Metrics
public import ServiceLifecycle
import Synchronization

/// One `LISTEN` connection per process (for a server that reads from a hot standby, a
/// ``ReplicaListener`` that releases each notification once the standby has replayed it),
/// fanned out to the requests waiting for a user's tree to change (long-polls and streams).
///
/// A notification for a user wakes that user's subscribers ("read again": they re-read the tree
/// and compare versions, so a spurious or coalesced wake-up is harmless). A broadcast change is
/// read once per process from the change log (DESIGN §6a) into the hub's ``broadcastSet``, and
/// every subscriber wakes to rebase the view it holds on it, without a database read of its own;
/// when the log cannot be followed, or the listener reconnects (notifications may have been
/// missed), every subscriber wakes to read again.
///
/// The same notifications keep the process's ``TreeCache`` current, and count each user's
/// changes for the streams that follow the user's change log (``ownChanges(for:after:)``: one
/// read of the log per user and burst of notifications, shared by the user's streams, and the
/// reads of the users that woke together gathered into one statement, ``LogReadBatches``).
///
/// A hub made without a database is fed directly, by ``userChanged(_:)`` and
/// ``everyoneChanged()`` (``InMemoryBadgeStore`` does so after each change).
public final class ChangeHub: Service, Sendable {
    /// Where it learns of changes; nil for a hub fed directly.
    private let source: Source?
    /// Whole-tree answers, invalidated by this hub's notifications.
    let treeCache: TreeCache
    /// The user notifications counted for streams, and their shared reads of the change log.
    let logReads = UserLogReads()
    /// Those reads of many users at about the same time, gathered into one read of the database.
    let logBatches = LogReadBatches()
    private let logger: Logger
    private let state = Mutex(State())
    private let subscriberGauge = Gauge(label: "reddot_api_subscribers")
    private let notifications = Counter(label: "reddot_api_notifications_total")
    private let broadcastReads = Counter(label: "reddot_api_broadcast_reads_total")
    /// Where broadcast changes are read (set by ``attach(store:display:)``), and the set of
    /// active broadcasts as of the last change read (nil: not known, subscribers read again).
    private let broadcasts = Mutex<(store: (any BadgeAPIStore)?, set: BroadcastSet?)>((nil, nil))

    private struct State {
        var nextID: UInt64 = 0
        var byUser: [UserID: [UInt64: AsyncStream<Wake>.Continuation]] = [:]
        var count = 0
        var listening = false
        /// After `run()` returned: new subscriptions end at once (the process is shutting down).
        var stopped = false
    }

    /// A hub listening on `BadgeStore.changeChannel` with `configuration`'s database, keeping up
    /// to `treeCacheBytes` of whole-tree answers (0: none), each served for at most
    /// `treeCacheMaximumAge`.
    ///
    /// - Throws: `PGError` only for an invalid channel name (a programming error).
    public init(
        configuration: PGConfiguration, treeCacheBytes: Int = 0, treeCacheMaximumAge: Duration = .seconds(60), logger: Logger
    ) throws(PGError) {
        self.source = .listener(try PGListener(configuration: configuration, channels: [BadgeStore.changeChannel], logger: logger))
        self.treeCache = TreeCache(budgetBytes: treeCacheBytes, maximumAge: treeCacheMaximumAge)
        self.logger = logger
    }

    /// A hub that learns of changes from `listener`: the primary's notifications, each once the
    /// hot standby the reads go to has replayed it (a standby cannot `LISTEN`), keeping up to
    /// `treeCacheBytes` of whole-tree answers as the other initializer does.
    public init(
        following listener: ReplicaListener, treeCacheBytes: Int = 0, treeCacheMaximumAge: Duration = .seconds(60), logger: Logger
    ) {
        self.source = .replica(listener)
        self.treeCache = TreeCache(budgetBytes: treeCacheBytes, maximumAge: treeCacheMaximumAge)
        self.logger = logger
    }

    /// A hub with no database: it counts as listening from the start, and learns of changes only
    /// through ``userChanged(_:)`` and ``everyoneChanged()``.
    public init(treeCacheBytes: Int = 0, treeCacheMaximumAge: Duration = .seconds(60), logger: Logger) {
        self.source = nil
        self.treeCache = TreeCache(budgetBytes: treeCacheBytes, maximumAge: treeCacheMaximumAge)
        self.logger = logger
        treeCache.invalidateAll(listening: true)
        state.withLock { $0.listening = true }
    }

    /// Reads broadcast changes from `store` (the API's), and renders cached trees with `display`.
    /// Until then (and for a hub fed directly) a broadcast change wakes every subscriber to read again.
    public func attach(store: any BadgeAPIStore, display: BadgeDisplay) {
        broadcasts.withLock { $0.store = store }
        treeCache.setDisplay(display)
    }

    /// The set of active broadcasts as of the last broadcast change this hub read; nil when not
    /// known (then read the tree again).
    public var broadcastSet: BroadcastSet? { broadcasts.withLock { $0.set } }

    /// `user`'s tree may have changed: what a notification on the change channel says.
    public func userChanged(_ user: UserID) {
        logReads.notified(user, version: nil)
        deliver(.user(user))
    }

    /// This server changed `user`'s tree (an action through the API): what their notification
    /// will do, done now, so that the next read here sees the change without waiting for it
    /// (the cached tree is no longer served, and no read of the log that began before joins).
    func changedHere(_ user: UserID) {
        logReads.notified(user, version: nil)
        treeCache.invalidate(user)
    }

    /// `user`'s logged own versions after own version `after`, in order: one read of the change
    /// log for all the user's streams that ask at about the same time. Nil when the hub has no
    /// store, the store keeps no log, the log does not reach back, or a read failed: read the
    /// tree instead.
    func ownChanges(for user: UserID, after: Int64) async -> [OwnLayerChange]? {
        guard let store = broadcasts.withLock({ $0.store }) else { return nil }
        return await logReads.changes(for: user, after: after) { after, limit in
            await logBatches.read(LogRead(user: user, after: after)) { reads in
                try await store.ownChanges(of: reads, limit: limit, deadline: .now + .seconds(5))
            }
        }
    }

    /// `view` (of `user`'s tree or a subtree) with the user's versions logged since applied, and
    /// rebased on the hub's set of broadcasts when that is newer: what a read would give, along
    /// the versions the user's tree went through (``UserView/applying(_:broadcasts:)``). Nil
    /// when the log cannot be followed from there: read instead.
    func followLog(of user: UserID, from view: UserView) async -> UserView? {
        // The set is taken before the log is read: every own version made before the set's
        // broadcast version is then in the log read, and the view can move to that set.
        let set = broadcastSet
        guard let changes = await ownChanges(for: user, after: view.userVersion) else { return nil }
        var next = view
        for change in changes {
            guard let applied = next.applying(change, broadcasts: set) else { return nil }
            next = applied
        }
        if let set, set.version > next.broadcastVersion {
            guard let rebased = next.rebased(on: set) else { return nil }
            next = rebased
        }
        return next
    }

    /// Every user's tree may have changed (a broadcast).
    public func everyoneChanged() { deliver(.broadcasts(nil)) }

    /// How often whole-tree reads were answered from the cache, since the start.
    public var treeCacheStatistics: TreeCacheStatistics { treeCache.statistics }

    /// Whether the listener is connected (for `/readyz`).
    public var isListening: Bool { state.withLock { $0.listening } }

    /// Listens and dispatches until cancelled or shut down.
    public func run() async throws {
        if let source {
            await follow(source)
        } else {
            // Fed directly: nothing to run until the service group stops.
            try? await gracefulShutdown()
        }
        treeCache.invalidateAll(listening: false)
        // Wake everyone so that waiting requests end.
        let all = state.withLock { state in
            state.listening = false
            state.stopped = true
            return state.byUser.values.flatMap(\.values)
        }
        for continuation in all { continuation.finish() }
    }

    private func follow(_ source: Source) async {
        // Broadcast changes are read by a task of their own, in order, so that a read of the
        // log never delays users' notifications.
        let (targets, follow) = AsyncStream.makeStream(of: Int64?.self)
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await source.run() }
            group.addTask {
                for await version in targets { await self.followBroadcasts(to: version) }
            }
            group.addTask {
                await withGracefulShutdownHandler {
                    switch source {
                    case .listener(let listener):
                        for await event in listener.events { self.dispatch(event, follow: follow) }
                    case .replica(let listener):
                        for await signal in listener.signals { self.dispatch(signal, follow: follow) }
                    }
                } onGracefulShutdown: {
                    source.stop()
                }
                follow.finish()
            }
            await group.waitForAll()
        }
    }

    private func dispatch(_ event: PGListener.Event, follow: AsyncStream<Int64?>.Continuation) {
        switch event {
        case .disconnected: lost()
        case .connected: connected(follow: follow)
        case .notification(let notification):
            notifications.increment()
            guard let change = ChangeNotification(payload: notification.payload) else {
                // Not a payload this build writes: something changed, nobody knows what.
                treeCache.invalidateAll(listening: true)
                return
            }
            switch change {
            case .user(let user, let version): userChanged(user, version: version)
            case .broadcasts(let version): follow.yield(version)
            }
        }
    }

    private func dispatch(_ signal: ReplicaListener.Signal, follow: AsyncStream<Int64?>.Continuation) {
        switch signal {
        case .disconnected: lost()
        case .connected: connected(follow: follow)
        case .unknown:
            notifications.increment()
            treeCache.invalidateAll(listening: true)
        case .user(let user, let version):
            notifications.increment()
            userChanged(user, version: version)
        case .broadcasts(let version):
            notifications.increment()
            follow.yield(version)
        }
    }

    /// Until the source is back, nothing tells the cache what changed.
    private func lost() {
        treeCache.invalidateAll(listening: false)
        broadcasts.withLock { $0.set = nil }
        state.withLock { $0.listening = false }
    }

    /// Changes made while the source was away (or too many to list) are not known: everyone reads again.
    private func connected(follow: AsyncStream<Int64?>.Continuation) {
        treeCache.invalidateAll(listening: true)
        state.withLock { $0.listening = true }
        logReads.notifiedEveryone()
        wakeEveryone(.change)
        follow.yield(nil)
    }

    private func userChanged(_ user: UserID, version: Int64?) {
        logReads.notified(user, version: version)
        deliver(.user(user))
    }

    /// Reads what changed in the set of active broadcasts up to `version` (nil: read the whole
    /// set), once for the process, and wakes every subscriber to rebase on it; when that cannot
    /// be done, empties the cache and wakes every subscriber to read again.
    private func followBroadcasts(to version: Int64?) async {
        let (store, current) = broadcasts.withLock { ($0.store, $0.set) }
        guard let store else {
            deliver(.broadcasts(version))
            return
        }
        if let version, let current, version <= current.version { return }
        let deadline = ContinuousClock.now + .seconds(5)
        do {
            var next: BroadcastSet?
            if let version, let current {
                next = current
                for change in try await store.broadcastChanges(after: current.version, through: version, deadline: deadline) {
                    next = next?.applying(change)
                }
                broadcastReads.increment()
                if next?.version != version { next = nil }
            }
            let set: BroadcastSet
            if let next {
                set = next
            } else {
                set = try await store.broadcastSet(deadline: deadline)
                broadcastReads.increment()
            }
            let moved = broadcasts.withLock { state -> Bool in
                if let known = state.set, known.version >= set.version { return false }
                state.set = set
                return true
            }
            guard moved else { return }
            treeCache.setBroadcasts(set)
            wakeEveryone(.broadcasts)
        } catch {
            logger.info("reading the broadcast change failed; every tree is read again", metadata: [RedDotLogKey.error: "\(error)"])
            broadcasts.withLock { $0.set = nil }
            treeCache.setBroadcasts(nil)
            deliver(.broadcasts(version))
        }
    }

    private func wakeEveryone(_ wake: Wake) {
        let all = state.withLock { state in state.byUser.values.flatMap(\.values) }
        for continuation in all { continuation.yield(wake) }
    }

    /// Empties the cache of what `change` concerns and wakes its subscribers to read again.
    private func deliver(_ change: Change) {
        switch change {
        case .user(let user): treeCache.invalidate(user)
        case .broadcasts: treeCache.invalidateAll(listening: true)
        }
        let targets: [AsyncStream<Wake>.Continuation] = state.withLock { state in
            switch change {
            case .user(let user): return Array((state.byUser[user] ?? [:]).values)
            case .broadcasts: return state.byUser.values.flatMap(\.values)
            }
        }
        for continuation in targets { continuation.yield(.change) }
    }

    /// Where a hub learns of changes.
    private enum Source: Sendable {
        case listener(PGListener)
        case replica(ReplicaListener)

        func run() async {
            switch self {
            case .listener(let listener): await listener.run()
            case .replica(let listener): await listener.run()
            }
        }

        func stop() {
            switch self {
            case .listener(let listener): listener.stop()
            case .replica(let listener): listener.stop()
            }
        }
    }

    /// Why a subscriber wakes: a possible change (read again), a new ``broadcastSet`` (rebase
    /// the view held on it), or its own timer.
    enum Wake: Sendable, Equatable {
        case change
        case broadcasts
        case tick
    }

    enum Change: Equatable {
        case user(UserID)
        /// The broadcast version moved (to this one, when the payload says).
        case broadcasts(Int64?)
    }

    /// Wake-ups for `user` until the returned stream is dropped or `cancel` is called: each
    /// element means "the tree may have changed" (consecutive ones coalesce).
    func subscribe(_ user: UserID) -> Subscription {
        let (stream, continuation) = AsyncStream.makeStream(of: Wake.self, bufferingPolicy: .bufferingNewest(8))
        let id: UInt64? = state.withLock { state in
            if state.stopped { return nil }
            state.nextID += 1
            state.byUser[user, default: [:]][state.nextID] = continuation
            state.count += 1
            return state.nextID
        }
        guard let id else {
            continuation.finish()
            return Subscription(stream: stream, continuation: continuation)
        }
        logReads.watch(user)
        subscriberGauge.record(state.withLock { $0.count })
        continuation.onTermination = { [weak self] _ in self?.remove(user, id) }
        return Subscription(stream: stream, continuation: continuation)
    }

    /// How many subscriptions `user` has now (tests wait for a request to be parked).
    func subscribers(of user: UserID) -> Int {
        state.withLock { $0.byUser[user]?.count ?? 0 }
    }

    private func remove(_ user: UserID, _ id: UInt64) {
        let (count, removed) = state.withLock { state in
            let removed = state.byUser[user]?.removeValue(forKey: id) != nil
            if removed { state.count -= 1 }
            if state.byUser[user]?.isEmpty == true { state.byUser[user] = nil }
            return (state.count, removed)
        }
        if removed { logReads.unwatch(user) }
        subscriberGauge.record(count)
    }

    /// A subscriber's wake-ups; `cancel()` (or dropping the iterator's task) unsubscribes.
    struct Subscription: Sendable {
        let stream: AsyncStream<Wake>
        let continuation: AsyncStream<Wake>.Continuation

        func cancel() { continuation.finish() }
    }
}
