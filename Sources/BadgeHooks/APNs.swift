import Crypto
import Foundation
import Synchronization

/// An APNs provider key (the `.p8` file, with its key id and team id), and the provider tokens
/// made from it: ES256 JWTs (`kid` in the header, `iss` and `iat` in the claims) that APNs takes
/// for up to an hour; one is made anew after `lifetime` (50 minutes by default: APNs refuses
/// one older than an hour, and one renewed more often than every 20 minutes), or at once when
/// APNs calls the current one expired.
public final class APNsCredentials: Sendable {
    public let keyID: String
    public let teamID: String
    private let key: P256.Signing.PrivateKey
    private let lifetime: Duration
    private let current = Mutex<(token: String, made: ContinuousClock.Instant)?>(nil)

    /// - Throws: ``Invalid`` with a sentence when the key is not a P-256 private key in PEM, or
    ///   an id is not 10 letters and digits.
    public init(keyPEM: String, keyID: String, teamID: String, lifetime: Duration = .seconds(3000)) throws(Invalid) {
        for (name, value) in [("key id", keyID), ("team id", teamID)] {
            guard value.utf8.count == 10, value.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x41...0x5a).contains($0) }) else {
                throw Invalid("the APNs \(name) must be 10 capital letters and digits (as the developer account shows it)")
            }
        }
        do {
            key = try P256.Signing.PrivateKey(pemRepresentation: keyPEM)
        } catch {
            throw Invalid("the APNs key is not a P-256 private key in PEM (the AuthKey_….p8 file)")
        }
        (self.keyID, self.teamID, self.lifetime) = (keyID, teamID, lifetime)
    }

    /// The provider token to send now.
    public func token() -> String {
        current.withLock { current in
            if let current, ContinuousClock.now - current.made < lifetime { return current.token }
            let made = (token: makeToken(issuedAt: Date()), made: ContinuousClock.now)
            current = made
            return made.token
        }
    }

    /// Drops `token` (APNs called it expired): the next ``token()`` makes a new one.
    public func expire(_ token: String) {
        current.withLock { current in
            if current?.token == token { current = nil }
        }
    }

    func makeToken(issuedAt: Date) -> String {
        let header = Self.base64URL(Data(#"{"alg":"ES256","kid":"\#(keyID)"}"#.utf8))
        let claims = Self.base64URL(Data(#"{"iss":"\#(teamID)","iat":\#(Int64(issuedAt.timeIntervalSince1970))}"#.utf8))
        let signed = "\(header).\(claims)"
        guard let signature = try? key.signature(for: Data(signed.utf8)) else { return signed + "." }
        return signed + "." + Self.base64URL(signature.rawRepresentation)
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Credentials that cannot be used, and why.
    public struct Invalid: Error, CustomStringConvertible, Sendable {
        public let description: String
        init(_ description: String) { self.description = description }
    }
}
