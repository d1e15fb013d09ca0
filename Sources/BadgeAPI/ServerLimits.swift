/// What one `reddot serve` process lets clients hold: connections, idle and unfinished requests,
/// header sizes, and open streams. Each field has a flag and a `REDDOT_*` variable
/// (deploy/README.md, "Serving").
///
/// These are the limits a hostile or broken client meets: a request line or headers that never
/// finish, a body that never comes, thousands of streams from one token.
public struct ServerLimits: Sendable {
    /// A connection with no complete request part for this long is closed: a request line or
    /// headers that never finish (slowloris), a body that stops, an idle keep-alive connection.
    /// A request being answered (a stream, a long-poll) is never cut by it. Nil: never
    /// (`--idle-timeout-seconds`, `REDDOT_HTTP_IDLE_TIMEOUT_SECONDS`).
    public var idleTimeout: Duration?
    /// A request body must arrive within this, else 408 (a body sent one byte at a time)
    /// (`--body-timeout-seconds`, `REDDOT_HTTP_BODY_TIMEOUT_SECONDS`).
    public var bodyTimeout: Duration
    /// Open connections at most; beyond it, new connections wait in the listen backlog until one
    /// closes. Nil: no limit (`--max-connections`, `REDDOT_HTTP_MAX_CONNECTIONS`).
    public var maximumConnections: Int?
    /// Open streams and long-polls in this process at most; beyond it, 503 with `Retry-After`
    /// (`--max-streams`, `REDDOT_HTTP_MAX_STREAMS`).
    public var maximumStreams: Int
    /// Open streams and long-polls of one user at most; beyond it, 429 with `Retry-After`
    /// (`--max-streams-per-user`, `REDDOT_HTTP_MAX_STREAMS_PER_USER`).
    public var maximumStreamsPerUser: Int
    /// The largest header line (name and value), in bytes; beyond it, 400 and the connection
    /// closes. Also bounds the request line.
    public var maximumHeaderFieldSize: Int
    /// The largest header section (all header lines), in bytes; beyond it, 400.
    public var maximumHeaderListSize: Int
    /// The most header lines in a request; beyond it, 400.
    public var maximumHeaderCount: Int
    /// The `Retry-After` seconds of a refused stream.
    public var retryAfterSeconds: Int

    /// Defaults: 30 s idle, 10 s for a body, no connection limit, 10,000 streams and 32 per
    /// user, 32 KiB header lines (and request line), 64 KiB of headers, 100 header lines.
    public init(
        idleTimeout: Duration? = .seconds(30), bodyTimeout: Duration = .seconds(10), maximumConnections: Int? = nil,
        maximumStreams: Int = 10_000, maximumStreamsPerUser: Int = 32, maximumHeaderFieldSize: Int = 32 * 1024,
        maximumHeaderListSize: Int = 64 * 1024, maximumHeaderCount: Int = 100, retryAfterSeconds: Int = 5
    ) {
        self.idleTimeout = idleTimeout
        self.bodyTimeout = bodyTimeout
        self.maximumConnections = maximumConnections
        self.maximumStreams = maximumStreams
        self.maximumStreamsPerUser = maximumStreamsPerUser
        self.maximumHeaderFieldSize = maximumHeaderFieldSize
        self.maximumHeaderListSize = maximumHeaderListSize
        self.maximumHeaderCount = maximumHeaderCount
        self.retryAfterSeconds = retryAfterSeconds
    }
}
