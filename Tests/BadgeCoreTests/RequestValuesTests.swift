import BadgeCore
import Testing

/// The query service's values read from untrusted text (issue 11): in range, or refused with a
/// code and a one-line message; never a trap.
@Suite("Request values")
struct RequestValuesTests {
    @Test("wait: durations beyond Int64 milliseconds are invalid_wait, not a trap")
    func hugeWaits() {
        for text in ["1000000000000000000000000", "1e300", "99999999999999999999999999ms", "9223372036854775807s", "9223372036854776m",
            String(repeating: "9", count: 400)]
        {
            #expect(RequestValues.duration(text) == nil, "\(text)")
            #expect(throws: RequestValueError.self, "\(text)") { try RequestValues.wait(text, maximum: .seconds(60)) }
        }
        #expect(RequestValues.duration("1000000000s") == .seconds(1_000_000_000))
        #expect(RequestValues.duration("1000000001s") == nil)
        #expect(RequestValues.duration("30s") == .seconds(30))
        #expect(RequestValues.duration("500ms") == .milliseconds(500))
        #expect(RequestValues.duration("2m") == .seconds(120))
        #expect(RequestValues.duration("1.5") == .milliseconds(1500))
        #expect(RequestValues.duration("0.0004") == .zero)
        do {
            _ = try RequestValues.wait("1e300", maximum: .seconds(60))
            Issue.record("1e300 was accepted")
        } catch {
            #expect(error.code == "invalid_wait")
            #expect(error.message == "wait must be a duration such as 30s or 500ms, at most 60.0 seconds, not '1e300'")
        }
    }

    @Test("since, depth and Last-Event-ID at Int64's limits")
    func integerLimits() throws {
        #expect(try RequestValues.since("9223372036854775807") == .max)
        #expect(throws: RequestValueError("invalid_since", "since must be a version (an integer ≥ 0), not '9223372036854775808'")) {
            try RequestValues.since("9223372036854775808")
        }
        #expect(throws: RequestValueError.self) { try RequestValues.depth("99999999999999999999") }
        #expect(try RequestValues.depth("16") == 16)
        #expect(try RequestValues.resumeVersion(since: " 7 ", lastEventID: "\t9223372036854775807 ") == .max)
        #expect(try RequestValues.resumeVersion(since: nil, lastEventID: nil) == nil)
        #expect(throws: RequestValueError.self) { try RequestValues.resumeVersion(since: "1", lastEventID: "-1") }
    }

    @Test("messages quote the value on one line")
    func oneLineMessages() {
        do {
            _ = try RequestValues.depth("\n1")
            Issue.record("accepted")
        } catch {
            #expect(error.message == "depth must be an integer from 0 to 16, not '\\n1'")
        }
    }

    @Test("paths: at most 100, each valid")
    func paths() throws {
        #expect(try RequestValues.paths("root.a,root.b").map(\.rawValue) == ["root.a", "root.b"])
        #expect(throws: RequestValueError.self) { try RequestValues.paths(Array(repeating: "root", count: 101).joined(separator: ",")) }
        #expect(throws: RequestValueError.self) { try RequestValues.paths("root.a,") }
    }

    @Test("If-None-Match: versions beyond Int64 are not versions; W/ is ignored")
    func entityTags() throws {
        let tags = try #require(EntityTags("\"99999999999999999999\", W/\"7\""))
        #expect(tags.firstVersion == 7)
        #expect(tags.matches(7) && !tags.matches(8))
        #expect(EntityTags("*")?.matches(.max) == true)
        #expect(EntityTags("\"")?.firstVersion == nil)
        #expect(EntityTags(nil) == nil)
        // A comma followed by a combining mark still separates two tags.
        #expect(EntityTags("\"8\",\u{301}\"7\"")?.tags == ["\"8\"", "\u{301}\"7\""])
    }

    @Test("the bearer token: scheme case-insensitive, blanks trimmed; anything else invalid_request")
    func bearer() throws {
        #expect(try BearerToken(authorization: "bearer \t a.b.c \t").text == "a.b.c")
        #expect(throws: RequestValueError.self) { try BearerToken(authorization: "Basic x") }
        #expect(throws: RequestValueError.self) { try BearerToken(authorization: "") }
        #expect(throws: RequestValueError.self) { try BearerToken(authorization: nil) }
        // Blanks and the separating space are Unicode scalars: a combining mark after one makes a
        // single Character with it, and the blank still counts (found by the http fuzz target).
        let mark = "\u{06DF}"
        let marked = try BearerToken(authorization: "Bearer \t" + mark)
        #expect(marked.text == mark)
        #expect(try BearerToken(authorization: "Bearer " + marked.text) == marked)
        #expect(try BearerToken(authorization: "Bearer \u{301}a.b.c").text == "\u{301}a.b.c")
        // A header segment of padding-free base64url JSON, then any two segments.
        let header = try #require(BearerToken(text: "eyJhbGciOiJIUzI1NiIsImtpZCI6ImsifQ.x.y").header)
        #expect(header.alg == "HS256" && header.kid == "k")
        #expect(BearerToken(text: "\u{0600}.x.y").header == nil)
        #expect(BearerToken(text: "a.b").header == nil)
    }
}
