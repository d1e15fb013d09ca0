import BadgePaths
public import Foundation

/// One user's badges from a RedDot server, with RJBadgeKit's programming model: observe a path
/// and be called back at once and whenever its badge changes; clear or mark seen what the app
/// showed.
///
/// ```swift
/// let client = RedDotClient(server: URL(string: "https://badges.example.com")!, user: "alice",
///                           options: .init(cacheDirectory: cachesURL)) { try await session.token() }
/// client.start()
/// let observation = try client.observe("root.chat") { badge in
///     Task { @MainActor in chatTab.badgeValue = badge.text ?? (badge.shown ? "" : nil) }
/// }
/// try await client.clear("root.chat", force: true)
/// ```
///
/// Callbacks run outside the client's lock, one at a time and in the order of the changes, on
/// the thread that delivered a change (never the main thread by itself: hop there to touch UI).
/// A change made while a callback runs (by that callback, or on another thread) is called back
/// after it returns, by the thread already calling back: so a callback may call into the client,
/// and `observe` calls back at once unless another callback is running. An observation
/// cancelled is not called back again. The version of what a callback sees never goes back, except once after a start from the offline cache, when the
/// server's first answer replaces the cached tree whatever its version (a server restored from a
/// backup is older than the cache).
public final class RedDotClient: Sendable {
    /// The user whose badges these are.
    public let user: String
    /// The server's base URL (nil for a client fed by hand with ``receive(_:)``).
    public let server: URL?
    /// The options the client was made with, each duration brought into 0 … 1 day (the
    /// heartbeat timeout at least 100 ms).
    public let options: Options
    let tokenProvider: (@Sendable () async throws -> String?)?
    let cache: BadgeCache?
    let state = ClientLock(State())
    /// Wakes the polling loop for ``refresh()`` and after an action.
    let wakeup = Wakeup()
    /// Wakes the loop that sends queued actions: an action was queued, or the connection is back.
    let queueWakeup = Wakeup()

    struct State {
        /// The tree as the server last confirmed it.
        var tree = BadgeTreeState()
        /// Whether ``tree`` came from the server in this run (not from the cache).
        var confirmed = false
        /// Clears and seens shown before the tree includes them.
        var pending: [PendingAction] = []
        /// What the app sees: ``tree`` with ``pending`` applied.
        var shown: [String: Badge] = [:]
        var nextID: UInt64 = 0
        var observers: [UInt64: (path: String, callback: @Sendable (Badge) -> Void)] = [:]
        var treeObservers: [UInt64: (path: String, callback: @Sendable ([Badge]) -> Void)] = [:]
        var connectionObservers: [UInt64: @Sendable (ConnectionState) -> Void] = [:]
        var connection: ConnectionState = .idle
        var runner: Task<Void, Never>?
        /// Sends the queued actions while the client runs.
        var sender: Task<Void, Never>?
        /// Why the server refused the last action sent from the queue.
        var actionFailure: RedDotClientError?
        var transport: HTTPTransport?
        var cacheFailure: RedDotClientError?
        /// How many states were handed to the cache (their order, for ``BadgeCache/save(_:queued:sequence:)``).
        var saves: UInt64 = 0
        /// Callbacks waiting their turn, in the order of the changes (see ``deliverQueued()``).
        var deliveries: [Delivery] = []
        /// Whether a thread is running ``deliveries`` now.
        var delivering = false

        /// Whether the observation `key` is still active.
        func isObserving(_ key: ObserverKey) -> Bool {
            switch key {
            case .badge(let id): observers[id] != nil
            case .tree(let id): treeObservers[id] != nil
            case .connection(let id): connectionObservers[id] != nil
            }
        }

        /// The actions the server has not answered, as the cache keeps them.
        var unanswered: [PendingAction.Stored] {
            pending.filter { $0.answer == nil }.map(\.stored)
        }

        /// The badge at `path` as the app sees it.
        func badge(_ path: String) -> Badge {
            shown[path] ?? .hidden(path, version: max(tree.version, 0))
        }

        /// Every shown badge at `path` or under it, by path.
        func badges(under path: String) -> [Badge] {
            shown.values.filter { PendingAction.isWithin($0.path, path) }.sorted { $0.path < $1.path }
        }

        mutating func makeID() -> UInt64 {
            nextID += 1
            return nextID
        }
    }

    /// A client of `user`'s badges on the RedDot server at `server` (its base URL, such as
    /// `https://badges.example.com`). Nothing is sent before ``start()``; the offline cache,
    /// when `options` names a folder, is read at once, so the badges it holds show before the
    /// network answers, with the clears and seens the server had not answered (they are sent
    /// after ``start()``).
    ///
    /// - Parameter token: gives the bearer token for each request and connection (refresh it
    ///   there; it is called again after a 401, once, before the 401 surfaces as an error); nil
    ///   for a server that runs without auth.
    public init(server: URL, user: String, options: Options = Options(), token: (@Sendable () async throws -> String?)? = nil) {
        self.user = user
        self.server = server
        self.options = options.bounded
        self.tokenProvider = token
        self.cache = options.cacheDirectory.map { BadgeCache(directory: $0, server: server.absoluteString, user: user) }
        do {
            if let cached = try cache?.load() {
                state.withLock { state in
                    state.tree = cached.tree
                    for stored in cached.queued {
                        if let action = PendingAction(stored, id: state.makeID()) { state.pending.append(action) }
                    }
                    state.shown = state.pending.reduce(cached.tree.nodes) { $1.apply(to: $0) }
                }
            }
        } catch let error as RedDotClientError {
            state.withLock { $0.cacheFailure = error }
        } catch {}
    }

    /// A client of `user`'s badges with no server: what it hears comes in through
    /// ``receive(_:)`` or ``receive(tree:)``. Every path is hidden, at version 0, until then.
    public init(user: String) {
        self.user = user
        self.server = nil
        self.options = Options()
        self.tokenProvider = nil
        self.cache = nil
    }

    /// Whose callback a ``Delivery`` is.
    enum ObserverKey: Hashable {
        case badge(UInt64), tree(UInt64), connection(UInt64)
    }

    /// One callback with what it is called with, queued under the lock in the order of the changes.
    struct Delivery {
        var observer: ObserverKey
        var run: @Sendable () -> Void
    }

    /// Runs the queued callbacks in order, one at a time, outside the lock. A thread that finds
    /// another one running them leaves its own to it (so callbacks never overtake each other,
    /// and one that calls into the client does not wait for itself); a callback whose
    /// observation ended meanwhile is skipped.
    func deliverQueued() {
        let mine = state.withLock { state -> Bool in
            guard !state.delivering, !state.deliveries.isEmpty else { return false }
            state.delivering = true
            return true
        }
        guard mine else { return }
        while true {
            let batch = state.withLock { state -> [Delivery] in
                defer { state.deliveries = [] }
                if state.deliveries.isEmpty { state.delivering = false }
                return state.deliveries
            }
            if batch.isEmpty { return }
            for delivery in batch where state.withLock({ $0.isObserving(delivery.observer) }) { delivery.run() }
        }
    }

    deinit {
        state.withLock { state in
            state.runner?.cancel()
            state.sender?.cancel()
            state.transport?.close()
        }
    }

    /// The version of the tree held (0 before anything arrived).
    public var version: Int64 { state.withLock { max($0.tree.version, 0) } }

    /// The nodes the user muted, at ``version``, by path (not kept in the offline cache: empty
    /// until the first answer of a run).
    public var mutes: [MutedPath] { state.withLock { $0.tree.mutes } }

    /// The badge at `path` as the app sees it now (with its clears and seens not yet confirmed).
    public func badge(_ path: String) -> Badge {
        state.withLock { $0.badge(path) }
    }

    /// Why the offline cache could not be read or written; nil when it works (or there is none):
    /// a file that could not be read at the start stops counting once a save has replaced it.
    public var cacheError: RedDotClientError? {
        if let failure = cache?.lastFailure { return failure }
        return cache?.hasWritten == true ? nil : state.withLock { $0.cacheFailure }
    }

    /// The file that keeps this user's tree and unsent taps (in ``Options/cacheDirectory``);
    /// nil without a cache folder.
    public var cacheFile: URL? { cache?.file }

    /// How many clears and seens the server has not answered yet: on their way, or queued while
    /// it cannot be reached (they show already, and go out when it can be).
    public var queuedActionCount: Int {
        state.withLock { state in state.pending.count { $0.answer == nil } }
    }

    /// Why the server refused the last clear or seen sent from the queue (the badges it had
    /// hidden show again); nil when none was refused.
    public var lastQueuedActionError: RedDotClientError? { state.withLock { $0.actionFailure } }

    /// Calls `callback` at once with the badge at `path`, then whenever it changes, until the
    /// returned observation is released or cancelled. Keep the observation as long as you
    /// observe; there is no other unobserve call, and no retain cycle to break.
    ///
    /// - Throws: ``RedDotClientError`` (`.invalidPath`) when `path` is not a badge path
    ///   (`root`, then labels of `A-Z a-z 0-9 _`: `root.chat`, not `chat`); nothing is observed.
    public func observe(_ path: String, _ callback: @escaping @Sendable (Badge) -> Void) throws -> BadgeObservation {
        try Self.checkPath(path)
        let id = state.withLock { state -> UInt64 in
            let id = state.makeID()
            state.observers[id] = (path, callback)
            let current = state.badge(path)
            state.deliveries.append(Delivery(observer: .badge(id)) { callback(current) })
            return id
        }
        deliverQueued()
        return BadgeObservation { [weak self] in
            _ = self?.state.withLock { $0.observers.removeValue(forKey: id) }
        }
    }

    /// The badge at `path` now, then every change of it, as an `AsyncSequence`; iteration ends
    /// when the task is cancelled. The observation ends with the task, or once the sequence and
    /// its iterator are gone (a loop left with `break`).
    ///
    /// - Throws: ``RedDotClientError`` (`.invalidPath`) when `path` is not a badge path.
    public func badges(_ path: String) throws -> BadgeUpdates {
        try Self.checkPath(path)
        var kept: BadgeObservation?
        let stream = AsyncStream<Badge>(bufferingPolicy: .bufferingNewest(64)) { continuation in
            let observation = try? observe(path) { continuation.yield($0) }
            continuation.onTermination = { _ in observation?.cancel() }
            kept = observation
        }
        return BadgeUpdates(stream: stream, observation: kept)
    }

    /// Every shown badge at `path` or under it, sorted by path (parents before their children).
    public func badges(under path: String) -> [Badge] {
        state.withLock { $0.badges(under: path) }
    }

    /// Calls `callback` at once with ``badges(under:)``, then whenever a badge at `path` or
    /// under it changes (a list screen, a tree view), until the returned observation is
    /// released or cancelled.
    ///
    /// - Throws: ``RedDotClientError`` (`.invalidPath`) when `path` is not a badge path.
    public func observeTree(under path: String, _ callback: @escaping @Sendable ([Badge]) -> Void) throws -> BadgeObservation {
        try Self.checkPath(path)
        let id = state.withLock { state -> UInt64 in
            let id = state.makeID()
            state.treeObservers[id] = (path, callback)
            let current = state.badges(under: path)
            state.deliveries.append(Delivery(observer: .tree(id)) { callback(current) })
            return id
        }
        deliverQueued()
        return BadgeObservation { [weak self] in
            _ = self?.state.withLock { $0.treeObservers.removeValue(forKey: id) }
        }
    }

    /// How many observations (of paths and of subtrees) are active.
    public var observerCount: Int { state.withLock { $0.observers.count + $0.treeObservers.count } }

    /// Where the connection stands now.
    public var connectionState: ConnectionState { state.withLock { $0.connection } }

    /// Calls `callback` at once with the connection's state, then whenever it changes, until
    /// the returned observation is released or cancelled.
    public func observeConnection(_ callback: @escaping @Sendable (ConnectionState) -> Void) -> BadgeObservation {
        let id = state.withLock { state -> UInt64 in
            let id = state.makeID()
            state.connectionObservers[id] = callback
            let current = state.connection
            state.deliveries.append(Delivery(observer: .connection(id)) { callback(current) })
            return id
        }
        deliverQueued()
        return BadgeObservation { [weak self] in
            _ = self?.state.withLock { $0.connectionObservers.removeValue(forKey: id) }
        }
    }

    /// Takes one event of the server's stream: a `snapshot` replaces the tree, a `change`
    /// updates the nodes it names; others (and anything not newer than the tree held) are
    /// ignored.
    ///
    /// - Throws: ``RedDotClientError`` (`.invalidResponse`) when the event's data is not what
    ///   the server sends.
    public func receive(_ event: ServerSentEvent) throws {
        let data = Data(event.data.utf8)
        switch event.name {
        case "snapshot":
            try receive(tree: data)
        case "change":
            let change = try Self.decode(BadgeTreeState.Change.self, data, what: "a change event")
            update { $0.tree.apply(change) }
        default:
            break
        }
    }

    /// Takes a whole tree, `{"user", "version", "tree"}` (the answer of `GET …/badges`, or a
    /// stream's snapshot); ignored when it is not newer than the tree held.
    ///
    /// - Throws: ``RedDotClientError`` (`.invalidResponse`) when it is not such a tree.
    public func receive(tree json: Data) throws {
        let snapshot = try Self.decode(BadgeTreeState.Snapshot.self, json, what: "a tree")
        update { $0.tree.apply(snapshot) }
    }

    /// Takes a tree the server answered to this run's request: the first one replaces a tree
    /// from the cache whatever its version.
    func receiveFromServer(tree json: Data) throws {
        let snapshot = try Self.decode(BadgeTreeState.Snapshot.self, json, what: "a tree")
        update { state in
            let authoritative = !state.confirmed
            state.confirmed = true
            return state.tree.apply(snapshot, authoritative: authoritative)
        }
    }

    /// Changes the state with `change` (which says whether the confirmed tree changed), drops
    /// the actions the tree now includes, and calls the observers of the paths whose badge
    /// changed (in turn: ``deliverQueued()``), then saves the tree and the unanswered actions
    /// when either changed.
    func update(_ change: (inout State) -> Bool) {
        let saved = state.withLock { state -> Saved? in
            let queuedBefore = state.pending.filter { $0.answer == nil }.map(\.actionID)
            let treeChanged = change(&state)
            let version = state.tree.version
            state.pending.removeAll { action in action.answer.map { $0.version <= version } ?? false }
            let before = state.shown
            let after = state.pending.reduce(state.tree.nodes) { $1.apply(to: $0) }
            state.shown = after
            let changed = Set(before.keys).union(after.keys).filter { path in
                switch (before[path], after[path]) {
                case let (old?, new?): return !old.looksLike(new)
                case (nil, nil): return false
                default: return true
                }
            }
            if !changed.isEmpty {
                for (id, observer) in state.observers.sorted(by: { $0.key < $1.key }) where changed.contains(observer.path) {
                    let (callback, badge) = (observer.callback, state.badge(observer.path))
                    state.deliveries.append(Delivery(observer: .badge(id)) { callback(badge) })
                }
                for (id, observer) in state.treeObservers.sorted(by: { $0.key < $1.key })
                where changed.contains(where: { PendingAction.isWithin($0, observer.path) }) {
                    let (callback, badges) = (observer.callback, state.badges(under: observer.path))
                    state.deliveries.append(Delivery(observer: .tree(id)) { callback(badges) })
                }
            }
            let queuedChanged = state.pending.filter { $0.answer == nil }.map(\.actionID) != queuedBefore
            guard treeChanged || queuedChanged else { return nil }
            state.saves += 1
            return Saved(tree: state.tree, queued: state.unanswered, sequence: state.saves)
        }
        deliverQueued()
        if let saved { cache?.save(saved.tree, queued: saved.queued, sequence: saved.sequence) }
    }

    /// What ``update(_:)`` hands to the cache.
    private struct Saved {
        var tree: BadgeTreeState
        var queued: [PendingAction.Stored]
        var sequence: UInt64
    }

    /// Why `path` is not a badge path (`root`, then labels of `A-Z a-z 0-9 _`), as a sentence
    /// that names the rule it broke; nil when it is one.
    public static func pathProblem(_ path: String) -> String? {
        do {
            _ = try BadgePath(validating: path)
            return nil
        } catch {
            let suggestion = "root." + path
            let hint = !path.hasPrefix("root") && BadgePath.labelCountOfValidPath(suggestion) != nil ? " (did you mean '\(suggestion)'?)" : ""
            return error.description + hint
        }
    }

    /// - Throws: ``RedDotClientError`` (`.invalidPath`) when `path` is not a badge path.
    static func checkPath(_ path: String) throws(RedDotClientError) {
        if let problem = pathProblem(path) { throw RedDotClientError(.invalidPath, problem) }
    }

    static func decode<T: Decodable>(_ type: T.Type, _ data: Data, what: String) throws -> T {
        do {
            return try JSONDecoder().decode(type, from: data)
        } catch {
            let reason = String(describing: error).split(whereSeparator: \.isNewline).joined(separator: " ")
            throw RedDotClientError(.invalidResponse, "the server sent something that is not \(what): \(reason.prefix(300))")
        }
    }
}

/// A badge and its changes (``RedDotClient/badges(_:)``). The sequence and its iterator keep
/// the observation: it ends when both are gone, or when the task iterating is cancelled.
public struct BadgeUpdates: AsyncSequence, Sendable {
    public typealias Element = Badge
    let stream: AsyncStream<Badge>
    let observation: BadgeObservation?

    public func makeAsyncIterator() -> Iterator {
        Iterator(base: stream.makeAsyncIterator(), observation: observation)
    }

    /// Yields the badges; holds the observation while it lives.
    public struct Iterator: AsyncIteratorProtocol {
        var base: AsyncStream<Badge>.Iterator
        let observation: BadgeObservation?

        public mutating func next() async -> Badge? {
            await base.next()
        }
    }
}

/// An active observation (see ``RedDotClient/observe(_:_:)``): it ends when released, or at
/// ``cancel()``.
public final class BadgeObservation: Sendable {
    private let onCancel: ClientLock<(@Sendable () -> Void)?>

    init(_ onCancel: @escaping @Sendable () -> Void) {
        self.onCancel = ClientLock(onCancel)
    }

    /// Stops the callbacks (also done when the observation is released).
    public func cancel() {
        let action = onCancel.withLock { action -> (@Sendable () -> Void)? in
            defer { action = nil }
            return action
        }
        action?()
    }

    deinit { cancel() }
}
