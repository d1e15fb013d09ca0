import BadgeAPI
import BadgeStore
import Foundation
import HTTPTypes
import TestSupport
import Testing

/// Issue 28: `/v1/webhooks`, the admin API of webhook subscriptions.
@Suite("Webhook subscriptions over HTTP")
struct WebhookRouteTests {
    @Test("every route needs the admin scope: 401 without a token, 403 with a user's")
    func adminOnly() async throws {
        try await MemoryHarness.with { harness in
            let own = try await harness.token("u1")
            let routes: [(HTTPRequest.Method, String)] = [
                (.get, "/v1/webhooks"), (.put, "/v1/webhooks/crm"), (.delete, "/v1/webhooks/crm"), (.post, "/v1/webhooks/crm/replay"),
            ]
            for (method, uri) in routes {
                #expect(try await harness.call(method, uri, body: #"{"url":"https://a.example","kinds":["root"]}"#).status == .unauthorized)
                let forbidden = try await harness.call(method, uri, token: own, body: #"{"url":"https://a.example","kinds":["root"]}"#)
                #expect(forbidden.status == .forbidden && forbidden.errorCode == "forbidden", "\(forbidden.text)")
            }
            #expect(try await harness.store.webhooks(deadline: .now + .seconds(5)).isEmpty, "nothing stored by refused calls")
        }
    }

    @Test("PUT makes (201, a secret made when none is given) or replaces (200); GET hides secrets; DELETE 204 then 404; bad bodies 400 with a sentence")
    func lifecycle() async throws {
        try await MemoryHarness.with { harness in
            let admin = try await harness.token(nil, scopes: [Principal.adminScope])
            let made = try await harness.call(
                .put, "/v1/webhooks/crm", token: admin, body: #"{"url":"https://crm.example/hook","kinds":["cleared","root"],"paths":["root.chat"]}"#)
            #expect(made.status == .created, "\(made.text)")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(made.text.utf8)) as? [String: Any])
            let secret = try #require(object["secret"] as? String)
            #expect(WebhookSubscription.key(of: secret)?.count == 32 && object["paths"] as? [String] == ["root.chat"])
            let given = WebhookSubscription.makeSecret()
            let replaced = try await harness.call(
                .put, "/v1/webhooks/crm", token: admin, body: #"{"url":"https://crm.example/v2","kinds":["seen"],"secret":"\#(given)"}"#)
            #expect(replaced.status == .ok && replaced.text.contains(given), "\(replaced.text)")
            let listed = try await harness.call(.get, "/v1/webhooks", token: admin)
            #expect(listed.status == .ok && listed.text.contains("https://crm.example/v2") && !listed.text.contains(given), "\(listed.text)")
            #expect(listed.text.contains(#""paths":["root"]"#), "paths default to root: \(listed.text)")

            for (body, said) in [
                ("not json", "JSON object"), (#"{"url":"ftp://x","kinds":["root"]}"#, "url must be"),
                (#"{"url":"https://a.example","kinds":[]}"#, "kinds must"), (#"{"url":"https://a.example","kinds":["root"],"secret":"x"}"#, "secret must be"),
                (#"{"url":"https://a.example","kinds":["root"],"paths":["root.a b"]}"#, "paths:"),
            ] {
                let refused = try await harness.call(.put, "/v1/webhooks/crm", token: admin, body: body)
                #expect(refused.status == .badRequest && refused.errorCode == "invalid_webhook" && refused.text.contains(said), "\(body): \(refused.text)")
            }
            let badID = try await harness.call(.put, "/v1/webhooks/\(String(repeating: "x", count: 65))", token: admin, body: #"{"url":"https://a.example","kinds":["root"]}"#)
            #expect(badID.status == .badRequest && badID.text.contains("id must be"), "\(badID.text)")

            let replay = try await harness.call(.post, "/v1/webhooks/crm/replay", token: admin)
            #expect(replay.status == .ok && replay.text.trimmingCharacters(in: .whitespacesAndNewlines) == #"{"replayed":0}"#, "\(replay.status) \(replay.text)")
            #expect(try await harness.call(.delete, "/v1/webhooks/crm", token: admin).status == .noContent)
            let gone = try await harness.call(.delete, "/v1/webhooks/crm", token: admin)
            #expect(gone.status == .notFound && gone.errorCode == "not_found", "\(gone.text)")
            #expect(try await harness.call(.post, "/v1/webhooks/crm/replay", token: admin).status == .notFound)
            let empty = try await harness.call(.get, "/v1/webhooks", token: admin)
            #expect(empty.text.trimmingCharacters(in: .whitespacesAndNewlines) == #"{"webhooks":[]}"#, "\(empty.text)")
        }
    }
}
