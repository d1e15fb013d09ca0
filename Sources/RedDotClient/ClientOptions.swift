public import Foundation

extension RedDotClient {
    /// How the client reaches the server and keeps its tree.
    public struct Options: Sendable {
        /// How changes reach the client.
        public var transport: Transport
        /// The folder where each user's last tree and unsent taps are kept between launches
        /// (shown at once at start, then revalidated with `If-None-Match`; the taps are sent
        /// when the server can be reached): one file per user and server, named by the client
        /// (``RedDotClient/cacheFile``), so that several accounts on one device each restore
        /// their own. Give the app's caches or application-support folder; nil keeps nothing.
        public var cacheDirectory: URL?
        /// How long a stream may stay silent before it is taken as dead and reconnected. The
        /// server sends a heartbeat every 15 s by default; keep this a few heartbeats long.
        public var heartbeatTimeout: Duration
        /// The first pause before a reconnect or a retry; it doubles after each failure, up to
        /// ``maximumReconnectDelay``, and each pause is drawn between half of it and all of it
        /// (jitter), so that a server's clients do not all come back in the same instant. A
        /// stream's `retry:` field (RedDot sends 2 s) is the least pause after that stream.
        public var reconnectDelay: Duration
        /// The longest pause between reconnects.
        public var maximumReconnectDelay: Duration
        /// How long a request (a poll, a clear, a seen) may take before it counts as failed.
        public var requestTimeout: Duration
        /// The polling used when a stream is not possible: a proxy that answers the stream with
        /// something other than `text/event-stream`.
        public var fallbackPolling: Polling

        /// Options with the defaults: a stream, no cache folder, a 45 s heartbeat timeout, reconnects
        /// from 1 s up to 60 s, 30 s requests, and ``Polling/init(initialDelay:interval:toleranceWindow:longPoll:)``'s
        /// defaults as the fallback.
        public init(
            transport: Transport = .stream, cacheDirectory: URL? = nil, heartbeatTimeout: Duration = .seconds(45),
            reconnectDelay: Duration = .seconds(1), maximumReconnectDelay: Duration = .seconds(60), requestTimeout: Duration = .seconds(30),
            fallbackPolling: Polling = Polling()
        ) {
            self.transport = transport
            self.cacheDirectory = cacheDirectory
            self.heartbeatTimeout = heartbeatTimeout
            self.reconnectDelay = reconnectDelay
            self.maximumReconnectDelay = maximumReconnectDelay
            self.requestTimeout = requestTimeout
            self.fallbackPolling = fallbackPolling
        }

        /// These options with every duration brought into 0 … 1 day (a negative one is 0; the
        /// heartbeat timeout at least 100 ms), so that no sum, doubling or clock arithmetic of the
        /// client can overflow.
        var bounded: Options {
            var options = self
            options.heartbeatTimeout = max(Self.bound(heartbeatTimeout), .milliseconds(100))  // 0 would never wait
            options.reconnectDelay = Self.bound(reconnectDelay)
            options.maximumReconnectDelay = Self.bound(maximumReconnectDelay)
            options.requestTimeout = Self.bound(requestTimeout)
            options.fallbackPolling = fallbackPolling.bounded
            if case .polling(let schedule) = transport { options.transport = .polling(schedule.bounded) }
            return options
        }

        static func bound(_ duration: Duration) -> Duration {
            min(max(duration, .zero), .seconds(86_400))
        }
    }

    /// How changes reach the client.
    public enum Transport: Sendable, Hashable {
        /// Server-Sent Events (`GET …/badges/stream`): changes arrive as they happen; a
        /// reconnect resumes from the last version (`Last-Event-ID`).
        case stream
        /// Requests of the whole tree with `If-None-Match`, on a schedule.
        case polling(Polling)
    }

    /// A polling schedule (the polling notes' rules).
    ///
    /// The first request goes out `initialDelay` after ``RedDotClient/start()``. Each next one
    /// goes out `interval` after the previous one ended, and never sooner than `toleranceWindow`
    /// after the previous one started — also when the app asks for one with
    /// ``RedDotClient/refresh()``. At most one request is in flight. A 304 costs no callback,
    /// and an empty or unreadable answer changes nothing: it never hides a dot.
    ///
    /// So with a 2 s interval and a 5 s tolerance window, requests start every 5 s: 7 in 30 s
    /// (at 0, 5, …, 30 s) when answers are quick.
    public struct Polling: Sendable, Hashable {
        /// The pause before the first request.
        public var initialDelay: Duration
        /// The pause from the end of one request to the start of the next.
        public var interval: Duration
        /// The least time between the starts of two requests.
        public var toleranceWindow: Duration
        /// When set, each request is a long-poll (`?wait=…&since=VERSION`): the server holds it
        /// until the tree changes or this much time passed (at most the server's maximum wait,
        /// 60 s by default).
        public var longPoll: Duration?

        /// A schedule; the defaults poll every 30 s, at most once in 5 s, without long-polls.
        public init(
            initialDelay: Duration = .zero, interval: Duration = .seconds(30), toleranceWindow: Duration = .seconds(5), longPoll: Duration? = nil
        ) {
            self.initialDelay = initialDelay
            self.interval = interval
            self.toleranceWindow = toleranceWindow
            self.longPoll = longPoll
        }

        /// This schedule with every duration in 0 … 1 day.
        var bounded: Polling {
            Polling(
                initialDelay: Options.bound(initialDelay), interval: Options.bound(interval),
                toleranceWindow: Options.bound(toleranceWindow), longPoll: longPoll.map(Options.bound))
        }
    }

    /// Where the client's connection to the server stands.
    public enum ConnectionState: Sendable, Hashable {
        /// Not started, or stopped.
        case idle
        /// Connecting (or reconnecting) to the stream, or revalidating the offline tree.
        case connecting
        /// A stream is open: changes arrive as they happen.
        case streaming
        /// Polling; the last request succeeded.
        case polling
        /// The last attempt failed with `error`; the next one follows after a pause.
        case waiting(RedDotClientError)
        /// Stopped for good by `error` (a refused token, a user the token may not read): the
        /// client does not retry by itself. Call ``RedDotClient/start()`` again, with a token
        /// provider that now gives a valid token.
        case failed(RedDotClientError)
    }
}
