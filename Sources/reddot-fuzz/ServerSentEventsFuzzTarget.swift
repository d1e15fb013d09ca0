import Foundation
import RedDotClient

/// Server-Sent Events as the Swift client reads them: the same bytes give the same events in one
/// chunk and split at the points the input's first byte picks; no event's name or id holds a
/// line end, nor its data a CR; every event fed to a client either applies or is refused with an error, and the
/// client's version never goes back.
enum ServerSentEventsFuzzTarget {
    static let target = FuzzTarget.sse

    static func run(_ bytes: [UInt8]) {
        guard let first = bytes.first else { return }
        let body = Array(bytes.dropFirst())
        var whole = ServerSentEventParser(maximumLineBytes: 4_096)
        let expected = whole.feed(body)
        var split = ServerSentEventParser(maximumLineBytes: 4_096)
        var events: [ServerSentEvent] = []
        let step = Int(first % 16) + 1
        var start = 0
        while start < body.count {
            let end = min(start + step, body.count)
            events += split.feed(body[start..<end])
            start = end
        }
        FuzzFailure.check(events == expected, target, "chunks of \(step) bytes give other events than one chunk")
        FuzzFailure.check(split.lastEventID == whole.lastEventID, target, "the last event id depends on the chunks")
        FuzzFailure.check(split.cut == whole.cut, target, "what is cut depends on the chunks")
        // Only CR and LF end lines (a vertical tab or U+2028 is text): a name or an id holds
        // neither, data holds the LFs that join its lines and no CR.
        let lineEnds: (Unicode.Scalar) -> Bool = { $0 == "\n" || $0 == "\r" }
        for event in expected {
            FuzzFailure.check(!event.name.unicodeScalars.contains(where: lineEnds), target, "an event name holds a line end")
            FuzzFailure.check(!(event.lastEventID ?? "").unicodeScalars.contains(where: lineEnds), target, "an id holds a line end")
            FuzzFailure.check(!event.data.unicodeScalars.contains("\r"), target, "data holds a carriage return")
        }
        let client = RedDotClient(user: "fuzz")
        var version = client.version
        for event in expected {
            do {
                try client.receive(event)
            } catch {
                FuzzFailure.checkMessage("\(error)", target)
            }
            FuzzFailure.check(client.version >= version, target, "the client's version went back")
            version = client.version
        }
    }
}
