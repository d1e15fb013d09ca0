import AsyncHTTPClient
import CryptoExtras
public import Foundation
import NIOCore
import Synchronization

/// A Google service account (the JSON key file Firebase's console gives) and the OAuth2 access
/// tokens made from it for FCM HTTP v1: an RS256 JWT assertion (`iss` the account's email,
/// `scope` firebase.messaging, `aud` the token endpoint, an hour at most) is exchanged at the
/// file's `token_uri` for an access token, which is cached and renewed before it runs out
/// (five minutes before, or half-way for a short one), or at once when FCM calls it invalid.
/// Concurrent pushes share one exchange.
public final class FCMCredentials: Sendable {
    public let projectID: String
    public let clientEmail: String
    /// Where assertions are exchanged (the file's `token_uri`).
    public let tokenURL: String
    private let keyID: String?
    private let key: _RSA.Signing.PrivateKey
    private let state = Mutex<State>(State())

    static let scope = "https://www.googleapis.com/auth/firebase.messaging"

    private struct State {
        var current: (token: String, renewAt: ContinuousClock.Instant)?
        var pending: Task<Access, any Error>?
    }

    struct Access: Sendable {
        var token: String
        var lifetime: Duration
    }

    /// Reads a service account's JSON key.
    ///
    /// - Throws: ``Invalid`` with a sentence naming what is missing or wrong.
    public init(serviceAccountJSON: Data) throws(Invalid) {
        struct File: Decodable {
            var type: String?
            var project_id: String?
            var private_key_id: String?
            var private_key: String?
            var client_email: String?
            var token_uri: String?
        }
        guard let file = try? JSONDecoder().decode(File.self, from: serviceAccountJSON) else {
            throw Invalid("the FCM service account file is not a JSON object (download it from Firebase: Project settings → Service accounts)")
        }
        guard file.type == nil || file.type == "service_account" else {
            throw Invalid("the FCM credentials must be a service account key (\"type\": \"service_account\"), not \(String(reflecting: String(file.type?.prefix(40) ?? "")))")
        }
        guard let project = file.project_id, (1...100).contains(project.utf8.count),
            project.utf8.allSatisfy({ Self.projectBytes.contains($0) })
        else { throw Invalid("the service account file needs a project_id (letters, digits, -, . or :)") }
        guard let email = file.client_email, (3...320).contains(email.utf8.count), email.contains("@"),
            email.unicodeScalars.allSatisfy({ $0.isASCII && $0.properties.generalCategory != .control && $0 != "\"" && $0 != "\\" })
        else { throw Invalid("the service account file needs a client_email") }
        let tokenURL = file.token_uri ?? "https://oauth2.googleapis.com/token"
        guard let url = URL(string: tokenURL), url.scheme == "https", url.host != nil,
            tokenURL.unicodeScalars.allSatisfy({ $0.isASCII && $0.properties.generalCategory != .control && $0 != "\"" && $0 != "\\" })
        else {
            throw Invalid("the service account's token_uri must be an https:// URL")
        }
        guard let pem = file.private_key, let key = try? _RSA.Signing.PrivateKey(pemRepresentation: pem) else {
            throw Invalid("the service account's private_key is not an RSA private key in PEM of 2,048 bits or more")
        }
        if let id = file.private_key_id,
            !((1...100).contains(id.utf8.count) && id.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) || (0x41...0x46).contains($0) }))
        {
            throw Invalid("the service account's private_key_id must be hexadecimal")
        }
        (projectID, clientEmail, self.tokenURL, keyID, self.key) = (project, email, tokenURL, file.private_key_id, key)
    }

    private static let projectBytes = Set(Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.:".utf8))

    /// The signed assertion that asks for an access token, valid for an hour from `issuedAt`.
    func assertion(issuedAt: Date) -> String {
        let kid = keyID.map { #","kid":"\#($0)""# } ?? ""
        let header = APNsCredentials.base64URL(Data(#"{"alg":"RS256","typ":"JWT"\#(kid)}"#.utf8))
        let iat = Int64(issuedAt.timeIntervalSince1970)
        let claims = APNsCredentials.base64URL(
            Data(#"{"iss":"\#(clientEmail)","scope":"\#(Self.scope)","aud":"\#(tokenURL)","iat":\#(iat),"exp":\#(iat + 3600)}"#.utf8))
        let signed = "\(header).\(claims)"
        guard let signature = try? key.signature(for: Data(signed.utf8), padding: .insecurePKCS1v1_5) else { return signed + "." }
        return signed + "." + APNsCredentials.base64URL(signature.rawRepresentation)
    }

    /// The access token to send with now: the cached one, or a new one from the token endpoint.
    ///
    /// - Throws: ``TokenFailure``: `refused` when the endpoint refuses the account (stop),
    ///   `unavailable` when it cannot answer now (try later).
    func accessToken(client: HTTPClient, timeout: Duration) async throws -> String {
        let now = ContinuousClock.now
        let (cached, task): (String?, Task<Access, any Error>?) = state.withLock { state in
            if let current = state.current, now < current.renewAt { return (current.token, nil) }
            if let pending = state.pending { return (nil, pending) }
            let task = Task { try await self.exchange(client: client, timeout: timeout) }
            state.pending = task
            return (nil, task)
        }
        if let cached { return cached }
        guard let task else { throw TokenFailure.unavailable("no token exchange") }
        do {
            let access = try await task.value
            state.withLock { state in
                if state.pending == task {
                    state.pending = nil
                    // Renewed five minutes before it runs out, or half-way through a short one.
                    let early = min(.seconds(300), access.lifetime / 2)
                    state.current = (access.token, now + access.lifetime - early)
                }
            }
            return access.token
        } catch {
            state.withLock { state in if state.pending == task { state.pending = nil } }
            throw error
        }
    }

    /// Drops `token` (FCM called it invalid): the next ``accessToken(client:timeout:)`` exchanges anew.
    func expire(_ token: String) {
        state.withLock { state in if state.current?.token == token { state.current = nil } }
    }

    private func exchange(client: HTTPClient, timeout: Duration) async throws -> Access {
        var request = HTTPClientRequest(url: tokenURL)
        request.method = .POST
        request.headers.add(name: "content-type", value: "application/x-www-form-urlencoded")
        request.body = .bytes(
            ByteBuffer(string: "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion(issuedAt: Date()))"))
        let status: Int
        let body: String
        do {
            let response = try await client.execute(request, timeout: WebhookService.timeAmount(timeout))
            status = Int(response.status.code)
            body = String(buffer: try await response.body.collect(upTo: 64 << 10))
        } catch {
            throw TokenFailure.unavailable("the token endpoint \(tokenURL) cannot be reached: \(error)")
        }
        return try Self.access(status: status, body: body)
    }

    /// The token endpoint's answer: `{"access_token", "expires_in", "token_type"}`, or
    /// `{"error", "error_description"}`.
    static func access(status: Int, body: String) throws(TokenFailure) -> Access {
        struct Answer: Decodable {
            var access_token: String?
            var expires_in: Double?
            var error: String?
            var error_description: String?
        }
        let answer = try? JSONDecoder().decode(Answer.self, from: Data(body.utf8))
        guard status == 200 else {
            let reason = PushVerdict.cut(
                [answer?.error, answer?.error_description].compactMap { $0 }.joined(separator: ": ").nonEmpty ?? "HTTP \(status)")
            if status == 429 || status >= 500 { throw .unavailable("the token endpoint answers \(reason)") }
            throw .refused("the token endpoint says \(reason)")
        }
        // The token goes into a header as it is: printable ASCII only, and a sane size.
        guard let token = answer?.access_token, (1...4096).contains(token.utf8.count), token.utf8.allSatisfy({ (0x21...0x7e).contains($0) }) else {
            throw .unavailable("the token endpoint's answer has no usable access_token")
        }
        let seconds = answer?.expires_in.flatMap { $0.isFinite ? min(max($0, 1), 86_400) : nil } ?? 3600
        return Access(token: token, lifetime: .milliseconds(Int64(seconds * 1000)))
    }

    /// Why no access token could be had.
    enum TokenFailure: Error, CustomStringConvertible, Equatable {
        case refused(String)
        case unavailable(String)

        var description: String {
            switch self {
            case .refused(let reason), .unavailable(let reason): reason
            }
        }
    }

    /// Credentials that cannot be used, and why.
    public struct Invalid: Error, CustomStringConvertible, Sendable {
        public let description: String
        init(_ description: String) { self.description = description }
    }
}

extension String {
    fileprivate var nonEmpty: String? { isEmpty ? nil : self }
}

/// The FCM HTTP v1 message that sets a device's badge: `notification_count` in the Android part,
/// `aps.badge` in the APNs part, one collapse key per user.
enum FCMMessage {
    static func body(token: String, badge: Int64, collapseID: String) -> String {
        let count = min(max(badge, 0), Int64(Int32.max))
        return #"{"message":{"token":"\#(token)","android":{"collapse_key":"\#(collapseID)","notification":{"notification_count":\#(count)}},"#
            + #""apns":{"headers":{"apns-collapse-id":"\#(collapseID)","apns-push-type":"alert","apns-priority":"5"},"payload":{"aps":{"badge":\#(count)}}}}}"#
    }
}
