public import BadgeCore

/// How `reddot serve` answers; each field has a flag and a `REDDOT_*` variable.
public struct APIConfiguration: Sendable {
    /// The address to bind (`--host`, `REDDOT_HTTP_HOST`).
    public var host: String
    /// The port (`--port`, `REDDOT_HTTP_PORT`); 0 picks a free one.
    public var port: Int
    /// The largest request body accepted on badge routes, in bytes (16 KiB).
    public var maximumBodySize: Int
    /// The largest `POST /v1/events` body (the record limit, 64 KiB, per event line; 1 MiB in all).
    public var maximumEventsBodySize: Int
    /// The longest long-poll `wait` accepted.
    public var maximumWait: Duration
    /// How long a request may wait for the database before answering 503.
    public var databaseTimeout: Duration
    /// How often a stream sends a heartbeat comment.
    public var heartbeatInterval: Duration
    /// How counts are displayed.
    public var display: BadgeDisplay
    /// Whether `GET /` serves the live view (a page that shows one user's tree, live).
    public var liveView: Bool = false

    /// Defaults: 0.0.0.0:8080, 16 KiB bodies, waits up to 60 s, 5 s database timeout, heartbeats
    /// every 15 s.
    public init(
        host: String = "0.0.0.0", port: Int = 8080, maximumBodySize: Int = 16 * 1024,
        maximumEventsBodySize: Int = 1024 * 1024, maximumWait: Duration = .seconds(60),
        databaseTimeout: Duration = .seconds(5), heartbeatInterval: Duration = .seconds(15),
        display: BadgeDisplay = BadgeDisplay()
    ) {
        self.host = host
        self.port = port
        self.maximumBodySize = maximumBodySize
        self.maximumEventsBodySize = maximumEventsBodySize
        self.maximumWait = maximumWait
        self.databaseTimeout = databaseTimeout
        self.heartbeatInterval = heartbeatInterval
        self.display = display
    }
}
