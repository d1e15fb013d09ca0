public import BadgeCore
public import Foundation
import JWTKit
import Synchronization

/// Who may call the API: HS256 tokens signed with a shared secret, and/or RS256 / ES256 tokens
/// signed by a key of a JWKS file; with the audience and issuer every token must name.
public struct AuthConfiguration: Sendable {
    /// The HS256 secret (`--jwt-hs256-secret`, `REDDOT_JWT_HS256_SECRET`).
    public var hs256Secret: String?
    /// The contents of a JWKS document (`--jwt-jwks-file`, `REDDOT_JWT_JWKS_FILE`); every key needs
    /// a `kid`, and is used for RS256 (RSA keys) or ES256 (P-256 keys).
    public var jwks: String?
    /// The `aud` every token must include, if set.
    public var audience: String?
    /// The `iss` every token must carry, if set.
    public var issuer: String?
    /// Clock skew allowed on `exp` and `nbf`.
    public var leeway: TimeInterval
    /// No authentication at all: every request acts as an administrator. Development only.
    public var insecureNoAuth: Bool

    /// A configuration; at least one key source, or `insecureNoAuth`, is needed.
    public init(
        hs256Secret: String? = nil, jwks: String? = nil, audience: String? = nil, issuer: String? = nil,
        leeway: TimeInterval = 30, insecureNoAuth: Bool = false
    ) {
        self.hs256Secret = hs256Secret
        self.jwks = jwks
        self.audience = audience
        self.issuer = issuer
        self.leeway = leeway
        self.insecureNoAuth = insecureNoAuth
    }
}

/// The verified caller of a request.
public struct Principal: Sendable, Hashable {
    /// The token's `sub`: the user it may act for.
    public var subject: String?
    /// The token's scopes (`scope`, space-separated).
    public var scopes: Set<String>

    /// The scope that may act for any user and publish events.
    public static let adminScope = "reddot:admin"
    /// The scope that may publish events (`POST /v1/events`) and nothing else.
    public static let publishScope = "reddot:publish"

    /// A principal with the given claims.
    public init(subject: String?, scopes: Set<String>) {
        self.subject = subject
        self.scopes = scopes
    }

    /// Whether it may act for any user.
    public var isAdmin: Bool { scopes.contains(Self.adminScope) }

    /// Whether it may read and clear `user`'s tree: its own `sub`, or any with the admin scope.
    public func mayActFor(_ user: UserID) -> Bool { isAdmin || subject == user.rawValue }

    /// Whether it may publish events.
    public var mayPublish: Bool { isAdmin || scopes.contains(Self.publishScope) }
}

/// An error in the authentication settings, found at start.
public struct AuthSetupError: Error, CustomStringConvertible {
    /// What is wrong.
    public var description: String
}

/// Verifies bearer tokens. `alg: none`, an algorithm that the configured keys do not use, an
/// unknown `kid`, a bad signature, a missing or passed `exp`, a future `nbf`, or a wrong `aud`
/// or `iss` are refused (401).
public final class Authenticator: Sendable {
    /// The settings.
    public let configuration: AuthConfiguration
    private let hmacKeys: JWTKeyCollection?
    private let jwksKeys: JWTKeyCollection?
    /// The JWKS key ids and the algorithm each verifies.
    private let jwksAlgorithms: [String: String]
    /// Tokens verified before, with what they grant, so that a keep-alive client's every request
    /// does not pay the signature check again. Only the expiry can change a cached verdict.
    private let verified = Mutex(BoundedCache<String, VerifiedToken>(budget: 8 * 1024 * 1024))

    private struct VerifiedToken {
        var principal: Principal
        var expiry: Date
    }

    /// Loads the keys.
    ///
    /// - Throws: ``AuthSetupError`` when no key source is given (and auth is on), or the JWKS is
    ///   not a valid key set.
    public init(configuration: AuthConfiguration) async throws {
        self.configuration = configuration
        if let secret = configuration.hs256Secret, !secret.isEmpty {
            guard secret.utf8.count >= 32 else {
                throw AuthSetupError(description: "the HS256 secret must be at least 32 bytes long")
            }
            let keys = JWTKeyCollection()
            await keys.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
            hmacKeys = keys
        } else {
            hmacKeys = nil
        }
        if let jwks = configuration.jwks {
            let document: JWKS
            do {
                document = try JSONDecoder().decode(JWKS.self, from: Data(jwks.utf8))
            } catch {
                throw AuthSetupError(description: "the JWKS is not a valid JSON Web Key Set: \(error)")
            }
            var algorithms: [String: String] = [:]
            for key in document.keys {
                guard let kid = key.keyIdentifier?.string else {
                    throw AuthSetupError(description: "every JWKS key needs a \"kid\"")
                }
                if key.keyType == .rsa, key.algorithm == nil || key.algorithm == .rs256 {
                    algorithms[kid] = "RS256"
                } else if key.keyType == .ecdsa, key.algorithm == nil || key.algorithm == .es256 {
                    algorithms[kid] = "ES256"
                } else {
                    throw AuthSetupError(description: "JWKS key '\(kid)' is neither an RS256 nor an ES256 key")
                }
            }
            let keys = JWTKeyCollection()
            do {
                try await keys.add(jwks: document)
            } catch {
                throw AuthSetupError(description: "the JWKS keys cannot be loaded: \(error)")
            }
            jwksKeys = keys
            jwksAlgorithms = algorithms
        } else {
            jwksKeys = nil
            jwksAlgorithms = [:]
        }
        if !configuration.insecureNoAuth, hmacKeys == nil, jwksKeys == nil {
            throw AuthSetupError(
                description: "no token keys: give --jwt-hs256-secret or --jwt-jwks-file (or --insecure-no-auth for development)")
        }
    }

    /// The caller of a request with this `Authorization` header.
    ///
    /// - Throws: ``APIError`` 401 with a `WWW-Authenticate` challenge.
    func authenticate(_ authorization: String?) async throws(APIError) -> Principal {
        if configuration.insecureNoAuth {
            return Principal(subject: nil, scopes: [Principal.adminScope])
        }
        let token: String
        do {
            token = try BearerToken(authorization: authorization).text
        } catch {
            // A request with no credentials at all gets the bare challenge (RFC 6750 §3.1).
            throw APIError.unauthorized(error.message, error: (authorization ?? "").isEmpty ? nil : error.code)
        }
        if let known = verified.withLock({ $0[token] }) {
            guard known.expiry.addingTimeInterval(configuration.leeway) > Date() else {
                verified.withLock { $0.remove(token) }
                throw APIError.unauthorized("the token has expired")
            }
            return known.principal
        }
        let header = try Self.header(of: token)
        let claims: TokenClaims
        do {
            switch header.alg {
            case "HS256":
                guard let hmacKeys else { throw APIError.unauthorized("HS256 tokens are not accepted here") }
                claims = try await hmacKeys.verify(token, as: TokenClaims.self)
            case "RS256", "ES256":
                guard let jwksKeys else { throw APIError.unauthorized("\(header.alg) tokens are not accepted here") }
                guard let kid = header.kid else { throw APIError.unauthorized("the token names no key (kid)") }
                guard let algorithm = jwksAlgorithms[kid] else { throw APIError.unauthorized("the token's key '\(kid.prefix(64))' is unknown") }
                guard algorithm == header.alg else {
                    throw APIError.unauthorized("key '\(kid.prefix(64))' verifies \(algorithm), not \(header.alg)")
                }
                claims = try await jwksKeys.verify(token, as: TokenClaims.self)
            default:
                throw APIError.unauthorized("algorithm '\(header.alg.prefix(16))' is not accepted")
            }
        } catch let error as APIError {
            throw error
        } catch {
            throw APIError.unauthorized("the token's signature or claims are invalid")
        }
        let principal = try check(claims)
        if let expiry = claims.exp?.value {
            let entry = VerifiedToken(principal: principal, expiry: expiry)
            verified.withLock { $0.insert(entry, for: token, cost: token.utf8.count + 128) }
        }
        return principal
    }

    private func check(_ claims: TokenClaims) throws(APIError) -> Principal {
        let now = Date()
        guard let expiry = claims.exp?.value else { throw APIError.unauthorized("the token has no expiry (exp)") }
        guard expiry.addingTimeInterval(configuration.leeway) > now else { throw APIError.unauthorized("the token has expired") }
        if let notBefore = claims.nbf?.value, notBefore.addingTimeInterval(-configuration.leeway) > now {
            throw APIError.unauthorized("the token is not valid yet (nbf)")
        }
        if let audience = configuration.audience {
            guard claims.aud?.value.contains(audience) == true else {
                throw APIError.unauthorized("the token is not meant for this audience (aud)")
            }
        }
        if let issuer = configuration.issuer {
            guard claims.iss?.value == issuer else { throw APIError.unauthorized("the token's issuer (iss) is not accepted") }
        }
        let scopes = Set((claims.scope ?? "").split(separator: " ").map(String.init))
        return Principal(subject: claims.sub?.value, scopes: scopes)
    }

    private static func header(of token: String) throws(APIError) -> BearerToken.Header {
        guard let header = BearerToken(text: token).header else {
            throw APIError.unauthorized("the bearer token is not a JWT")
        }
        if let critical = header.crit {
            throw APIError.unauthorized(
                "the token's header names critical parameters (crit: \(critical.prefix(4).map { $0.prefix(32) }.joined(separator: ", "))) this server does not understand")
        }
        return header
    }

    /// Signs an HS256 token, for development (`reddot token`) and tests.
    ///
    /// - Throws: jwt-kit's error if signing fails.
    public static func makeHS256Token(
        secret: String, subject: String?, scopes: [String] = [], expiresIn: TimeInterval = 3600,
        audience: String? = nil, issuer: String? = nil
    ) async throws -> String {
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
        let claims = TokenClaims(
            sub: subject.map { SubjectClaim(value: $0) }, exp: ExpirationClaim(value: Date(timeIntervalSince1970: (Date().timeIntervalSince1970 + expiresIn).rounded(.down))),
            nbf: nil, aud: audience.map { AudienceClaim(value: [$0]) }, iss: issuer.map { IssuerClaim(value: $0) },
            scope: scopes.isEmpty ? nil : scopes.joined(separator: " "))
        return try await keys.sign(claims)
    }
}

/// The claims RedDot reads; checked by `Authenticator.check` (which knows the settings).
struct TokenClaims: JWTPayload {
    var sub: SubjectClaim?
    var exp: ExpirationClaim?
    var nbf: NotBeforeClaim?
    var aud: AudienceClaim?
    var iss: IssuerClaim?
    var scope: String?

    func verify(using algorithm: some JWTAlgorithm) async throws {}
}
