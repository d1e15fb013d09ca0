import HummingbirdCore
import Metrics

/// Counts the open HTTP connections into `reddot_api_connections` and, with a maximum, stops
/// accepting at it (new connections wait in the listen backlog until one closes).
///
/// Hummingbird calls it on the server channel's event loop only, one call at a time.
struct ConnectionCounter: AvailableConnectionsDelegate {
    /// Open connections at most; nil: no limit.
    let maximum: Int?
    private let gauge = Gauge(label: "reddot_api_connections")
    private var open = 0

    init(maximum: Int?) {
        self.maximum = maximum
    }

    mutating func connectionOpened() {
        open += 1
        gauge.record(open)
    }

    mutating func connectionClosed() {
        open -= 1
        gauge.record(open)
    }

    func isAcceptingNewConnections() -> Bool {
        guard let maximum else { return true }
        return open < maximum
    }
}
