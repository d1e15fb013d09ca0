import BadgeCore
import Foundation
import HTTPTypes
import Testing

/// Query parameters and headers that once trapped the server, or could: each is answered with a
/// 4xx and a message, and the server keeps serving (issue 11).
@Suite("Hostile query values", .serialized)
struct HostileQueryTests {
    @Test("a huge wait is 400 invalid_wait, not a trap (Int64 of a Double beyond its range)")
    func hugeWait() async throws {
        try await APIHarness.with { harness in
            let token = try await harness.token("alice")
            for wait in ["1000000000000000000000000", "1e300", "99999999999999999999999999ms", "9223372036854775807s",
                "179769313486231570000000000000000000000000000000000000000000000000000000000000000000000000000000000m", "0.0000001"]
            {
                let response = try await harness.get("/v1/users/alice/badges?wait=\(wait)&since=0", token: token)
                if wait == "0.0000001" {
                    // Rounds to 0 ms: a valid wait that ends at once.
                    #expect(response.status != .badRequest, "\(wait): \(response.text)")
                } else {
                    #expect(response.status == .badRequest, "\(wait)")
                    #expect(response.errorCode == "invalid_wait", "\(wait): \(response.text)")
                }
            }
            // Still serving.
            #expect(try await harness.get("/v1/users/alice/badges", token: token).status == .ok)
        }
    }

    @Test("versions at and beyond Int64's limits in since, If-None-Match and Last-Event-ID")
    func extremeVersions() async throws {
        try await APIHarness.with { harness in
            let token = try await harness.token("alice")
            let beyond = try await harness.get("/v1/users/alice/badges?since=9223372036854775808&wait=1s", token: token)
            #expect(beyond.status == .badRequest && beyond.errorCode == "invalid_since", "\(beyond.text)")
            let multiline = try await harness.get("/v1/users/alice/badges?depth=%0A1", token: token)
            #expect(multiline.errorCode == "invalid_depth")
            var headers = HTTPFields()
            headers[.ifNoneMatch] = "\"9223372036854775807\", W/\"-9223372036854775808\", \"99999999999999999999\""
            let tagged = try await harness.get("/v1/users/alice/badges", token: token, headers: headers)
            #expect(tagged.status == .ok, "\(tagged.text)")
            let atMax = try await harness.get("/v1/users/alice/badges?wait=10ms&since=9223372036854775807", token: token)
            #expect(atMax.status == .ok || atMax.status == .notModified, "\(atMax.text)")
            var resume = HTTPFields()
            resume[try #require(HTTPField.Name("Last-Event-ID"))] = "99999999999999999999"
            let stream = try await harness.get("/v1/users/alice/badges/stream", token: token, headers: resume)
            #expect(stream.status == .badRequest && stream.errorCode == "invalid_since", "\(stream.text)")
        }
    }
}
