public import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension RedDotClient {
    /// Clears the badge at `path` (with `force`, everything under it too), as RJBadgeKit's
    /// `clearBadgeForKeyPath`, for what the app showed: it sends the version the app rendered
    /// (`seen_version`), so whatever arrived after that version stays, with its count, on the
    /// server and here.
    ///
    /// The badges change at once (observers are called back); the server's answer confirms or
    /// corrects them, and the tree includes the clear from the version the server answered.
    /// When the server cannot be reached (offline, a timeout, a 5xx), the clear stays shown
    /// and is queued, in the offline cache too: it is sent when the connection is back (also
    /// after the app restarted), with its `seen_version` and an `action_id` the server applies
    /// once (``queuedActionCount``). Actions reach the server in the order they were made: while
    /// an older one waits in the queue, a new one is queued behind it.
    ///
    /// - Returns: the badge at `path` as the server answered it, or as shown here when the
    ///   clear was queued.
    /// - Throws: ``RedDotClientError``: `.invalidPath` for a path that is not a badge path
    ///   (nothing changes); another kind when the server refuses the clear (the badges then
    ///   show the server's tree again).
    @discardableResult
    public func clear(_ path: String, force: Bool = false) async throws -> Badge {
        try await act(.clear(force: force), at: [path])[0]
    }

    /// Clears the badges at `paths` (with `force`, everything under each too), as
    /// ``clear(_:force:)`` does each: all of them change at once, for the version the app
    /// showed; each is sent (or queued) as an action of its own, in order.
    ///
    /// - Returns: the badge at each path, in the order of `paths`.
    /// - Throws: ``RedDotClientError``: `.invalidPath` when any path is not a badge path
    ///   (nothing is cleared); else the first refusal of the server (the clears sent before it
    ///   stand, the refused one shows again, the later ones are still sent).
    @discardableResult
    public func clear(paths: [String], force: Bool = false) async throws -> [Badge] {
        try await act(.clear(force: force), at: paths)
    }

    /// Marks the badge at `path` and everything under it seen: their `unseen` numbers drop to 0
    /// and their counts stay (seen vs read), for what the app showed (`seen_version`, as
    /// ``clear(_:force:)``, and queued like it when the server cannot be reached).
    ///
    /// - Returns: the badge at `path` as the server answered it, or as shown here when queued.
    /// - Throws: ``RedDotClientError``: `.invalidPath`, or the server's refusal.
    @discardableResult
    public func seen(_ path: String) async throws -> Badge {
        try await act(.seen, at: [path])[0]
    }

    /// Mutes the subtree at `path` for the user (until `until`: a snooze), as a chat app's
    /// "mute conversation": the badges inside keep their numbers, and give their ancestors
    /// (the tab, the app icon) nothing until ``unmute(_:)`` or `until`. The ancestors drop at
    /// once; when the server cannot be reached, the mute is queued and sent when the connection
    /// is back (also after the app restarted), once, as ``clear(_:force:)`` is. The server
    /// orders mutes by when it receives them, so a queued mute holds from when it is sent.
    ///
    /// - Returns: the badge at `path` as the server answered it, or as shown here when queued.
    /// - Throws: ``RedDotClientError``: `.invalidPath` for a path that is not a badge path or is
    ///   `root` (nothing changes), or the server's refusal.
    @discardableResult
    public func mute(_ path: String, until: Date? = nil) async throws -> Badge {
        try Self.checkMutable(path)
        return try await act(.mute(until: until), at: [path])[0]
    }

    /// Ends a mute or snooze of the subtree at `path` (see ``mute(_:until:)``; queued likewise).
    ///
    /// - Returns: the badge at `path` as the server answered it, or as shown here when queued.
    /// - Throws: ``RedDotClientError`` as ``mute(_:until:)``.
    @discardableResult
    public func unmute(_ path: String) async throws -> Badge {
        try Self.checkMutable(path)
        return try await act(.unmute, at: [path])[0]
    }

    /// `until` as the server reads it: RFC 3339 in UTC, with milliseconds.
    static func rfc3339(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: date)
    }

    /// Refuses what the server would refuse for a mute: a path that is not a badge path, and
    /// `root` (its count is the app-icon number).
    private static func checkMutable(_ path: String) throws {
        try checkPath(path)
        guard path != "root" else {
            throw RedDotClientError(.invalidPath, "root cannot be muted (its count is the app icon's); mute a subtree below it")
        }
    }

    /// A stream sends no event for a version that changed nothing it shows, so an answered
    /// action could stay over the tree until the next change: when the tree has not reached the
    /// answer's version after 2 s, the tree is asked for once.
    private func confirmLater(_ id: UInt64) {
        guard case .stream = options.transport else { return }
        Task { [weak self] in
            try? await Task.sleep(for: .seconds(2))
            guard let self, let transport = self.state.withLock({ $0.transport }),
                self.state.withLock({ state in state.pending.contains { $0.id == id } })
            else { return }
            try? await self.fetchTree(transport, longPoll: nil)
        }
    }

    /// Shows the action at each of `paths` at once, then sends them one by one.
    private func act(_ kind: PendingAction.Kind, at paths: [String]) async throws -> [Badge] {
        for path in paths { try Self.checkPath(path) }
        guard server != nil else { throw RedDotClientError(.invalidResponse, "the client has no server to send the action to") }
        // Shown at once, from what the app sees now; each next one from what the previous left.
        var actions: [PendingAction] = []
        var behindQueue = false
        update { state in
            // Taps reach the server in the order they were made: behind older ones still queued
            // (offline, or the server answering 5xx), a new one waits its turn in the queue.
            behindQueue = state.pending.contains { $0.answer == nil && $0.delivery == .queued }
            var view = state.shown
            for path in paths {
                var made = PendingAction(id: state.makeID(), kind: kind, path: path, shown: view, version: state.tree.version)
                if behindQueue { made.delivery = .queued }
                state.pending.append(made)
                view = made.apply(to: view)
                actions.append(made)
            }
            return false
        }
        if behindQueue {
            queueWakeup.fire()
            return actions.map { badge($0.path) }
        }
        // A client not started sends on a transport of its own, closed after.
        let running = state.withLock { $0.transport }
        let transport = running ?? HTTPTransport()
        defer { if running == nil { transport.close() } }
        var answers: [Badge] = []
        var refusal: (any Error)?
        for action in actions {
            do {
                answers.append(try await deliver(action, transport))
            } catch let error as RedDotClientError where error.kind == .transport {
                // The server cannot be reached: the action stays shown, queued for the sender.
                update { state in
                    if let index = state.pending.firstIndex(where: { $0.id == action.id }) { state.pending[index].delivery = .queued }
                    return false
                }
                queueWakeup.fire()
                answers.append(badge(action.path))
            } catch {
                refusal = refusal ?? error
                answers.append(badge(action.path))
            }
        }
        if let refusal { throw Self.clientError(refusal) }
        return answers
    }

    /// Sends `action`; on an answer, keeps it with the action until the tree includes it. A
    /// refusal takes the action away (its badges show as the tree has them) and is thrown; so is
    /// a failure to reach the server, with the action left as it was.
    ///
    /// - Returns: the badge at the action's path as the server answered it.
    private func deliver(_ action: PendingAction, _ transport: HTTPTransport) async throws -> Badge {
        let kind = action.kind
        let path = action.path
        do {
            var body: [String: Any] = ["path": path, "action_id": action.actionID]
            switch kind {
            case .clear(let force):
                body["force"] = force
                if action.seenVersion >= 0 { body["seen_version"] = action.seenVersion }
            case .seen:
                if action.seenVersion >= 0 { body["seen_version"] = action.seenVersion }
            case .mute(let until):
                if let until { body["until"] = Self.rfc3339(until) }
            case .unmute:
                break
            }
            var request = try await request("badges/\(kind.name)", query: [])
            request.httpMethod = "POST"
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = try JSONSerialization.data(withJSONObject: body, options: [.sortedKeys])
            let (head, answer) = try await send(request, transport, timeout: options.requestTimeout)
            guard head.statusCode == 200 else {
                throw Self.statusError(head.statusCode, head, answer, what: "\(kind.name) \(path)")
            }
            let snapshot = try Self.decode(BadgeTreeState.Snapshot.self, answer, what: "a subtree")
            let nodes = BadgeTreeState.shownNodes(snapshot.tree, version: snapshot.version)
            update { state in
                if let index = state.pending.firstIndex(where: { $0.id == action.id }) {
                    state.pending[index].answer = (snapshot.version, nodes)
                }
                return false
            }
            // A poll brings the rest of the tree at that version (a stream sends it by itself).
            wakeup.fire()
            confirmLater(action.id)
            return nodes[path] ?? .hidden(path, version: snapshot.version)
        } catch {
            let failure = Self.clientError(error)
            if failure.kind != .transport {
                update { state in
                    state.pending.removeAll { $0.id == action.id }
                    return false
                }
                wakeup.fire()
            }
            throw failure
        }
    }

    /// Sends the queued actions, oldest first, while the client runs: when one is queued, when
    /// the connection is back, and after a failure to reach the server with the reconnect
    /// backoff. A refusal drops the action (``lastQueuedActionError``) and goes on.
    func sendQueued(_ transport: HTTPTransport) async {
        var backoff = ReconnectBackoff(initial: options.reconnectDelay, maximum: options.maximumReconnectDelay)
        while !Task.isCancelled {
            let next = state.withLock { state -> PendingAction? in
                guard let index = state.pending.firstIndex(where: { $0.answer == nil && $0.delivery == .queued }) else { return nil }
                state.pending[index].delivery = .sending
                return state.pending[index]
            }
            guard let next else {
                await queueWakeup.wait(for: .seconds(86_400))
                continue
            }
            do {
                _ = try await deliver(next, transport)
                backoff.reset()
            } catch let error as RedDotClientError where error.kind == .transport {
                update { state in
                    if let index = state.pending.firstIndex(where: { $0.id == next.id }) { state.pending[index].delivery = .queued }
                    return false
                }
                guard !Task.isCancelled else { return }
                await queueWakeup.wait(for: backoff.next())
            } catch {
                state.withLock { $0.actionFailure = Self.clientError(error) }
            }
        }
    }
}
