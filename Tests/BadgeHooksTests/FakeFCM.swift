import CryptoExtras
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Synchronization

/// FCM and Google's token endpoint on loopback, over TLS and HTTP/2, checking what they check:
/// the token endpoint takes a JWT-bearer grant whose assertion is signed (RS256) by the service
/// account's key, names the account (`iss`), FCM's scope and the endpoint itself (`aud`), and was
/// issued within the last minute for at most an hour; it answers an access token that stays
/// valid `tokenValidity` seconds (while telling the client `expires_in`). `messages:send` takes
/// only a valid access token, for its own project, with the badge in the Android and APNs parts;
/// then it answers each registration token as scripted (`answers`) or 200, recording pushes.
final class FakeFCM: Sendable {
    struct Push: Sendable {
        var device: String
        var badge: Int
        var collapseKey: String
        var accessToken: String
        var http2: Bool
    }

    let publicKey: _RSA.Signing.PublicKey
    let clientEmail: String
    let projectID: String
    let pushes = Mutex<[Push]>([])
    /// Per registration token: the statuses to answer its next pushes with (429 carries `Retry-After: 1`).
    let answers = Mutex<[String: [Int]]>([:])
    /// Every refusal, as `status code`.
    let refusals = Mutex<[String]>([])
    /// Access tokens given, each with the time it stops being valid.
    let issued = Mutex<[String: Date]>([:])
    /// How long a new access token is valid here, and what the answer says (`expires_in`).
    let tokenValidity = Atomic<Int>(3600)
    let expiresIn = Atomic<Int>(3600)
    private let baseURL = Mutex<String>("")

    init(publicKey: _RSA.Signing.PublicKey, clientEmail: String, projectID: String) {
        (self.publicKey, self.clientEmail, self.projectID) = (publicKey, clientEmail, projectID)
    }

    var tokenURL: String { baseURL.withLock { $0 } + "/token" }

    func pushes(to device: String) -> [Push] { pushes.withLock { $0.filter { $0.device == device } } }

    private func json(_ status: HTTPResponse.Status, _ body: String, retryAfter: Bool = false) -> Response {
        var headers: HTTPFields = [.contentType: "application/json"]
        if retryAfter { headers[.retryAfter] = "1" }
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: body)))
    }

    private func refuse(_ status: HTTPResponse.Status, _ state: String, code: String? = nil) -> Response {
        refusals.withLock { $0.append("\(status.code) \(code ?? state)") }
        let details = code.map { #","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#($0)"}]"# } ?? ""
        return json(
            status, #"{"error":{"code":\#(status.code),"message":"refused by the fake","status":"\#(state)"\#(details)}}"#,
            retryAfter: status == .tooManyRequests)
    }

    /// The token endpoint (RFC 7523's JWT-bearer grant, as Google runs it).
    func token(form: String) -> Response {
        var fields: [String: String] = [:]
        for pair in form.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).removingPercentEncoding ?? "" }
            if parts.count == 2 { fields[parts[0]] = parts[1] }
        }
        let invalid = { (why: String) -> Response in
            self.refusals.withLock { $0.append("400 invalid_grant") }
            return self.json(.badRequest, #"{"error":"invalid_grant","error_description":"\#(why)"}"#)
        }
        guard fields["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer", let assertion = fields["assertion"] else {
            return invalid("unsupported grant")
        }
        let parts = assertion.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3, let signature = FakeAPNs.base64URL(parts[2]),
            publicKey.isValidSignature(
                _RSA.Signing.RSASignature(rawRepresentation: signature), for: Data("\(parts[0]).\(parts[1])".utf8), padding: .insecurePKCS1v1_5)
        else { return invalid("Invalid JWT Signature.") }
        let now = Int(Date().timeIntervalSince1970)
        guard let header = FakeAPNs.json(parts[0]), header["alg"] as? String == "RS256",
            let claims = FakeAPNs.json(parts[1]), claims["iss"] as? String == clientEmail,
            claims["scope"] as? String == "https://www.googleapis.com/auth/firebase.messaging", claims["aud"] as? String == tokenURL,
            let iat = claims["iat"] as? Int, let exp = claims["exp"] as? Int, abs(now - iat) <= 60, exp > now, exp - iat <= 3600
        else { return invalid("Invalid JWT: claims") }
        let token = "fake-access-\(UUID().uuidString)"
        let validity = tokenValidity.load(ordering: .relaxed)
        issued.withLock { $0[token] = Date().addingTimeInterval(Double(validity)) }
        return json(.ok, #"{"access_token":"\#(token)","expires_in":\#(expiresIn.load(ordering: .relaxed)),"token_type":"Bearer"}"#)
    }

    func send(project: String, headers: HTTPFields, body: String, http2: Bool) -> Response {
        guard let authorization = headers[.authorization], authorization.hasPrefix("Bearer ") else {
            return refuse(.unauthorized, "UNAUTHENTICATED")
        }
        let token = String(authorization.dropFirst(7))
        guard let until = issued.withLock({ $0[token] }), until > Date() else { return refuse(.unauthorized, "UNAUTHENTICATED") }
        guard project == projectID else { return refuse(.forbidden, "PERMISSION_DENIED") }
        guard let payload = try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any],
            let message = payload["message"] as? [String: Any], let device = message["token"] as? String,
            let android = message["android"] as? [String: Any], let notification = android["notification"] as? [String: Any],
            let count = notification["notification_count"] as? Int, let collapseKey = android["collapse_key"] as? String,
            let apns = message["apns"] as? [String: Any], let apnsHeaders = apns["headers"] as? [String: String],
            let apnsPayload = apns["payload"] as? [String: Any], let aps = apnsPayload["aps"] as? [String: Any],
            aps["badge"] as? Int == count, apnsHeaders["apns-collapse-id"] == collapseKey
        else { return refuse(.badRequest, "INVALID_ARGUMENT", code: "INVALID_ARGUMENT") }
        let scripted = answers.withLock { answers -> Int? in
            guard var queue = answers[device], !queue.isEmpty else { return nil }
            defer { answers[device] = queue }
            return queue.removeFirst()
        }
        switch scripted {
        case 429: return refuse(.tooManyRequests, "RESOURCE_EXHAUSTED", code: "QUOTA_EXCEEDED")
        case 503: return refuse(.serviceUnavailable, "UNAVAILABLE", code: "UNAVAILABLE")
        case 404: return refuse(.notFound, "NOT_FOUND", code: "UNREGISTERED")
        default:
            pushes.withLock { $0.append(Push(device: device, badge: count, collapseKey: collapseKey, accessToken: token, http2: http2)) }
            return json(.ok, #"{"name":"projects/\#(projectID)/messages/\#(UUID().uuidString)"}"#)
        }
    }

    /// Serves until the task is cancelled; returns the base URL and the certificate file to trust.
    func start(in folder: URL, logger: Logger) async throws -> (url: String, trust: String, task: Task<Void, any Error>) {
        let router = Router(context: ProviderContext.self)
        router.post("/token") { request, _ -> Response in
            self.token(form: String(buffer: try await request.body.collect(upTo: 1 << 16)))
        }
        router.post("/v1/projects/:project/messages:send") { request, context -> Response in
            let body = try await request.body.collect(upTo: 1 << 16)
            let http2 = await context.isHTTP2()
            return self.send(project: context.parameters.get("project") ?? "", headers: request.headers, body: String(buffer: body), http2: http2)
        }
        let started = try await LoopbackTLS.serve(router, name: "fcm", in: folder, logger: logger)
        baseURL.withLock { $0 = started.url }
        return started
    }

    /// A service account key file for `key`, its token endpoint this fake's.
    func serviceAccount(_ key: _RSA.Signing.PrivateKey) throws -> Data {
        try JSONSerialization.data(withJSONObject: [
            "type": "service_account", "project_id": projectID, "private_key_id": "0123abcd", "private_key": key.pkcs8PEMRepresentation,
            "client_email": clientEmail, "client_id": "1", "token_uri": tokenURL,
        ])
    }
}
