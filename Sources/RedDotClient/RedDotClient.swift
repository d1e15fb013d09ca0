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
/// Callbacks run outside the client's lock, on the thread that delivered the change (never the
/// main thread by itself: hop there to touch UI), in version order. The version of what a
/// callback sees never goes back, except once after a start from the offline cache, when the
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

    /// Why the offline cache could not be read or written; nil when it works (or there is none).
    public var cacheError: RedDotClientError? {
        state.withLock { $0.cacheFailure } ?? cache?.lastFailure
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
        let (id, current) = state.withLock { state -> (UInt64, Badge) in
            let id = state.makeID()
            state.observers[id] = (path, callback)
            return (id, state.badge(path))
        }
        callback(current)
        return BadgeObservation { [weak self] in
            _ = self?.state.withLock { $0.observers.removeValue(forKey: id) }
        }
    }

    /// The badge at `path` now, then every change of it, as an `AsyncSequence`; iteration ends
    /// when the task is cancelled.
    ///
    /// - Throws: ``RedDotClientError`` (`.invalidPath`) when `path` is not a badge path.
    public func badges(_ path: String) throws -> AsyncStream<Badge> {
        try Self.checkPath(path)
        return AsyncStream(bufferingPolicy: .bufferingNewest(64)) { continuation in
            let observation = try? observe(path) { continuation.yield($0) }
            continuation.onTermination = { _ in observation?.cancel() }
        }
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
        let (id, current) = state.withLock { state -> (UInt64, [Badge]) in
            let id = state.makeID()
            state.treeObservers[id] = (path, callback)
            return (id, state.badges(under: path))
        }
        callback(current)
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
        let (id, current) = state.withLock { state -> (UInt64, ConnectionState) in
            let id = state.makeID()
            state.connectionObservers[id] = callback
            return (id, state.connection)
        }
        callback(current)
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
    /// changed, then saves the tree and the unanswered actions when either changed.
    func update(_ change: (inout State) -> Bool) {
        let (calls, treeCalls, saved) = state.withLock {
            state -> ([(@Sendable (Badge) -> Void, Badge)], [(@Sendable ([Badge]) -> Void, [Badge])], Saved?) in
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
            let calls: [(@Sendable (Badge) -> Void, Badge)] =
                changed.isEmpty
                ? []
                : state.observers.sorted { $0.key < $1.key }.compactMap { _, observer in
                    changed.contains(observer.path) ? (observer.callback, state.badge(observer.path)) : nil
                }
            let treeCalls: [(@Sendable ([Badge]) -> Void, [Badge])] =
                changed.isEmpty
                ? []
                : state.treeObservers.sorted { $0.key < $1.key }.compactMap { _, observer in
                    changed.contains { PendingAction.isWithin($0, observer.path) }
                        ? (observer.callback, state.badges(under: observer.path)) : nil
                }
            let queuedChanged = state.pending.filter { $0.answer == nil }.map(\.actionID) != queuedBefore
            guard treeChanged || queuedChanged else { return (calls, treeCalls, nil) }
            state.saves += 1
            return (calls, treeCalls, Saved(tree: state.tree, queued: state.unanswered, sequence: state.saves))
        }
        for (callback, badge) in calls { callback(badge) }
        for (callback, badges) in treeCalls { callback(badges) }
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
