import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Synchronization
import TestSupport

/// An APNs stand-in on loopback, over TLS and HTTP/2 (ALPN), that checks what APNs checks: the
/// provider token (an ES256 JWT: its signature with the team's key, `kid`, `iss`, and `iat`
/// not older than `maximumTokenAge`), the topic, the push type and the payload; then answers
/// each device as scripted (`answers`: statuses for its next pushes) or 200, recording pushes.
final class FakeAPNs: Sendable {
    struct Push: Sendable {
        var device: String
        var badge: Int
        var topic: String
        var collapseID: String
        var token: String
        /// Whether it came over HTTP/2, as APNs requires.
        var http2: Bool
    }

    let publicKey: P256.Signing.PublicKey
    let keyID: String
    let teamID: String
    let pushes = Mutex<[Push]>([])
    /// Per device token: the statuses to answer its next pushes with (429 carries `Retry-After: 1`).
    let answers = Mutex<[String: [Int]]>([:])
    /// Every refusal, as `status reason`.
    let refusals = Mutex<[String]>([])
    let maximumTokenAge = Atomic<Int>(3600)

    init(publicKey: P256.Signing.PublicKey, keyID: String, teamID: String) {
        (self.publicKey, self.keyID, self.teamID) = (publicKey, keyID, teamID)
    }

    func pushes(to device: String) -> [Push] { pushes.withLock { $0.filter { $0.device == device } } }

    private func refuse(_ status: HTTPResponse.Status, _ reason: String) -> Response {
        refusals.withLock { $0.append("\(status.code) \(reason)") }
        var headers: HTTPFields = [.contentType: "application/json"]
        if status == .tooManyRequests { headers[.retryAfter] = "1" }
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: #"{"reason":"\#(reason)"}"#)))
    }

    func answer(device: String, headers: HTTPFields, body: String, http2: Bool) -> Response {
        guard let authorization = headers[.authorization], authorization.hasPrefix("bearer ") else {
            return refuse(.forbidden, "MissingProviderToken")
        }
        let token = String(authorization.dropFirst(7))
        let parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3, let signature = Self.base64URL(parts[2]),
            let ecdsa = try? P256.Signing.ECDSASignature(rawRepresentation: signature),
            publicKey.isValidSignature(ecdsa, for: Data("\(parts[0]).\(parts[1])".utf8)),
            let header = Self.json(parts[0]), header["alg"] as? String == "ES256", header["kid"] as? String == keyID,
            let claims = Self.json(parts[1]), claims["iss"] as? String == teamID, let issued = claims["iat"] as? Int
        else { return refuse(.forbidden, "InvalidProviderToken") }
        guard Int(Date().timeIntervalSince1970) - issued <= maximumTokenAge.load(ordering: .relaxed) else {
            return refuse(.forbidden, "ExpiredProviderToken")
        }
        let field = { (name: String) in headers[HTTPField.Name(name)!] ?? "" }
        guard !field("apns-topic").isEmpty else { return refuse(.badRequest, "MissingTopic") }
        guard field("apns-push-type") == "alert" else { return refuse(.badRequest, "InvalidPushType") }
        guard let payload = try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any],
            let aps = payload["aps"] as? [String: Any], let badge = aps["badge"] as? Int, aps.count == 1
        else { return refuse(.badRequest, "PayloadEmpty") }
        let scripted = answers.withLock { answers -> Int? in
            guard var queue = answers[device], !queue.isEmpty else { return nil }
            defer { answers[device] = queue }
            return queue.removeFirst()
        }
        switch scripted {
        case 429: return refuse(.tooManyRequests, "TooManyRequests")
        case 503: return refuse(.serviceUnavailable, "ServiceUnavailable")
        case 410: return refuse(.gone, "Unregistered")
        default:
            pushes.withLock {
                $0.append(Push(device: device, badge: badge, topic: field("apns-topic"), collapseID: field("apns-collapse-id"), token: token, http2: http2))
            }
            return Response(status: .ok)
        }
    }

    /// Serves until the task is cancelled; returns the base URL and the certificate file to trust.
    func start(in folder: URL, logger: Logger) async throws -> (url: String, trust: String, task: Task<Void, any Error>) {
        let router = Router(context: ProviderContext.self)
        router.post("/3/device/:device") { request, context -> Response in
            let body = try await request.body.collect(upTo: 1 << 16)
            let http2 = await context.isHTTP2()
            return self.answer(device: context.parameters.get("device") ?? "", headers: request.headers, body: String(buffer: body), http2: http2)
        }
        return try await LoopbackTLS.serve(router, name: "apns", in: folder, logger: logger)
    }

    static func base64URL(_ text: String) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64)
    }

    static func json(_ part: String) -> [String: Any]? {
        base64URL(part).flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] }
    }
}
