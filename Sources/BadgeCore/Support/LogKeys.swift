/// The metadata keys of RedDot's own log lines, named once (LibPQ's and RdKafka's keep theirs
/// in their own `LogKey`: `db.*`, `kafka.*`). A log search for a key finds every line that has it.
public enum RedDotLogKey {
    /// The error a line reports.
    public static let error = "error"
    /// A user id.
    public static let user = "user"
    /// A push device's id.
    public static let device = "device"
    /// A webhook delivery's id.
    public static let delivery = "id"
    /// A webhook subscription's id.
    public static let subscription = "subscription"
    /// A reason given by a provider or a receiver.
    public static let reason = "reason"
}
