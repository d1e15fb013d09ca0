public import Foundation
import Synchronization

/// One user's badges from a RedDot server, with RJBadgeKit's programming model: observe a path
/// and be called back at once and whenever its badge changes.
///
/// This part of the client holds the tree and the observers; what it hears from the server
/// comes in through ``receive(_:)`` (each event of `GET /v1/users/{user}/badges/stream`) or
/// ``receive(tree:)`` (the JSON of `GET …/badges`). Callbacks run on the thread that delivered
/// the change, outside the client's lock, in version order; a change never goes back in version.
public final class RedDotClient: Sendable {
    /// The user whose badges these are.
    public let user: String
    private let state = Mutex(State())

    private struct State {
        var tree = BadgeTreeState()
        var nextObserver: UInt64 = 0
        var observers: [UInt64: (path: String, callback: @Sendable (Badge) -> Void)] = [:]
    }

    /// A client of `user`'s badges, with nothing known yet (every path hidden, version 0).
    public init(user: String) {
        self.user = user
    }

    /// The version of the tree held (0 before anything arrived).
    public var version: Int64 { state.withLock { max($0.tree.version, 0) } }

    /// The badge at `path` as held now.
    public func badge(_ path: String) -> Badge {
        state.withLock { $0.tree.badge(path) }
    }

    /// Calls `callback` at once with the badge at `path`, then whenever it changes, until the
    /// returned observation is released or cancelled. Keep the observation as long as you
    /// observe; there is no other unobserve call, and no retain cycle to break.
    public func observe(_ path: String, _ callback: @escaping @Sendable (Badge) -> Void) -> BadgeObservation {
        let (id, current) = state.withLock { state -> (UInt64, Badge) in
            state.nextObserver += 1
            state.observers[state.nextObserver] = (path, callback)
            return (state.nextObserver, state.tree.badge(path))
        }
        callback(current)
        return BadgeObservation { [weak self] in
            _ = self?.state.withLock { $0.observers.removeValue(forKey: id) }
        }
    }

    /// The badge at `path` now, then every change of it, as an `AsyncSequence`; iteration ends
    /// when the task is cancelled.
    public func badges(_ path: String) -> AsyncStream<Badge> {
        AsyncStream(bufferingPolicy: .bufferingNewest(64)) { continuation in
            let observation = observe(path) { continuation.yield($0) }
            continuation.onTermination = { _ in observation.cancel() }
        }
    }

    /// How many observations are active.
    public var observerCount: Int { state.withLock { $0.observers.count } }

    /// Takes one event of the server's stream: a `snapshot` replaces the tree, a `change`
    /// updates the nodes it names; others (and anything not newer than the tree held) are
    /// ignored.
    ///
    /// - Throws: ``RedDotClientError`` when the event's data is not what the server sends.
    public func receive(_ event: ServerSentEvent) throws {
        let data = Data(event.data.utf8)
        switch event.name {
        case "snapshot":
            try receive(tree: data)
        case "change":
            let change = try Self.decode(BadgeTreeState.Change.self, data, what: "a change event")
            update { $0.apply(change) }
        default:
            break
        }
    }

    /// Takes a whole tree, `{"user", "version", "tree"}` (the answer of `GET …/badges`, or a
    /// stream's snapshot); ignored when it is not newer than the tree held.
    ///
    /// - Throws: ``RedDotClientError`` when it is not such a tree.
    public func receive(tree json: Data) throws {
        let snapshot = try Self.decode(BadgeTreeState.Snapshot.self, json, what: "a tree")
        update { $0.apply(snapshot) }
    }

    /// Applies `change` to the tree and calls the observers of the paths it changed.
    private func update(_ change: (inout BadgeTreeState) -> Set<String>?) {
        let calls = state.withLock { state -> [(@Sendable (Badge) -> Void, Badge)] in
            guard let changed = change(&state.tree), !changed.isEmpty else { return [] }
            return state.observers.sorted { $0.key < $1.key }.compactMap { _, observer in
                changed.contains(observer.path) ? (observer.callback, state.tree.badge(observer.path)) : nil
            }
        }
        for (callback, badge) in calls { callback(badge) }
    }

    private static func decode<T: Decodable>(_ type: T.Type, _ data: Data, what: String) throws -> T {
        do {
            return try JSONDecoder().decode(type, from: data)
        } catch {
            let reason = String(describing: error).split(whereSeparator: \.isNewline).joined(separator: " ")
            throw RedDotClientError("the server sent something that is not \(what): \(reason.prefix(300))")
        }
    }
}

/// An active observation (see ``RedDotClient/observe(_:_:)``): it ends when released, or at
/// ``cancel()``.
public final class BadgeObservation: Sendable {
    private let onCancel: Mutex<(@Sendable () -> Void)?>

    init(_ onCancel: @escaping @Sendable () -> Void) {
        self.onCancel = Mutex(onCancel)
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
