import Foundation

/// What a provider said of one push (its HTTP status and error), as the sender acts on it.
enum PushVerdict: Equatable {
    case sent
    /// The device token is no longer valid (APNs 410 `Unregistered`, 400 `BadDeviceToken`; FCM
    /// `UNREGISTERED`, `SENDER_ID_MISMATCH`): remove the device.
    case gone(String)
    /// The bearer token expired (APNs 403 `ExpiredProviderToken`, FCM 401): make a new one and
    /// try again.
    case expiredToken
    /// The credentials are refused (APNs 403 other than expired, FCM 403, or the token endpoint
    /// refusing the service account): stop, with the reason.
    case refused(String)
    /// Try again later (429, 5xx, a connection failure); `after` is the `Retry-After` if any.
    case retry(String, after: Duration?)
    /// The request itself is wrong for this device (another 4xx): try again only after a while.
    case rejected(String)

    /// APNs' answer: `{"reason": "...", "timestamp": …}` (a 410 carries the time as a number).
    static func apns(status: Int, body: String, retryAfter: String?) -> PushVerdict {
        struct Answer: Decodable { var reason: String? }
        let reason = (try? JSONDecoder().decode(Answer.self, from: Data(body.utf8)))?.reason.map(Self.cut) ?? "HTTP \(status)"
        switch status {
        case 200: return .sent
        case 410: return .gone(reason)
        case 400 where reason == "BadDeviceToken" || reason == "DeviceTokenNotForTopic": return .gone(reason)
        case 403 where reason == "ExpiredProviderToken": return .expiredToken
        case 403: return .refused(reason)
        case 429, 500...599: return .retry(reason, after: WebhookConfiguration.retryAfter(retryAfter))
        default: return .rejected(reason)
        }
    }

    /// FCM HTTP v1's answer: `{"error": {"code", "message", "status", "details": [{"@type":
    /// "…FcmError", "errorCode": "UNREGISTERED"}]}}`; the `errorCode` decides where there is one.
    static func fcm(status: Int, body: String, retryAfter: String?) -> PushVerdict {
        struct Answer: Decodable {
            struct Failure: Decodable {
                struct Detail: Decodable { var errorCode: String? }
                var status: String?
                var message: String?
                var details: [Detail]?
            }
            var error: Failure?
        }
        let failure = (try? JSONDecoder().decode(Answer.self, from: Data(body.utf8)))?.error
        let code = failure?.details?.lazy.compactMap(\.errorCode).first ?? failure?.status ?? "HTTP \(status)"
        let reason = Self.cut(failure?.message.map { "\(code): \($0)" } ?? code)
        switch (status, code) {
        case (200, _): return .sent
        case (_, "UNREGISTERED"), (_, "SENDER_ID_MISMATCH"): return .gone(reason)
        // The APNs or web push credentials uploaded to Firebase are wrong: a setting of the
        // Firebase project, not of this service; other devices may still be reached.
        case (_, "THIRD_PARTY_AUTH_ERROR"): return .rejected(reason)
        case (401, _): return .expiredToken
        case (403, _): return .refused(reason)
        case (429, _), (500...599, _): return .retry(reason, after: WebhookConfiguration.retryAfter(retryAfter))
        default: return .rejected(reason)
        }
    }

    /// A provider's words as they go into logs and the device's last error: one line, at most 200 characters.
    static func cut(_ text: String) -> String {
        let breaks: Set<Unicode.GeneralCategory> = [.control, .lineSeparator, .paragraphSeparator]
        return String(String(text.unicodeScalars.map { breaks.contains($0.properties.generalCategory) ? " " : Character($0) }).prefix(200))
    }
}
