import BadgeAPI
import BadgeCore
import BadgeStore
import Foundation
import HTTPTypes
import HummingbirdTesting
import JWTKit
import TestSupport
import Testing

/// Claims as an identity provider would issue them.
struct TestClaims: JWTPayload {
    var sub: SubjectClaim?
    var exp: ExpirationClaim?
    var nbf: NotBeforeClaim?
    var aud: AudienceClaim?
    var iss: IssuerClaim?
    var scope: String?

    func verify(using algorithm: some JWTAlgorithm) async throws {}

    static func valid(_ subject: String, audience: String? = "reddot", issuer: String? = "https://id.example") -> TestClaims {
        TestClaims(
            sub: SubjectClaim(value: subject), exp: ExpirationClaim(value: Date().addingTimeInterval(600)), nbf: nil,
            aud: audience.map { AudienceClaim(value: [$0]) }, iss: issuer.map { IssuerClaim(value: $0) }, scope: nil)
    }
}

func base64URL(_ data: Data) -> String {
    data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

/// A signed token with a hand-made header (for `alg: none` and the like).
func unsignedToken(header: String, claims: TestClaims, signature: String = "") throws -> String {
    let encoder = JSONEncoder()
    return base64URL(Data(header.utf8)) + "." + base64URL(try encoder.encode(claims)) + "." + signature
}

@Suite("Auth: who may see which tree", .serialized)
struct APIAuthTests {
    static let audience = "reddot"
    static let issuer = "https://id.example"

    @Test("HS256: every invalid token is refused with 401 and a challenge")
    func hs256Negatives() async throws {
        let auth = AuthConfiguration(hs256Secret: APIHarness.secret, audience: Self.audience, issuer: Self.issuer)
        try await MemoryHarness.with(auth: auth) { harness in
            try await harness.apply([BadgeMutation(user: user("alice"), path: path("root.a"), operation: .increment(by: 1))])
            let keys = JWTKeyCollection()
            await keys.add(hmac: HMACKey(from: APIHarness.secret), digestAlgorithm: .sha256)
            let otherKeys = JWTKeyCollection()
            await otherKeys.add(hmac: HMACKey(from: "another-secret-0123456789abcdef0123"), digestAlgorithm: .sha256)

            let good = try await keys.sign(TestClaims.valid("alice"))
            let ok = try await harness.get("/v1/users/alice/badges", token: good)
            #expect(ok.status == .ok, "\(ok.text)")

            var expired = TestClaims.valid("alice")
            expired.exp = ExpirationClaim(value: Date().addingTimeInterval(-120))
            var early = TestClaims.valid("alice")
            early.nbf = NotBeforeClaim(value: Date().addingTimeInterval(600))
            var noExpiry = TestClaims.valid("alice")
            noExpiry.exp = nil
            let badTokens: [(String, String)] = [
                ("wrong secret", try await otherKeys.sign(TestClaims.valid("alice"))),
                ("expired", try await keys.sign(expired)),
                ("not yet valid", try await keys.sign(early)),
                ("no exp", try await keys.sign(noExpiry)),
                ("wrong audience", try await keys.sign(TestClaims.valid("alice", audience: "someone-else"))),
                ("no audience", try await keys.sign(TestClaims.valid("alice", audience: nil))),
                ("wrong issuer", try await keys.sign(TestClaims.valid("alice", issuer: "https://evil.example"))),
                ("alg none", try unsignedToken(header: #"{"alg":"none","typ":"JWT"}"#, claims: TestClaims.valid("alice"))),
                ("alg None", try unsignedToken(header: #"{"alg":"None"}"#, claims: TestClaims.valid("alice"))),
                ("RS256 with no JWKS", try unsignedToken(header: #"{"alg":"RS256","kid":"k"}"#, claims: TestClaims.valid("alice"), signature: "AAAA")),
                ("garbage", "not.a.jwt"),
                ("two parts", "abc.def"),
                ("tampered payload", try Self.tamper(good)),
            ]
            for (name, token) in badTokens {
                let response = try await harness.get("/v1/users/alice/badges", token: token)
                #expect(response.status == .unauthorized, "\(name): \(response.text)")
                #expect(response.headers[.wwwAuthenticate]?.hasPrefix("Bearer") == true, "\(name)")
                #expect(response.errorCode == "unauthorized", "\(name)")
            }
            var basic = HTTPFields()
            basic[.authorization] = "Basic YWxpY2U6eA=="
            #expect(try await harness.get("/v1/users/alice/badges", token: nil, headers: basic).status == .unauthorized)
            let bare = try await harness.get("/v1/users/alice/badges", token: nil)
            #expect(bare.status == .unauthorized)
            #expect(bare.headers[.wwwAuthenticate] == "Bearer realm=\"reddot\"", "no credentials: no error code (RFC 6750 §3.1)")
            // A header naming critical parameters this server does not understand (RFC 7515 §4.1.11).
            let critical = try unsignedToken(header: #"{"alg":"HS256","crit":["exp2"],"exp2":1}"#, claims: TestClaims.valid("alice"), signature: "AAAA")
            let refusedCrit = try await harness.get("/v1/users/alice/badges", token: critical)
            #expect(refusedCrit.status == .unauthorized && refusedCrit.text.contains("crit"), "\(refusedCrit.text)")
            #expect(try await harness.call(.post, "/v1/users/alice/badges/clear", body: #"{"path":"root.a"}"#).status == .unauthorized)
            // Nothing was cleared by the refused requests.
            #expect(try await harness.store.tree(for: user("alice")).tree?.count == 1)
        }
    }

    static func tamper(_ token: String) throws -> String {
        var parts = token.split(separator: ".").map(String.init)
        var claims = TestClaims.valid("bob")
        claims.scope = "reddot:admin"
        parts[1] = base64URL(try JSONEncoder().encode(claims))
        return parts.joined(separator: ".")
    }

    @Test("a token accepted before (and so remembered) is refused once it expires")
    func rememberedTokenExpires() async throws {
        try await MemoryHarness.with(auth: AuthConfiguration(hs256Secret: APIHarness.secret, leeway: 0)) { harness in
            try await harness.apply([BadgeMutation(user: user("ivy"), path: path("root.a"), operation: .increment(by: 1))])
            // exp is a whole second: 3 s from now rounds down to 2–3 s.
            let token = try await harness.token("ivy", expiresIn: 3)
            #expect(try await harness.get("/v1/users/ivy/badges", token: token).status == .ok)
            #expect(try await harness.get("/v1/users/ivy/badges", token: token).status == .ok)
            try await Task.sleep(for: .milliseconds(3_100))
            let expired = try await harness.get("/v1/users/ivy/badges", token: token)
            #expect(expired.status == .unauthorized)
            #expect(expired.text.contains("expired"))
        }
    }

    @Test("JWKS: RS256 and ES256 keys by kid; an unknown or missing kid, or a mismatched alg, is refused")
    func jwks() async throws {
        let rsa = try Insecure.RSA.PrivateKey(pem: try await Self.opensslRSAKey())
        let (modulus, exponent) = try rsa.publicKey.getKeyPrimitives()
        let ec = ES256PrivateKey()
        let (x, y) = try #require(ec.publicKey.parameters)
        let jwks = """
            {"keys": [
              {"kty": "RSA", "kid": "rsa-1", "alg": "RS256", "use": "sig", "n": "\(base64URL(modulus))", "e": "\(base64URL(exponent))"},
              {"kty": "EC", "kid": "ec-1", "alg": "ES256", "crv": "P-256", "x": "\(x)", "y": "\(y)"}
            ]}
            """
        let signing = JWTKeyCollection()
        await signing.add(rsa: rsa, digestAlgorithm: .sha256, kid: "rsa-1")
        await signing.add(ecdsa: ec, kid: "ec-1")
        let stranger = JWTKeyCollection()
        await stranger.add(ecdsa: ES256PrivateKey(), kid: "ec-1")
        await stranger.add(ecdsa: ES256PrivateKey(), kid: "ec-2")

        try await MemoryHarness.with(auth: AuthConfiguration(jwks: jwks, audience: Self.audience)) { harness in
            let claims = TestClaims.valid("grace")
            let rsToken = try await signing.sign(claims, kid: "rsa-1")
            let esToken = try await signing.sign(claims, kid: "ec-1")
            #expect(try await harness.get("/v1/users/grace/badges", token: rsToken).status == .ok)
            #expect(try await harness.get("/v1/users/grace/badges", token: esToken).status == .ok)

            let refused: [(String, String)] = [
                ("unknown kid", try await stranger.sign(claims, kid: "ec-2")),
                ("known kid, wrong key", try await stranger.sign(claims, kid: "ec-1")),
                ("no kid", try unsignedToken(header: #"{"alg":"ES256"}"#, claims: claims, signature: "AAAA")),
                ("alg mismatch", try unsignedToken(header: #"{"alg":"ES256","kid":"rsa-1"}"#, claims: claims, signature: "AAAA")),
                ("alg none with a kid", try unsignedToken(header: #"{"alg":"none","kid":"rsa-1"}"#, claims: claims)),
                ("HS256 without a secret", try await Authenticator.makeHS256Token(secret: APIHarness.secret, subject: "grace")),
            ]
            for (name, token) in refused {
                let response = try await harness.get("/v1/users/grace/badges", token: token)
                #expect(response.status == .unauthorized, "\(name): \(response.text)")
            }
        }
    }

    static func opensslRSAKey() async throws -> String {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("reddot-test-\(UUID().uuidString).pem")
        defer { try? FileManager.default.removeItem(at: file) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", file.path]
        process.standardError = FileHandle.nullDevice
        try process.run()
        guard await ChildProcess.exitStatus(of: process) == 0 else { throw APITestError("openssl genpkey failed") }
        return try String(contentsOf: file, encoding: .utf8)
    }

    @Test("1,000 random (token of A, user B) pairs on every route answer exactly like a missing user and change nothing")
    func noLeaks() async throws {
        try await MemoryHarness.with { harness in
            let existing = (0..<10).map { "known\($0)" }
            let missing = (0..<10).map { "ghost\($0)" }
            for name in existing {
                try await harness.apply([
                    BadgeMutation(user: user(name), path: path("root.chat.c1"), operation: .increment(by: 2)),
                    BadgeMutation(user: user(name), path: path("root.promo"), operation: .set(count: 0, icon: nil)),
                ])
            }
            let admin = try await harness.token(nil, scopes: [Principal.adminScope])
            let reference = try await harness.get("/v1/users/ghost0/badges", token: admin)
            #expect(reference.status == .notFound)
            var before: [String: UserBadgeTree] = [:]
            for name in existing { before[name] = try await harness.store.tree(for: user(name)) }

            var tokens: [String: String] = [:]
            for name in existing + missing { tokens[name] = try await harness.token(name) }
            var random = SeededRandom(seed: 4242)
            let everyone = existing + missing
            let routes: [(HTTPRequest.Method, String, String?)] = [
                (.get, "/badges", nil), (.get, "/badges?path=root.chat", nil), (.get, "/badges?paths=root.chat,root.promo", nil),
                (.get, "/badges?depth=1", nil), (.post, "/badges/clear", #"{"path":"root","force":true}"#),
                (.get, "/badges/stream", nil), (.get, "/badges?wait=1s&since=0", nil),
            ]
            for index in 0..<1_000 {
                let a = everyone[Int(random.next() % UInt64(everyone.count))]
                var b = everyone[Int(random.next() % UInt64(everyone.count))]
                if a == b { b = everyone[(everyone.firstIndex(of: a)! + 1 + index % 5) % everyone.count] }
                let (method, suffix, body) = routes[index % routes.count]
                let response = try await harness.call(method, "/v1/users/\(b)\(suffix)", token: tokens[a], body: body)
                #expect(response.status == .notFound, "token of \(a) on \(method) /v1/users/\(b)\(suffix)")
                #expect(response.text == reference.text, "token of \(a) on \(method) /v1/users/\(b)\(suffix): \(response.text)")
                #expect(response.headers[.eTag] == nil)
            }
            for name in existing {
                #expect(try await harness.store.tree(for: user(name)) == before[name], "\(name) was changed")
            }
            // The administrator reaches existing users; every user reaches their own tree.
            #expect(try await harness.get("/v1/users/known1/badges", token: admin).status == .ok)
            #expect(try await harness.get("/v1/users/ghost1/badges", token: tokens["ghost1"]).status == .ok)
        }
    }

    @Test("publishing needs the admin or publish scope; without Kafka it answers 503")
    func publishing() async throws {
        try await MemoryHarness.with { harness in
            let event = #"{"id":"e1","op":"incr","user":"u1","path":"root.a","by":1}"#
            let userToken = try await harness.token("u1")
            let forbidden = try await harness.call(.post, "/v1/events", token: userToken, body: event)
            #expect(forbidden.status == .forbidden && forbidden.errorCode == "forbidden")
            let publisher = try await harness.token(nil, scopes: [Principal.publishScope])
            let disabled = try await harness.call(.post, "/v1/events", token: publisher, body: event)
            #expect(disabled.status == .serviceUnavailable && disabled.errorCode == "publishing_disabled")
            #expect(try await harness.call(.post, "/v1/events", body: event).status == .unauthorized)
        }
    }

    @Test("--insecure-no-auth lets every request act for every user")
    func insecure() async throws {
        try await MemoryHarness.with(auth: AuthConfiguration(insecureNoAuth: true)) { harness in
            try await harness.apply([BadgeMutation(user: user("henry"), path: path("root.a"), operation: .increment(by: 1))])
            #expect(try await harness.get("/v1/users/henry/badges", token: nil).status == .ok)
        }
    }
}
