import Foundation

/// The bearer token of a request's `Authorization` header (`Bearer <JWT>`), and the JOSE header
/// of that token as read before any signature check: which algorithm and key to verify it with.
///
/// Only reads text; verifying the token is `BadgeAPI`'s `Authenticator`.
public struct BearerToken: Sendable, Hashable {
    /// The token, without the scheme and the blanks around it.
    public var text: String

    /// A token as it is (from `?access_token=`, say).
    public init(text: String) {
        self.text = text
    }

    /// The token of an `Authorization` header; the scheme is case-insensitive.
    ///
    /// - Throws: ``RequestValueError`` `invalid_request` for a missing or empty header, or one that
    ///   is not `Bearer <token>`.
    public init(authorization: String?) throws(RequestValueError) {
        guard let authorization, !authorization.isEmpty else {
            throw RequestValueError("invalid_request", "a bearer token is required (Authorization: Bearer <JWT>)")
        }
        let parts = authorization.splitScalars(" ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else {
            throw RequestValueError("invalid_request", "the Authorization header must be 'Bearer <JWT>'")
        }
        text = String(parts[1].trimmingBlanks)
    }

    /// A JWT's header fields that choose the key.
    public struct Header: Decodable, Sendable, Hashable {
        /// The algorithm (`HS256`, `RS256`, `ES256`, or anything a client sent).
        public var alg: String
        /// The key id, if any.
        public var kid: String?
        /// The header parameters the token says a reader must understand (RFC 7515 §4.1.11);
        /// RedDot understands none, so a token that names any is refused.
        public var crit: [String]?
    }

    /// The token's header: three dot-separated segments, the first base64url JSON with `alg`.
    /// Nil when the token is not shaped like a JWT.
    public var header: Header? {
        let segments = text.split(separator: ".", omittingEmptySubsequences: false)
        guard segments.count == 3, let data = Self.base64URLDecoded(segments[0]) else { return nil }
        return try? JSONDecoder().decode(Header.self, from: data)
    }

    /// The bytes of base64url text (padding optional); nil when it is not base64url.
    static func base64URLDecoded(_ text: some StringProtocol) -> Data? {
        // Base64 is ASCII; counting bytes (not characters) keeps the padding loop simple.
        guard text.utf8.allSatisfy({ $0 < 0x80 }) else { return nil }
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.utf8.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64)
    }
}
