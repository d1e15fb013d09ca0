@testable import BadgeAPI
import BadgeCore
import BadgeStore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import LibPQ
import TestSupport
import Testing
import Yams

/// The routes over the in-memory store: no PostgreSQL (APIDatabaseTests has what needs one).
@Suite("The query service's routes", .serialized)
struct APIRouteTests {
    @Test("tree, subtree, depth and several nodes, in the shape of reddot badges show")
    func reads() async throws {
        try await MemoryHarness.with { harness in
            let alice = user("alice")
            try await harness.apply([
                BadgeMutation(user: alice, path: path("root.chat.c1"), operation: .increment(by: 2)),
                BadgeMutation(user: alice, path: path("root.chat.c2"), operation: .set(count: 120, icon: nil)),
                BadgeMutation(user: alice, path: path("root.promo.p1"), operation: .set(count: 0, icon: try BadgeIcon(validating: "hot"))),
            ])
            let token = try await harness.token("alice")
            let whole = try await harness.get("/v1/users/alice/badges", token: token)
            #expect(whole.status == .ok)
            let tree = try whole.tree()
            #expect(tree.tree == (try await harness.store.tree(for: alice)).tree)
            #expect(tree.tree?.count == 122 && tree.tree?.text == "99+")
            #expect(whole.headers[.eTag] == "\"\(tree.version)\"")

            let subtree = try await harness.get("/v1/users/alice/badges?path=root.chat&depth=0", token: token).tree()
            #expect(subtree.tree?.path.rawValue == "root.chat" && subtree.tree?.count == 122 && subtree.tree?.children.isEmpty == true)

            let nothing = try await harness.get("/v1/users/alice/badges?path=root.none", token: token)
            #expect(nothing.status == .ok)
            #expect(try nothing.tree().tree == nil)

            let nodes = try await harness.get("/v1/users/alice/badges?paths=root.chat.c1,root.promo.p1,root.none", token: token)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(nodes.text.utf8)) as? [String: Any])
            let list = try #require(object["nodes"] as? [[String: Any]])
            #expect(list.map { $0["path"] as? String } == ["root.chat.c1", "root.promo.p1", "root.none"])
            #expect(list.map { $0["count"] as? Int } == [2, 0, 0])
            #expect(list.map { $0["shown"] as? Bool } == [true, true, false])
            #expect(list[1]["icon"] as? String == "hot")
            #expect(list[2]["icon"] is NSNull && list[2]["text"] is NSNull)

            // User ids may hold '/' and '%': the path segment is percent-decoded.
            try await harness.apply([BadgeMutation(user: user("50%off/x"), path: path("root.a"), operation: .increment(by: 1))])
            let odd = try await harness.get("/v1/users/50%25off%2Fx/badges", token: try await harness.token("50%off/x"))
            #expect(odd.status == .ok, "\(odd.text)")
            #expect(try odd.tree().user.rawValue == "50%off/x")
        }
    }

    @Test("invalid input is refused with 400 and a message, before any SQL")
    func validation() async throws {
        try await MemoryHarness.with { harness in
            let token = try await harness.token("alice")
            let cases: [(uri: String, code: String)] = [
                ("/v1/users/alice/badges?path=root..a", "invalid_path"),
                ("/v1/users/alice/badges?path=root.a*", "invalid_path"),
                ("/v1/users/alice/badges?path=chat", "invalid_path"),
                ("/v1/users/alice/badges?depth=17", "invalid_depth"),
                ("/v1/users/alice/badges?depth=-1", "invalid_depth"),
                ("/v1/users/alice/badges?paths=root.a,root.b&depth=1", "invalid_query"),
                ("/v1/users/alice/badges?paths=root.a,", "invalid_path"),
                ("/v1/users/alice/badges?wait=61s&since=0", "invalid_wait"),
                ("/v1/users/alice/badges?wait=soon&since=0", "invalid_wait"),
                ("/v1/users/alice/badges?wait=1s", "invalid_query"),
                ("/v1/users/alice/badges?since=-3&wait=1s", "invalid_since"),
            ]
            for (uri, code) in cases {
                let response = try await harness.get(uri, token: token)
                #expect(response.status == .badRequest, "\(uri)")
                #expect(response.errorCode == code, "\(uri): \(response.text)")
            }
            let longUser = String(repeating: "x", count: 129)
            let admin = try await harness.token(nil, scopes: [Principal.adminScope])
            #expect(try await harness.get("/v1/users/\(longUser)/badges", token: admin).errorCode == "invalid_user")
            let unknown = try await harness.get("/v1/nothing", token: token)
            #expect(unknown.status == .notFound && unknown.errorCode == "not_found")
        }
    }

    @Test("ETag from the version; If-None-Match answers 304 until the tree changes")
    func etags() async throws {
        try await MemoryHarness.with { harness in
            let bob = user("bob")
            try await harness.apply([BadgeMutation(user: bob, path: path("root.a"), operation: .increment(by: 1))])
            let token = try await harness.token("bob")
            let first = try await harness.get("/v1/users/bob/badges", token: token)
            let etag = try #require(first.headers[.eTag])
            var headers = HTTPFields()
            headers[.ifNoneMatch] = etag
            let again = try await harness.get("/v1/users/bob/badges", token: token, headers: headers)
            #expect(again.status == .notModified)
            #expect(again.body.readableBytes == 0)
            #expect(again.headers[.eTag] == etag)
            headers[.ifNoneMatch] = "W/\(etag), \"other\""
            #expect(try await harness.get("/v1/users/bob/badges", token: token, headers: headers).status == .notModified)

            try await harness.apply([BadgeMutation(user: bob, path: path("root.a"), operation: .increment(by: 1))])
            headers[.ifNoneMatch] = etag
            let changed = try await harness.get("/v1/users/bob/badges", token: token, headers: headers)
            #expect(changed.status == .ok)
            #expect(changed.headers[.eTag] != etag)
            #expect(try changed.tree().tree?.count == 2)
        }
    }

    @Test("a long-poll wakes up on a change, and answers 304 when its wait passes")
    func longPoll() async throws {
        try await MemoryHarness.with { harness in
            let carol = user("carol")
            try await harness.apply([BadgeMutation(user: carol, path: path("root.a"), operation: .increment(by: 1))])
            let token = try await harness.token("carol")
            let version = try await harness.get("/v1/users/carol/badges", token: token).tree().version

            let started = ContinuousClock.now
            let timedOut = try await harness.get("/v1/users/carol/badges?wait=300ms&since=\(version)", token: token)
            #expect(timedOut.status == .notModified)
            #expect(ContinuousClock.now - started >= .milliseconds(300))

            let stale = try await harness.get("/v1/users/carol/badges?wait=5s&since=\(version - 1)", token: token)
            #expect(stale.status == .ok)

            // If-None-Match with several tags: unchanged while the version is any of them.
            var tags = HTTPFields()
            tags[.ifNoneMatch] = "\"\(version - 1)\", W/\"\(version)\""
            let listed = try await harness.get("/v1/users/carol/badges?wait=300ms", token: token, headers: tags)
            #expect(listed.status == .notModified, "the client holds the current version: \(listed.text)")
            tags[.ifNoneMatch] = "\"\(version - 1)\""
            #expect(try await harness.get("/v1/users/carol/badges?wait=5s", token: token, headers: tags).status == .ok)

            async let waiting = harness.get("/v1/users/carol/badges?wait=10s&since=\(version)", token: token)
            // The change comes only once the request is parked on the hub: what answers it is the wake-up.
            let parkedBy = ContinuousClock.now + .seconds(10)
            while harness.hub.subscribers(of: carol) == 0, ContinuousClock.now < parkedBy { try await Task.sleep(for: .milliseconds(10)) }
            #expect(harness.hub.subscribers(of: carol) == 1, "the long-poll is waiting")
            let changedAt = ContinuousClock.now
            try await harness.apply([BadgeMutation(user: carol, path: path("root.b"), operation: .increment(by: 4))])
            let woken = try await waiting
            #expect(woken.status == .ok)
            #expect(try woken.tree().tree?.count == 5)
            #expect(ContinuousClock.now - changedAt < .seconds(5))  // long before its 10 s wait, even on a loaded machine
        }
    }

    @Test("clear applies through the store and answers the new subtree; plain clear of a parent with children changes nothing")
    func clears() async throws {
        try await MemoryHarness.with { harness in
            let dave = user("dave")
            try await harness.apply([
                BadgeMutation(user: dave, path: path("root.chat"), operation: .increment(by: 1)),
                BadgeMutation(user: dave, path: path("root.chat.c1"), operation: .increment(by: 2)),
                BadgeMutation(user: dave, path: path("root.chat.c2"), operation: .increment(by: 3)),
            ])
            let token = try await harness.token("dave")
            let before = try await harness.get("/v1/users/dave/badges", token: token).tree()

            let leaf = try await harness.call(.post, "/v1/users/dave/badges/clear", token: token, body: #"{"path": "root.chat.c1"}"#)
            #expect(leaf.status == .ok)
            let leafAnswer = try leaf.tree()
            #expect(leafAnswer.tree == nil)
            #expect(leafAnswer.version == before.version + 1)
            #expect(try await harness.get("/v1/users/dave/badges?path=root.chat", token: token).tree().tree?.count == 4)

            let plain = try await harness.call(.post, "/v1/users/dave/badges/clear", token: token, body: #"{"path": "root.chat"}"#)
            let plainAnswer = try plain.tree()
            #expect(plainAnswer.tree?.count == 3)
            #expect(plainAnswer.tree?.shown == true)

            let forced = try await harness.call(
                .post, "/v1/users/dave/badges/clear", token: token, body: #"{"path": "root.chat", "force": true}"#)
            #expect(try forced.tree().tree == nil)
            let after = try await harness.get("/v1/users/dave/badges", token: token).tree()
            #expect(after.tree?.shown == false && after.tree?.count == 0)

            let invalid: [(body: String, code: String)] = [
                ("not json", "invalid_body"), (#"{"force": true}"#, "invalid_body"), (#"{"path": 3}"#, "invalid_body"),
                (#"{"path": "root.a", "force": "yes"}"#, "invalid_body"), (#"{"path": "root.*"}"#, "invalid_path"),
            ]
            for (body, code) in invalid {
                let response = try await harness.call(.post, "/v1/users/dave/badges/clear", token: token, body: body)
                #expect(response.status == .badRequest && response.errorCode == code, "\(body): \(response.text)")
            }
            let huge = #"{"path": "root.a", "pad": ""# + String(repeating: "x", count: 17_000) + #""}"#
            let tooLarge = try await harness.call(.post, "/v1/users/dave/badges/clear", token: token, body: huge)
            #expect(tooLarge.status == .contentTooLarge)
            #expect(tooLarge.errorCode == "body_too_large")
        }
    }

    @Test("clear with seen_version or If-Match: 412 with the current ETag for a version the tree never had; 400 for bad values")
    func clearsAtVersion() async throws {
        try await MemoryHarness.with { harness in
            let erin = user("erin")
            try await harness.apply([BadgeMutation(user: erin, path: path("root.chat.c1"), operation: .increment(by: 2))])
            let token = try await harness.token("erin")
            let shown = try await harness.get("/v1/users/erin/badges", token: token).tree()
            try await harness.apply([BadgeMutation(user: erin, path: path("root.chat.c2"), operation: .increment(by: 1))])
            let clear = { (headers: HTTPFields, body: String) in
                try await harness.call(.post, "/v1/users/erin/badges/clear", token: token, headers: headers, body: body)
            }
            let future = try await clear([:], #"{"path": "root.chat", "force": true, "seen_version": \#(shown.version + 2)}"#)
            #expect(future.status == .preconditionFailed && future.errorCode == "version_changed", "\(future.text)")
            #expect(future.headers[.eTag] == "\"\(shown.version + 1)\"")
            #expect(try await harness.get("/v1/users/erin/badges", token: token).tree().tree?.count == 3)
            let futureTag = try await clear([.ifMatch: "\"\(shown.version + 2)\""], #"{"path": "root.chat", "force": true}"#)
            #expect(futureTag.status == .preconditionFailed)

            let invalid: [(headers: HTTPFields, body: String, code: String)] = [
                ([:], #"{"path": "root.chat", "seen_version": -1}"#, "invalid_body"),
                ([:], #"{"path": "root.chat", "seen_version": 1.5}"#, "invalid_body"),
                ([:], #"{"path": "root.chat", "seen_version": 1e999}"#, "invalid_body"),
                ([:], #"{"path": "root.chat", "seen_version": "7"}"#, "invalid_body"),
                ([.ifMatch: "\"abc\""], #"{"path": "root.chat"}"#, "invalid_if_match"),
                ([.ifMatch: "\"\(shown.version + 1)\""], #"{"path": "root.chat", "seen_version": \#(shown.version)}"#, "invalid_if_match"),
            ]
            for (headers, body, code) in invalid {
                let response = try await clear(headers, body)
                #expect(response.status == .badRequest && response.errorCode == code, "\(body): \(response.text)")
            }
            // A seen takes no force (it always covers the subtree).
            let forcedSeen = try await harness.call(
                .post, "/v1/users/erin/badges/seen", token: token, body: #"{"path": "root.chat", "force": true}"#)
            #expect(forcedSeen.status == .badRequest && forcedSeen.errorCode == "invalid_body", "\(forcedSeen.text)")
            let futureSeen = try await harness.call(
                .post, "/v1/users/erin/badges/seen", token: token, body: #"{"path": "root.chat", "seen_version": \#(shown.version + 2)}"#)
            #expect(futureSeen.status == .preconditionFailed && futureSeen.errorCode == "version_changed")
            // If-Match: * and the current version both clear.
            let any = try await clear([.ifMatch: "*"], #"{"path": "root.chat.c2"}"#)
            #expect(any.status == .ok)
            let current = try await harness.get("/v1/users/erin/badges", token: token).tree()
            let cleared = try await clear([.ifMatch: "W/\"\(current.version)\""], #"{"path": "root.chat", "force": true, "seen_version": \#(current.version)}"#)
            #expect(cleared.status == .ok, "\(cleared.text)")
            #expect(try cleared.tree().tree == nil)
        }
    }

    @Test("operations routes: healthz, readyz, metrics, and an OpenAPI document naming every route")
    func operations() async throws {
        try await MemoryHarness.with { harness in
            #expect(try await harness.get("/healthz", token: nil).status == .ok)
            let ready = try await harness.get("/readyz", token: nil)
            #expect(ready.status == .ok, "\(ready.text)")
            _ = try await harness.get("/v1/users/x/badges", token: nil)
            let metrics = try await harness.get("/metrics", token: nil)
            #expect(metrics.status == .ok)
            #expect(metrics.text.contains("reddot_api_requests_total"))
            let document = try await harness.get("/openapi.yaml", token: nil)
            #expect(document.status == .ok)
            // Read as YAML (a document that does not parse fails here, whatever text it holds).
            let parsed = try #require(try Yams.load(yaml: document.text) as? [String: Any], "the document is not a YAML mapping")
            let paths = Set(((parsed["paths"] as? [String: Any]) ?? [:]).keys)
            for route in [
                "/v1/users/{user}/badges", "/v1/users/{user}/badges/clear", "/v1/users/{user}/badges/stream", "/v1/events",
                "/v1/users/{user}/badges/mute", "/v1/users/{user}/badges/unmute", "/v1/users/{user}/export", "/v1/users/{user}",
                "/v1/users/{user}/devices/{device}", "/v1/webhooks", "/v1/webhooks/{id}", "/v1/webhooks/{id}/replay", "/healthz", "/readyz",
                "/metrics", "/openapi.yaml",
            ] {
                #expect(paths.contains(route), "\(route)")
            }
            #expect(parsed["openapi"] as? String == "3.1.0")
        }
    }

    @Test("every route of the router is in the document, and each is guarded as its path says: a user's routes by the user, the admin ones by the scope")
    func routeTable() async throws {
        try await MemoryHarness.with { harness in
            let document = try await harness.get("/openapi.yaml", token: nil)
            let parsed = try #require(try Yams.load(yaml: document.text) as? [String: Any])
            let paths = (parsed["paths"] as? [String: Any]) ?? [:]
            for route in harness.api.routes {
                // `:user` in the router is `{user}` in the document.
                let documented = route.path.split(separator: "/", omittingEmptySubsequences: false)
                    .map { $0.hasPrefix(":") ? "{\($0.dropFirst())}" : String($0) }.joined(separator: "/")
                let operations = paths[documented] as? [String: Any]
                #expect(operations?[route.method.rawValue.lowercased()] != nil, "\(route.method) \(documented) is not in the document")
                switch route.access {
                case .user(let queryToken):
                    #expect(route.path.hasPrefix("/v1/users/:user/"), "\(route.path)")
                    #expect(queryToken == route.path.hasSuffix("/badges/stream"), "only the stream takes ?access_token=: \(route.path)")
                case .adminOfUser:
                    #expect(["/v1/users/:user", "/v1/users/:user/export"].contains(route.path), "\(route.path)")
                case .admin:
                    #expect(route.path.hasPrefix("/v1/webhooks"), "\(route.path)")
                case .publisher:
                    #expect(route.path == "/v1/events")
                case .open:
                    #expect(!route.path.hasPrefix("/v1/"), "an API route without an access check: \(route.method) \(route.path)")
                }
            }
            #expect(harness.api.routes.count >= 20)
        }
    }

    @Test("the document's patterns are the server's own: If-Match on both actions, a webhook's url and secret; the server reads them alike")
    func documentPatterns() async throws {
        let text = try String(contentsOf: Repository.root.appendingPathComponent("Sources/BadgeAPI/Resources/openapi.yaml"), encoding: .utf8)
        let document = try #require(try Yams.load(yaml: text) as? [String: Any])
        func node(_ keys: [String]) -> Any? {
            keys.reduce(document as Any?) { ($0 as? [String: Any])?[$1] }
        }
        for action in ["clear", "seen"] {
            let parameters = node(["paths", "/v1/users/{user}/badges/\(action)", "post", "parameters"]) as? [Any] ?? []
            let ifMatch = parameters.compactMap { $0 as? [String: Any] }.first { $0["name"] as? String == "If-Match" }
            #expect((ifMatch?["schema"] as? [String: Any])?["pattern"] as? String == IfMatch.pattern, "\(action)")
        }
        let body = ["paths", "/v1/webhooks/{id}", "put", "requestBody", "content", "application/json", "schema", "properties"]
        #expect((node(body + ["url"]) as? [String: Any])?["pattern"] as? String == WebhookSubscription.urlPattern)
        #expect((node(body + ["secret"]) as? [String: Any])?["pattern"] as? String == WebhookSubscription.secretPattern)

        // The pattern and the server's reading agree on each side of the line.
        let ifMatch = try Regex(IfMatch.pattern)
        for header in [#""7""#, #"W/"7""#, "*", #" "0" "#, #""999999999999999999""#, #""7", "8""#, "7", #""07""#, #""1234567890123456789""#, #"W/"""#, "", "**"] {
            #expect((try ifMatch.wholeMatch(in: header) != nil) == (IfMatch(header) != nil), "\(header)")
        }
        let url = try Regex(WebhookSubscription.urlPattern)
        let secret = WebhookSubscription.makeSecret()
        for candidate in [
            "https://crm.example.com/hooks?x=1#y", "http://10.0.0.1:65535/", "http://a", "http://", "HTTP://a", "http://a:65536", "http://a:0",
            "http://a/%zz", "http://a/%41", "ftp://a", "http://[::1]/", "http://a b", "http://-a", "http://a..b",
        ] {
            let accepted = (try? WebhookSubscription(id: "w", url: candidate, secret: secret, paths: ["root"], kinds: ["root"])) != nil
            #expect((try url.wholeMatch(in: candidate) != nil) == accepted, "\(candidate)")
        }
        #expect(WebhookSubscription.key(of: "whsec_" + Data(count: 23).base64EncodedString()) == nil, "23 bytes")
        #expect(WebhookSubscription.key(of: "whsec_" + Data(count: 64).base64EncodedString())?.count == 64)
        #expect(WebhookSubscription.key(of: "whsec_" + Data(count: 65).base64EncodedString()) == nil, "65 bytes")
    }

    @Test("another method on a known path answers 405 with Allow; an unknown path 404")
    func methodNotAllowed() async throws {
        try await MemoryHarness.with { harness in
            let token = try await harness.token("alice")
            for (method, uri, allow) in [
                (HTTPRequest.Method.delete, "/v1/users/alice/badges", "GET"), (.put, "/v1/users/alice/badges/clear", "POST"),
                (.get, "/v1/users/alice/badges/clear", "POST"), (.post, "/v1/users/alice/badges/stream", "GET"),
                (.get, "/v1/events", "POST"), (.trace, "/healthz", "GET"), (.post, "/openapi.yaml", "GET"),
                (.get, "/v1/users/alice", "DELETE"), (.post, "/v1/users/alice/export", "GET"),
            ] {
                let response = try await harness.call(method, uri, token: token)
                #expect(response.status == .methodNotAllowed, "\(method) \(uri)")
                #expect(response.headers[.allow] == allow, "\(method) \(uri)")
                #expect(response.errorCode == "method_not_allowed")
            }
            for uri in ["/v1/users/alice/other", "/v1/users/alice/badges/other", "/nothing", "/"] {
                let response = try await harness.call(.delete, uri, token: token)
                #expect(response.status == .notFound, "\(uri)")
                #expect(response.headers[.allow] == nil)
            }
        }
    }
}
