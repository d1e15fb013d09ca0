public import BadgeCore
import BadgeStore
import Foundation
public import LibPQ
public import Logging
import Metrics
public import ServiceLifecycle
import Synchronization

/// One `LISTEN` connection per process, fanned out to the requests waiting for a user's tree to
/// change (long-polls and streams).
///
/// A notification for a user wakes that user's subscribers; a broadcast change, or a
/// reconnection of the listener (notifications may have been missed), wakes every subscriber.
/// A wake-up only says "read again": subscribers re-read the tree and compare versions, so a
/// spurious or coalesced wake-up is harmless.
///
/// The same notifications keep the process's ``TreeCache`` current.
///
/// A hub made without a database is fed directly, by ``userChanged(_:)`` and
/// ``everyoneChanged()`` (``InMemoryBadgeStore`` does so after each change).
public final class ChangeHub: Service, Sendable {
    /// nil for a hub fed directly.
    private let listener: PGListener?
    /// Whole-tree answers, invalidated by this hub's notifications.
    let treeCache: TreeCache
    private let logger: Logger
    private let state = Mutex(State())
    private let subscriberGauge = Gauge(label: "reddot_api_subscribers")
    private let notifications = Counter(label: "reddot_api_notifications_total")

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
        self.listener = try PGListener(configuration: configuration, channels: [BadgeStore.changeChannel], logger: logger)
        self.treeCache = TreeCache(budgetBytes: treeCacheBytes, maximumAge: treeCacheMaximumAge)
        self.logger = logger
    }

    /// A hub with no database: it counts as listening from the start, and learns of changes only
    /// through ``userChanged(_:)`` and ``everyoneChanged()``.
    public init(treeCacheBytes: Int = 0, treeCacheMaximumAge: Duration = .seconds(60), logger: Logger) {
        self.listener = nil
        self.treeCache = TreeCache(budgetBytes: treeCacheBytes, maximumAge: treeCacheMaximumAge)
        self.logger = logger
        treeCache.invalidateAll(listening: true)
        state.withLock { $0.listening = true }
    }

    /// `user`'s tree may have changed: what a notification on the change channel says.
    public func userChanged(_ user: UserID) { deliver(.user(user)) }

    /// Every user's tree may have changed (a broadcast).
    public func everyoneChanged() { deliver(.broadcasts) }

    /// How often whole-tree reads were answered from the cache, since the start.
    public var treeCacheStatistics: TreeCacheStatistics { treeCache.statistics }

    /// Whether the listener is connected (for `/readyz`).
    public var isListening: Bool { state.withLock { $0.listening } }

    /// Listens and dispatches until cancelled or shut down.
    public func run() async throws {
        if let listener {
            await listen(listener)
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

    private func listen(_ listener: PGListener) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await listener.run() }
            group.addTask {
                await withGracefulShutdownHandler {
                    for await event in listener.events {
                        self.dispatch(event)
                    }
                } onGracefulShutdown: {
                    listener.stop()
                }
            }
            await group.waitForAll()
        }
    }

    private func dispatch(_ event: PGListener.Event) {
        switch event {
        case .disconnected:
            // Until it is back, nothing tells the cache what changed.
            treeCache.invalidateAll(listening: false)
            state.withLock { $0.listening = false }
        case .connected:
            // Notifications sent while it was away are lost.
            treeCache.invalidateAll(listening: true)
            let all = state.withLock { state in
                state.listening = true
                return state.byUser.values.flatMap(\.values)
            }
            for continuation in all { continuation.yield(.change) }
        case .notification(let notification):
            notifications.increment()
            guard let change = Self.parse(notification.payload) else {
                // Not a payload this build writes: something changed, nobody knows what.
                treeCache.invalidateAll(listening: true)
                return
            }
            deliver(change)
        }
    }

    /// Empties the cache of what `change` concerns and wakes its subscribers.
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

    /// Why a subscriber wakes: a possible change, or its own timer.
    enum Wake: Sendable, Equatable {
        case change
        case tick
    }

    enum Change: Equatable {
        case user(UserID)
        case broadcasts
    }

    /// `{"user": "u1", "version": 3}` or `{"broadcast_version": 7}`.
    static func parse(_ payload: String) -> Change? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any] else { return nil }
        if let name = object["user"] as? String, let user = try? UserID(validating: name) { return .user(user) }
        if object["broadcast_version"] != nil { return .broadcasts }
        return nil
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
        subscriberGauge.record(state.withLock { $0.count })
        continuation.onTermination = { [weak self] _ in self?.remove(user, id) }
        return Subscription(stream: stream, continuation: continuation)
    }

    private func remove(_ user: UserID, _ id: UInt64) {
        let count = state.withLock { state in
            if state.byUser[user]?.removeValue(forKey: id) != nil { state.count -= 1 }
            if state.byUser[user]?.isEmpty == true { state.byUser[user] = nil }
            return state.count
        }
        subscriberGauge.record(count)
    }

    /// A subscriber's wake-ups; `cancel()` (or dropping the iterator's task) unsubscribes.
    struct Subscription: Sendable {
        let stream: AsyncStream<Wake>
        let continuation: AsyncStream<Wake>.Continuation

        func cancel() { continuation.finish() }
    }
}
