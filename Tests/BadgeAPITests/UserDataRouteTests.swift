import BadgeAPI
import BadgeCore
import BadgeStore
import Foundation
import HTTPTypes
import TestSupport
import Testing

/// Issue 28: `GET /v1/users/{user}/export` and `DELETE /v1/users/{user}`, for administrators.
@Suite("A user's data on request over HTTP")
struct UserDataRouteTests {
    @Test("export and erasure need the admin scope: 401 without a token, 403 with the user's own, 400 for a bad id")
    func adminOnly() async throws {
        try await MemoryHarness.with { harness in
            try await harness.apply([BadgeMutation(user: user("u1"), path: path("root.a"), operation: .increment(by: 1))])
            let own = try await harness.token("u1")
            for (method, uri) in [(HTTPRequest.Method.get, "/v1/users/u1/export"), (.delete, "/v1/users/u1")] {
                #expect(try await harness.call(method, uri).status == .unauthorized)
                let forbidden = try await harness.call(method, uri, token: own)
                #expect(forbidden.status == .forbidden && forbidden.errorCode == "forbidden", "\(forbidden.text)")
            }
            let admin = try await harness.token(nil, scopes: [Principal.adminScope])
            let bad = try await harness.call(.get, "/v1/users/\(String(repeating: "x", count: 129))/export", token: admin)
            #expect(bad.status == .badRequest && bad.errorCode == "invalid_user", "\(bad.text)")
            #expect(try await harness.get("/v1/users/u1/badges", token: own).status == .ok, "nothing was erased by the refused calls")
        }
    }

    @Test("an administrator exports a user's rows and erases them; the user's tree is then empty, another's unchanged")
    func exportThenErase() async throws {
        try await APIHarness.with { harness in
            _ = try await harness.store.apply(
                [
                    BadgeMutation(user: user("ana"), path: path("root.chat.c1"), operation: .increment(by: 2)),
                    BadgeMutation(user: user("ben"), path: path("root.chat.c1"), operation: .increment(by: 3)),
                ], recomputeNow: true)
            let admin = try await harness.token(nil, scopes: [Principal.adminScope])
            let exported = try await harness.call(.get, "/v1/users/ana/export", token: admin)
            #expect(exported.status == .ok, "\(exported.text)")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(exported.text.utf8)) as? [String: Any])
            let tables = try #require(object["tables"] as? [String: [[String: Any]]])
            #expect(tables["badge_aggregate"]?.contains { $0["path"] as? String == "root.chat.c1" && $0["count"] as? Int == 2 } == true, "\(tables["badge_aggregate"] ?? [])")
            #expect(tables.values.joined().allSatisfy { $0["user_id"] as? String == "ana" })

            let erased = try await harness.call(.delete, "/v1/users/ana", token: admin)
            #expect(erased.status == .ok, "\(erased.text)")
            let answer = try #require(try JSONSerialization.jsonObject(with: Data(erased.text.utf8)) as? [String: Any])
            #expect(answer["user"] as? String == "ana" && answer["settled"] as? Bool == true)
            // Its aggregates: root, root.chat and root.chat.c1.
            #expect(((answer["rows"] as? [String: Int]) ?? [:])["badge_aggregate"] == 3, "\(erased.text)")
            #expect(try await harness.store.tree(for: user("ana")).tree?.count ?? 0 == 0)
            #expect(try await harness.store.tree(for: user("ben"), at: path("root.chat.c1")).tree?.count == 3)
            let again = try await harness.call(.get, "/v1/users/ana/export", token: admin)
            let after = try #require(try JSONSerialization.jsonObject(with: Data(again.text.utf8)) as? [String: Any])
            #expect((after["tables"] as? [String: [Any]])?.filter { !$0.value.isEmpty }.keys.sorted() == ["erased_user"])
        }
    }
}
