import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension RedDotClient {
    /// Connects to the server (the stream, or the polling schedule) and keeps the tree current
    /// until ``stop()``; reconnects by itself after failures, with backoff and jitter. A client
    /// started from the offline cache first revalidates the cached tree with `If-None-Match`.
    /// Does nothing when already running, or for a client without a server. A started client
    /// keeps itself alive until ``stop()``.
    public func start() {
        guard server != nil else { return }
        state.withLock { state in
            guard state.runner == nil else { return }
            let transport = HTTPTransport()
            state.transport = transport
            state.runner = Task { [weak self] in await self?.run(transport) }
            state.sender = Task { [weak self] in await self?.sendQueued(transport) }
        }
    }

    /// Closes the connection and stops reconnecting. The tree and the observations stay; the
    /// offline cache already holds the last tree, and the clears and seens not sent yet (the
    /// next start sends them).
    public func stop() {
        let (runner, sender, transport) = state.withLock { state in
            defer {
                state.runner = nil
                state.sender = nil
                state.transport = nil
            }
            return (state.runner, state.sender, state.transport)
        }
        runner?.cancel()
        sender?.cancel()
        transport?.close()
        setConnection(.idle)
    }

    /// Asks for a poll as soon as the polling schedule allows (at once when the tolerance
    /// window since the last request has passed): call it when the app comes to the
    /// foreground. A stream needs none.
    public func refresh() {
        wakeup.fire()
    }

    /// Ends the run on a refusal: `.failed(error)`, and the client stopped, so that ``start()``
    /// starts it again (after the app fixed what was refused, a new token say). The taps not
    /// sent stay queued for that start.
    private func finish(failed error: RedDotClientError) {
        setConnection(.failed(error))
        let (sender, transport) = state.withLock { state in
            defer {
                state.runner = nil
                state.sender = nil
                state.transport = nil
            }
            return (state.sender, state.transport)
        }
        sender?.cancel()
        transport?.close()
    }

    func setConnection(_ new: ConnectionState) {
        let moved = state.withLock { state -> Bool in
            // After stop(), a late word from the stopped loop does not undo `.idle`.
            guard state.connection != new, new == .idle || state.runner != nil else { return false }
            state.connection = new
            for (id, callback) in state.connectionObservers.sorted(by: { $0.key < $1.key }) {
                state.deliveries.append(Delivery(observer: .connection(id)) { callback(new) })
            }
            return true
        }
        guard moved else { return }
        // The server answers again: the queued actions go out now, not after their backoff.
        if new == .streaming || new == .polling { queueWakeup.fire() }
        deliverQueued()
    }

    private func run(_ transport: HTTPTransport) async {
        var backoff = ReconnectBackoff(initial: options.reconnectDelay, maximum: options.maximumReconnectDelay)
        var polling: Polling?
        if case .polling(let schedule) = options.transport { polling = schedule }
        var refusedOnce = false
        // After an event this client could not read: the whole tree first, then the stream from it.
        var readTreeFirst = false
        while !Task.isCancelled {
            if let polling {
                await poll(polling, transport)
                return
            }
            setConnection(.connecting)
            let opened = ClientLock(false)
            // The pause the server asked for (`retry:`): the least wait before reconnecting.
            let asked = ClientLock<Duration>(.zero)
            do {
                if readTreeFirst || state.withLock({ !$0.confirmed && $0.tree.version >= 0 }) {
                    try await fetchTree(transport, longPoll: nil)
                    readTreeFirst = false
                }
                try await stream(transport, opened: opened, retry: asked)
                // The server ended the stream (a restart, a deploy): reconnect after a pause.
                if opened.withLock({ $0 }) {
                    backoff.reset()
                    refusedOnce = false
                }
                setConnection(.connecting)
                try await Task.sleep(for: max(backoff.next(), asked.withLock { $0 }))
            } catch where Task.isCancelled || error is CancellationError {
                return
            } catch let error as RedDotClientError where error.stopsTheClient {
                // A refused token: once more at once with a token asked for anew, then stop.
                if error.kind == .unauthorized, tokenProvider != nil, !refusedOnce {
                    refusedOnce = true
                    continue
                }
                finish(failed: error)
                return
            } catch let error as StreamNotPossible {
                polling = options.fallbackPolling
                setConnection(.waiting(error.error))
            } catch {
                let failure = Self.clientError(error)
                if failure.kind == .invalidResponse {
                    // An event this client cannot read: the next connection starts from the whole
                    // tree (`GET …/badges`), not from the same version, and the pauses grow.
                    readTreeFirst = true
                } else if opened.withLock({ $0 }) {
                    backoff.reset()
                    refusedOnce = false
                }
                setConnection(.waiting(failure))
                do {
                    try await Task.sleep(for: max(backoff.next(), asked.withLock { $0 }))
                } catch {
                    return
                }
            }
        }
    }

    /// Reads the stream until the server ends it (returns) or it fails (throws); `opened` is
    /// set once its first bytes arrived, `retry` to the reconnection time the stream asked for
    /// (at most a minute).
    private func stream(_ transport: HTTPTransport, opened: ClientLock<Bool>, retry: ClientLock<Duration>) async throws {
        var request = try await request("badges/stream", query: [])
        request.setValue("text/event-stream", forHTTPHeaderField: "Accept")
        let resumeFrom = state.withLock { $0.confirmed && $0.tree.version >= 0 ? $0.tree.version : nil }
        if let resumeFrom { request.setValue(String(resumeFrom), forHTTPHeaderField: "Last-Event-ID") }
        let parts = transport.start(request)
        let lastActivity = ClientLock(ContinuousClock.now)
        let silence = options.heartbeatTimeout
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { [weak self] in
                var parser = ServerSentEventParser(lastEventID: resumeFrom.map(String.init))
                var errorBody: (status: Int, head: HTTPURLResponse, data: Data)?
                for try await part in parts {
                    lastActivity.withLock { $0 = .now }
                    switch part {
                    case .head(let head):
                        if head.statusCode != 200 {
                            errorBody = (head.statusCode, head, Data())
                        } else if !(head.value(forHTTPHeaderField: "Content-Type") ?? "").lowercased().hasPrefix("text/event-stream") {
                            throw StreamNotPossible(
                                error: RedDotClientError(
                                    .invalidResponse,
                                    "the stream was answered with \(head.value(forHTTPHeaderField: "Content-Type") ?? "no content type"), "
                                        + "not text/event-stream (a proxy?): polling instead"))
                        }
                    case .body(let chunk):
                        if var failed = errorBody {
                            if failed.data.count < 4096 { failed.data.append(chunk.prefix(4096)) }
                            errorBody = failed
                            continue
                        }
                        guard let self else { return }
                        if !opened.withLock({ $0 }) {
                            opened.withLock { $0 = true }
                            self.state.withLock { $0.confirmed = true }
                            self.setConnection(.streaming)
                        }
                        let events = parser.feed(chunk)
                        if parser.cut > 0 {
                            throw RedDotClientError(
                                .invalidResponse, "the stream sent a line or an event of more than \(parser.maximumLineBytes) bytes: reading the whole tree")
                        }
                        if let milliseconds = parser.retryMilliseconds {
                            retry.withLock { $0 = .milliseconds(min(milliseconds, 60_000)) }
                        }
                        for event in events {
                            if event.name == "snapshot" {
                                try self.receiveFromServer(tree: Data(event.data.utf8))
                            } else {
                                try self.receive(event)
                            }
                        }
                    }
                }
                if let errorBody {
                    if errorBody.status == 404 { self?.receiveNoTree() }
                    throw Self.statusError(errorBody.status, errorBody.head, errorBody.data, what: "the stream")
                }
            }
            group.addTask {
                while true {
                    try await Task.sleep(for: silence / 4)
                    if ContinuousClock.now - lastActivity.withLock({ $0 }) > silence {
                        throw RedDotClientError(.transport, "the stream sent nothing, not even a heartbeat, for \(silence): reconnecting")
                    }
                }
            }
            defer { group.cancelAll() }
            // The stream opens with its first bytes (the server sends `retry:` at once).
            try await group.next()
        }
    }

    /// Polls on `schedule` until the task is cancelled or a refusal stops the client.
    private func poll(_ schedule: Polling, _ transport: HTTPTransport) async {
        setConnection(.polling)
        var backoff = ReconnectBackoff(initial: options.reconnectDelay, maximum: options.maximumReconnectDelay)
        var lastStart: ContinuousClock.Instant?
        var nextDue = ContinuousClock.now + schedule.initialDelay
        while !Task.isCancelled {
            // Wait for the due time, or a refresh; never start within the tolerance window.
            let now = ContinuousClock.now
            if nextDue > now { await wakeup.wait(for: nextDue - now) }
            if let lastStart, ContinuousClock.now < lastStart + schedule.toleranceWindow {
                do {
                    try await Task.sleep(until: lastStart + schedule.toleranceWindow)
                } catch {
                    return
                }
            }
            guard !Task.isCancelled else { return }
            wakeup.reset()
            lastStart = ContinuousClock.now
            do {
                try await fetchTree(transport, longPoll: schedule.longPoll)
                backoff.reset()
                setConnection(.polling)
                nextDue = ContinuousClock.now + schedule.interval
            } catch {
                // Stopped: the request's failure is the stop's doing, and the state stays idle.
                guard !Task.isCancelled, !(error is CancellationError) else { return }
                if let error = error as? RedDotClientError, error.stopsTheClient {
                    finish(failed: error)
                    return
                }
                setConnection(.waiting(Self.clientError(error)))
                nextDue = ContinuousClock.now + max(schedule.interval, backoff.next())
            }
        }
    }

    /// `GET …/badges` with `If-None-Match` (a long-poll when `longPoll` is set): a 200 updates
    /// the tree, a 304 changes nothing.
    func fetchTree(_ transport: HTTPTransport, longPoll: Duration?) async throws {
        let version = state.withLock { $0.tree.version }
        var query: [URLQueryItem] = []
        if let longPoll, version >= 0 {
            query = [
                URLQueryItem(name: "wait", value: "\(Self.milliseconds(longPoll))ms"), URLQueryItem(name: "since", value: String(version)),
            ]
        }
        var request = try await request("badges", query: query)
        if version >= 0 { request.setValue("\"\(version)\"", forHTTPHeaderField: "If-None-Match") }
        let (head, body) = try await send(request, transport, timeout: options.requestTimeout + (longPoll ?? .zero))
        switch head.statusCode {
        case 200:
            try receiveFromServer(tree: body)
        case 304:
            update { state in
                state.confirmed = true
                return false
            }
        case 404:
            // The server knows nothing of the user yet (it answers a tree the token may not
            // read the same way): an empty tree, and polling goes on.
            receiveNoTree()
        default:
            throw Self.statusError(head.statusCode, head, body, what: "the tree")
        }
    }

    /// The server has no tree for the user: an empty one at version 0 (replacing a cached tree
    /// the first time).
    private func receiveNoTree() {
        update { state in
            let authoritative = !state.confirmed
            state.confirmed = true
            return state.tree.apply(BadgeTreeState.Snapshot(version: 0, tree: nil), authoritative: authoritative)
        }
    }

    /// Sends `request`; after a 401, asks the token provider once more and sends it again.
    func send(_ request: URLRequest, _ transport: HTTPTransport, timeout: Duration) async throws -> (HTTPURLResponse, Data) {
        let answer = try await transport.send(request, timeout: timeout)
        guard answer.0.statusCode == 401, tokenProvider != nil else { return answer }
        var again = request
        try await authorize(&again)
        return try await transport.send(again, timeout: timeout)
    }

    /// A request to `…/v1/users/{user}/<tail>` with the current token.
    func request(_ tail: String, query: [URLQueryItem]) async throws -> URLRequest {
        guard let server, var components = URLComponents(url: server, resolvingAgainstBaseURL: false) else {
            throw RedDotClientError(.invalidResponse, "the client has no server")
        }
        var allowed = CharacterSet.urlPathAllowed
        allowed.remove(charactersIn: "/;")
        let user = self.user.addingPercentEncoding(withAllowedCharacters: allowed) ?? self.user
        var base = components.percentEncodedPath
        while base.hasSuffix("/") { base.removeLast() }
        components.percentEncodedPath = base + "/v1/users/\(user)/\(tail)"
        components.queryItems = query.isEmpty ? nil : query
        guard let url = components.url else { throw RedDotClientError(.invalidResponse, "no URL can be made of \(server) and \(tail)") }
        var request = URLRequest(url: url)
        try await authorize(&request)
        return request
    }

    /// Sets the token from the provider. A provider that throws (a refresh that needs the
    /// network, offline) is a passing failure: the client retries with backoff and keeps the
    /// taps queued; only the server's 401 or 403 stops it.
    private func authorize(_ request: inout URLRequest) async throws {
        guard let tokenProvider else { return }
        let token: String?
        do {
            token = try await tokenProvider()
        } catch let error as CancellationError {
            throw error
        } catch {
            throw RedDotClientError(.transport, "the token provider failed: \(error)")
        }
        request.setValue(token.map { "Bearer \($0)" }, forHTTPHeaderField: "Authorization")
    }

    /// The error for a status other than the one expected, with the server's message.
    static func statusError(_ status: Int, _ head: HTTPURLResponse, _ body: Data, what: String) -> RedDotClientError {
        // `{"error": {"code", "message"}}`, the API's error shape.
        struct Problem: Decodable {
            struct Detail: Decodable {
                var code: String?
                var message: String?
            }
            var error: Detail?
        }
        let problem = try? JSONDecoder().decode(Problem.self, from: body)
        let message = problem?.error?.message.map { ": \(String($0.prefix(500)))" } ?? ""
        let kind: RedDotClientError.Kind =
            switch status {
            case 401: .unauthorized
            case 403: .forbidden
            case 404: .notFound
            case 408, 429, 500...: .transport
            default: .server
            }
        return RedDotClientError(kind, "the server answered \(status) for \(what)\(message)", status: status)
    }

    static func clientError(_ error: any Error) -> RedDotClientError {
        (error as? RedDotClientError) ?? RedDotClientError(.transport, "\(error)")
    }

    /// Whole milliseconds of `duration` (a bounded one: see ``Options/bounded``).
    static func milliseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}

/// A stream answered with something other than an event stream: the client polls instead.
struct StreamNotPossible: Error {
    var error: RedDotClientError
}

extension RedDotClientError {
    /// Whether the client stops rather than retries (the token or the user is refused, or the
    /// request itself is wrong).
    var stopsTheClient: Bool {
        switch kind {
        case .unauthorized, .forbidden, .server: true
        case .notFound, .transport, .invalidResponse, .cache, .invalidPath: false
        }
    }
}

/// Pauses between reconnects: from `initial`, doubling up to `maximum`, each drawn between half
/// of it and all of it.
struct ReconnectBackoff {
    let initial: Duration
    let maximum: Duration
    private var upcoming: Duration

    init(initial: Duration, maximum: Duration) {
        self.initial = max(initial, .milliseconds(1))
        self.maximum = max(self.initial, maximum)
        self.upcoming = self.initial
    }

    mutating func next() -> Duration {
        let delay = upcoming
        upcoming = min(maximum, delay * 2)
        return delay / 2 + (delay / 2) * Double.random(in: 0...1)
    }

    mutating func reset() {
        upcoming = initial
    }
}

/// A wake-up call for one waiting task: ``wait(for:)`` returns after the duration, at
/// ``fire()``, or when the task is cancelled. A fire with nobody waiting is kept for the next
/// wait (until ``reset()``).
final class Wakeup: Sendable {
    private let state = ClientLock<(fired: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

    func fire() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.fired = true
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    func reset() {
        state.withLock { $0.fired = false }
    }

    func wait(for duration: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await Task.sleep(for: duration) }
            group.addTask { await self.fired() }
            await group.next()
            group.cancelAll()
            self.cancelWaiter()
        }
    }

    private func fired() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.fired {
                        state.fired = false
                        return true
                    }
                    if Task.isCancelled { return true }
                    state.waiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            self.cancelWaiter()
        }
    }

    private func cancelWaiter() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }
}
