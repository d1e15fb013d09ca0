import RedDotClient
import Testing

@Suite("The client's Server-Sent Events parser")
struct ServerSentEventParserTests {
    func parse(_ text: String, lastEventID: String? = nil) -> [ServerSentEvent] {
        var parser = ServerSentEventParser(lastEventID: lastEventID)
        return parser.feed(Array(text.utf8))
    }

    @Test("data lines join with newlines; comments, unknown fields and events without data are dropped")
    func basics() {
        let events = parse(": heartbeat\n\ndata: YHOO\ndata: +2\ndata: 10\n\nevent: change\nfoo: bar\ndata:x\n\nevent: empty\n\n")
        #expect(events == [
            ServerSentEvent(name: "message", data: "YHOO\n+2\n10", lastEventID: nil),
            ServerSentEvent(name: "change", data: "x", lastEventID: nil),
        ])
    }

    @Test("ids carry over to later events; an id with NUL is ignored; retry takes digits only")
    func idsAndRetry() {
        var parser = ServerSentEventParser(lastEventID: "3")
        let events = parser.feed(Array("data: a\n\nid: 7\ndata: b\n\nid: 8\u{0}\ndata: c\n\nretry: 2000\nretry: 1x\n\n".utf8))
        #expect(events.map(\.lastEventID) == ["3", "7", "7"])
        #expect(parser.lastEventID == "7")
        #expect(parser.retryMilliseconds == 2000)
    }

    @Test("CR LF, LF and CR all end lines; a byte order mark at the start is skipped; a field alone has an empty value")
    func lineEnds() {
        #expect(parse("\u{FEFF}data: a\r\n\r\ndata: b\r\rdata\n\n").map(\.data) == ["a", "b", ""])
    }

    @Test("any split of the bytes into chunks gives the same events", arguments: 0..<50)
    func chunking(seed: UInt64) {
        let stream = "retry: 2000\r\n\r\nid: 1\nevent: snapshot\ndata: {\"a\":1}\r\n\r\n: heartbeat\r\rid: 2\revent: change\rdata: x\rdata: y\r\r"
        let bytes = Array(stream.utf8)
        var whole = ServerSentEventParser()
        let expected = whole.feed(bytes)
        #expect(expected.count == 2)
        var random = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        var parser = ServerSentEventParser()
        var events: [ServerSentEvent] = []
        var start = 0
        while start < bytes.count {
            random = random &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let length = 1 + Int((random >> 33) % 7)
            let end = min(start + length, bytes.count)
            events += parser.feed(bytes[start..<end])
            start = end
        }
        #expect(events == expected)
    }

    @Test("a line longer than the limit is cut, not held; invalid UTF-8 is replaced")
    func limits() {
        var parser = ServerSentEventParser(maximumLineBytes: 16)
        let events = parser.feed(Array(("data: " + String(repeating: "x", count: 100) + "\n\n").utf8) + [0x64, 0x61, 0x74, 0x61, 0x3A, 0xFF, 0x0A, 0x0A])
        #expect(events.map(\.data) == ["xxxxxxxxxx", "\u{FFFD}"])
        #expect(parser.cut == 1, "the long line is counted, so that the client can tell")
        // Data lines that each fit but together outgrow the limit: the event is dropped, counted.
        let many = parser.feed(Array("data: 12345\ndata: 67890\ndata: abcde\n\ndata: ok\n\n".utf8))
        #expect(many.map(\.data) == ["ok"])
        #expect(parser.cut == 2)
    }
}
