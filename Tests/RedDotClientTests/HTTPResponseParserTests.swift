import RedDotClient
import Testing

/// The client's HTTP/1.1 response reader (its fuzz target is `response`): header values as sent,
/// without the blanks around them.
@Suite("HTTP response parser")
struct HTTPResponseParserTests {
    @Test("a field value loses its spaces and tabs as bytes, even before a combining mark")
    func fieldValues() throws {
        var parser = HTTPResponseParser()
        let head = "HTTP/1.1 200 OK\r\nETag: \t\"7\" \r\nX-Mark: \u{301}a\t\r\nContent-Length: 0\r\n\r\n"
        let outputs = try parser.feed(Array(head.utf8))
        guard case .head(let status, let headers) = outputs.first else {
            Issue.record("no head in \(outputs)")
            return
        }
        #expect(status == 200)
        #expect(headers.map(\.value) == ["\"7\"", "\u{301}a", "0"])
        #expect(outputs.last == .end)
    }
}
