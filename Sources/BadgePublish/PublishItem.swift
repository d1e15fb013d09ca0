public import BadgeCore

/// A checked event ready to send: where it came from and its bytes.
public struct PublishItem: Sendable {
    /// Its line on stdin; nil for an event from flags.
    public var line: Int?
    /// The checked event.
    public var event: BadgeEvent
    /// The bytes to send, as read (or as encoded, for an event from flags).
    public var payload: [UInt8]

    /// An item.
    public init(line: Int?, event: BadgeEvent, payload: [UInt8]) {
        self.line = line
        self.event = event
        self.payload = payload
    }

    /// The record key: the user id, the first of several, or `*` for a broadcast (DESIGN §3).
    public var key: String { event.recordKey }

    /// `line 3: ` or nothing, to start a message.
    public var label: String { line.map { "line \($0): " } ?? "" }
}
