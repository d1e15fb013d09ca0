/// One Server-Sent Event, as the WHATWG event-stream format defines it.
public struct ServerSentEvent: Sendable, Hashable {
    /// The event type (`event:`); `message` when the event named none.
    public var name: String
    /// The data (`data:` lines joined with newlines).
    public var data: String
    /// The last event id the stream set (`id:`), carried over from earlier events; nil when none
    /// was ever set. A reconnecting client sends it as `Last-Event-ID`.
    public var lastEventID: String?

    /// An event with the given fields.
    public init(name: String, data: String, lastEventID: String?) {
        self.name = name
        self.data = data
        self.lastEventID = lastEventID
    }
}

/// Turns the bytes of a `text/event-stream` body, in chunks of any size, into events.
///
/// Follows the WHATWG rules: lines end in CR LF, LF or CR (a CR LF split across two chunks is
/// one line end); a line starting with `:` is a comment (a heartbeat); `field: value` (one space
/// after the colon dropped); `data` lines accumulate; a blank line dispatches the event, unless
/// it has no data; an `id` containing NUL is ignored; `retry` takes digits only; a leading UTF-8
/// byte order mark is skipped. Invalid UTF-8 is replaced, never trapped on.
public struct ServerSentEventParser: Sendable {
    private var line: [UInt8] = []
    private var afterCarriageReturn = false
    private var atStart = true
    private var name = ""
    private var data: [String] = []
    private var hasData = false
    /// The last event id set by the stream (carried across events and reconnects).
    public private(set) var lastEventID: String?
    /// The reconnection time the stream asked for (`retry:`), in milliseconds.
    public private(set) var retryMilliseconds: Int?
    /// The most bytes one line, and one event's data, may hold; longer lines are cut and such
    /// data dropped (a hostile or broken server cannot make the client hold unbounded bytes),
    /// each counted in ``cut``.
    public let maximumLineBytes: Int
    /// How many lines were cut, or events' data dropped, for ``maximumLineBytes``: an event
    /// the reader would see damaged. The client ends such a stream and reads the whole tree.
    public private(set) var cut = 0
    private var dataBytes = 0
    private var lineCut = false
    private var dataCut = false

    /// A parser that resumes after `lastEventID` (the id a previous connection ended with).
    public init(lastEventID: String? = nil, maximumLineBytes: Int = 16 << 20) {
        self.lastEventID = lastEventID
        self.maximumLineBytes = max(1, maximumLineBytes)
    }

    /// Parses the next chunk of the body; returns the events it completed, in order.
    public mutating func feed(_ bytes: some Sequence<UInt8>) -> [ServerSentEvent] {
        var events: [ServerSentEvent] = []
        for byte in bytes {
            if afterCarriageReturn {
                afterCarriageReturn = false
                if byte == 0x0A { continue }  // the LF of a CR LF
            }
            switch byte {
            case 0x0D:
                afterCarriageReturn = true
                if let event = endLine() { events.append(event) }
            case 0x0A:
                if let event = endLine() { events.append(event) }
            default:
                if line.count < maximumLineBytes {
                    line.append(byte)
                } else if !lineCut {
                    lineCut = true
                    cut += 1
                }
            }
        }
        return events
    }

    private mutating func endLine() -> ServerSentEvent? {
        var bytes = line[...]
        line.removeAll(keepingCapacity: true)
        lineCut = false
        if atStart {
            atStart = false
            if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes = bytes.dropFirst(3) }
        }
        if bytes.isEmpty { return dispatch() }
        if bytes.first == 0x3A { return nil }  // ":" a comment
        let fieldBytes: ArraySlice<UInt8>
        var valueBytes: ArraySlice<UInt8>
        if let colon = bytes.firstIndex(of: 0x3A) {
            fieldBytes = bytes[..<colon]
            valueBytes = bytes[bytes.index(after: colon)...]
            if valueBytes.first == 0x20 { valueBytes = valueBytes.dropFirst() }
        } else {
            fieldBytes = bytes
            valueBytes = []
        }
        let field = String(decoding: fieldBytes, as: UTF8.self)
        let text = String(decoding: valueBytes, as: UTF8.self)
        switch field {
        case "event":
            name = text
        case "data":
            dataBytes += valueBytes.count + 1
            if dataBytes > maximumLineBytes {
                if !dataCut {
                    dataCut = true
                    cut += 1
                }
                data = []
            } else {
                data.append(text)
            }
            hasData = true
        case "id":
            if !valueBytes.contains(0) { lastEventID = text }
        case "retry":
            if !valueBytes.isEmpty, valueBytes.allSatisfy({ (0x30...0x39).contains($0) }), let milliseconds = Int(text) {
                retryMilliseconds = milliseconds
            }
        default:
            break  // unknown fields are ignored
        }
        return nil
    }

    private mutating func dispatch() -> ServerSentEvent? {
        defer {
            name = ""
            data = []
            hasData = false
            dataBytes = 0
            dataCut = false
        }
        guard hasData, !dataCut else { return nil }
        return ServerSentEvent(name: name.isEmpty ? "message" : name, data: data.joined(separator: "\n"), lastEventID: lastEventID)
    }
}
