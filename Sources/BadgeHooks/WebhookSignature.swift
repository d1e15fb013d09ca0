import Crypto
public import Foundation

/// Standard Webhooks signing: `webhook-signature: v1,<base64 HMAC-SHA256>` over
/// `<webhook-id>.<webhook-timestamp>.<body>`, keyed with the secret's bytes (`whsec_` + base64).
public enum WebhookSignature {
    /// The `v1,` signature of `body` sent as `id` at `timestamp` (Unix seconds).
    public static func sign(id: String, timestamp: Int64, body: String, key: [UInt8]) -> String {
        let content = Data("\(id).\(timestamp).\(body)".utf8)
        let mac = HMAC<SHA256>.authenticationCode(for: content, using: SymmetricKey(data: key))
        return "v1," + Data(mac).base64EncodedString()
    }

    /// Whether `header` (space-separated signatures, as a receiver gets them) holds a `v1`
    /// signature of `body` for `key`, compared in constant time, and `timestamp` is within
    /// `tolerance` of `now` (an old delivery replayed by someone else is refused).
    public static func verify(
        header: String, id: String, timestamp: Int64, body: String, key: [UInt8], now: Date = Date(), tolerance: Duration = .seconds(300)
    ) -> Bool {
        let age = now.timeIntervalSince1970 - Double(timestamp)
        guard abs(age) <= Double(tolerance.components.seconds) else { return false }
        let content = Data("\(id).\(timestamp).\(body)".utf8)
        for part in header.split(separator: " ") where part.hasPrefix("v1,") {
            guard let signature = Data(base64Encoded: String(part.dropFirst(3))) else { continue }
            if HMAC<SHA256>.isValidAuthenticationCode(signature, authenticating: content, using: SymmetricKey(data: key)) { return true }
        }
        return false
    }
}
