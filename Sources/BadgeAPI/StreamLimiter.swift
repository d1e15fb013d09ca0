import Hummingbird
import Metrics
import Synchronization

/// Counts the open streams and long-polls of a process, in all and per user, and refuses one
/// over ``ServerLimits/maximumStreams`` (503) or ``ServerLimits/maximumStreamsPerUser`` (429),
/// both with `Retry-After`.
///
/// A slot is held by a ``Permit``: released when the permit is released or deallocated, so a
/// response that Hummingbird drops without writing (the client went away first) gives its slot
/// back too.
final class StreamLimiter: Sendable {
    private let maximum: Int
    private let maximumPerUser: Int
    private let retryAfterSeconds: Int
    private let state = Mutex(State())
    private let refusedByServer = Counter(label: "reddot_api_streams_refused_total", dimensions: [("limit", "server")])
    private let refusedByUser = Counter(label: "reddot_api_streams_refused_total", dimensions: [("limit", "user")])

    private struct State {
        var open = 0
        var byUser: [String: Int] = [:]
    }

    init(limits: ServerLimits) {
        maximum = limits.maximumStreams
        maximumPerUser = limits.maximumStreamsPerUser
        retryAfterSeconds = limits.retryAfterSeconds
    }

    /// Open streams and long-polls now.
    var openCount: Int { state.withLock { $0.open } }

    /// A slot for `user` (the user id as the path names it), or the error to answer with.
    func acquire(_ user: String) -> Result<Permit, APIError> {
        enum Outcome { case granted, server, user }
        let outcome: Outcome = state.withLock { state in
            if state.open >= maximum { return .server }
            let mine = state.byUser[user, default: 0]
            if mine >= maximumPerUser { return .user }
            state.open += 1
            state.byUser[user] = mine + 1
            return .granted
        }
        var headers = HTTPFields()
        headers[.retryAfter] = "\(retryAfterSeconds)"
        switch outcome {
        case .granted:
            return .success(Permit(limiter: self, user: user))
        case .server:
            refusedByServer.increment()
            return .failure(
                APIError(
                    .serviceUnavailable, code: "too_many_streams",
                    message: "this server holds its limit of \(maximum) streams and long-polls; retry after \(retryAfterSeconds) s or on another instance",
                    headers: headers))
        case .user:
            refusedByUser.increment()
            return .failure(
                APIError(
                    .tooManyRequests, code: "too_many_streams",
                    message: "this user has \(maximumPerUser) streams and long-polls open on this server, the most allowed; close one, or retry after \(retryAfterSeconds) s",
                    headers: headers))
        }
    }

    fileprivate func release(_ user: String) {
        state.withLock { state in
            state.open -= 1
            let mine = (state.byUser[user] ?? 1) - 1
            state.byUser[user] = mine > 0 ? mine : nil
        }
    }

    /// One stream's slot; given back once, by ``release()`` or when deallocated.
    final class Permit: Sendable {
        private let limiter: StreamLimiter
        private let user: String
        private let released = Atomic<Bool>(false)

        fileprivate init(limiter: StreamLimiter, user: String) {
            self.limiter = limiter
            self.user = user
        }

        func release() {
            if !released.exchange(true, ordering: .acquiringAndReleasing) { limiter.release(user) }
        }

        deinit { release() }
    }
}
