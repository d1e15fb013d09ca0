import Foundation

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
    ///
    /// - Returns: the badge at `path` as the server answered it.
    /// - Throws: ``RedDotClientError`` when the server refuses it or cannot be reached; the
    ///   badges then show the server's tree again.
    @discardableResult
    public func clear(_ path: String, force: Bool = false) async throws -> Badge {
        try await act(.clear(force: force), at: path)
    }

    /// Marks the badge at `path` and everything under it seen: their `unseen` numbers drop to 0
    /// and their counts stay (seen vs read), for what the app showed (`seen_version`, as
    /// ``clear(_:force:)``).
    ///
    /// - Returns: the badge at `path` as the server answered it.
    /// - Throws: ``RedDotClientError`` when the server refuses it or cannot be reached.
    @discardableResult
    public func seen(_ path: String) async throws -> Badge {
        try await act(.seen, at: path)
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

    private func act(_ kind: PendingAction.Kind, at path: String) async throws -> Badge {
        guard server != nil else { throw RedDotClientError(.invalidResponse, "the client has no server to send the action to") }
        // A client not started sends on a transport of its own, closed after.
        let running = state.withLock { $0.transport }
        let transport = running ?? HTTPTransport()
        defer { if running == nil { transport.close() } }
        // Shown at once, from what the app sees now.
        var action: PendingAction?
        update { state in
            let made = PendingAction(
                id: state.makeID(), kind: kind, path: path, shown: state.shown, version: state.tree.version)
            state.pending.append(made)
            action = made
            return false
        }
        guard let action else { return badge(path) }
        do {
            var body: [String: Any] = ["path": path]
            if case .clear(let force) = kind { body["force"] = force }
            if action.seenVersion >= 0 { body["seen_version"] = action.seenVersion }
            var request = try await request(kind == .seen ? "badges/seen" : "badges/clear", query: [])
            request.httpMethod = "POST"
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = try JSONSerialization.data(withJSONObject: body, options: [.sortedKeys])
            let (head, answer) = try await send(request, transport, timeout: options.requestTimeout)
            guard head.statusCode == 200 else {
                throw Self.statusError(head.statusCode, head, answer, what: kind == .seen ? "seen \(path)" : "clear \(path)")
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
            update { state in
                state.pending.removeAll { $0.id == action.id }
                return false
            }
            wakeup.fire()
            throw Self.clientError(error)
        }
    }
}
