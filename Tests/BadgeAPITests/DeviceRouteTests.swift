import BadgeAPI
import Foundation
import HTTPTypes
import TestSupport
import Testing

/// Issue 28: `PUT` and `DELETE /v1/users/{user}/devices/{device}`, with the user's own token.
@Suite("Push devices over HTTP")
struct DeviceRouteTests {
    @Test("a user registers (201), re-registers (200) and removes (204, then 404) a device; another user's token is answered as a missing user; bad bodies 400")
    func lifecycle() async throws {
        try await MemoryHarness.with { harness in
            let own = try await harness.token("u1")
            let other = try await harness.token("u2")
            let body = #"{"platform":"apns","token":"a1b2c3","app_id":"com.example.app"}"#
            #expect(try await harness.call(.put, "/v1/users/u1/devices/phone-1", body: body).status == .unauthorized)
            let stranger = try await harness.call(.put, "/v1/users/u1/devices/phone-1", token: other, body: body)
            #expect(stranger.status == .notFound, "\(stranger.text)")
            let made = try await harness.call(.put, "/v1/users/u1/devices/phone-1", token: own, body: body)
            #expect(made.status == .created && made.text.contains(#""app_id":"com.example.app""#), "\(made.text)")
            #expect(try await harness.call(.put, "/v1/users/u1/devices/phone-1", token: own, body: body).status == .ok)
            let quiet = #"{"platform":"fcm","token":"t:1","app_id":"com.example.app","quiet_hours":{"start":"22:00","end":"07:30","time_zone":"Europe/Berlin"}}"#
            let withQuiet = try await harness.call(.put, "/v1/users/u1/devices/pixel", token: own, body: quiet)
            #expect(
                withQuiet.status == .created && withQuiet.text.contains(#""quiet_hours":{"#) && withQuiet.text.contains(#""end":"07:30""#),
                "\(withQuiet.text)")
            for (bad, said) in [
                ("[]", "JSON object"), (#"{"platform":"wns","token":"t","app_id":"a"}"#, "platform must be"),
                (#"{"platform":"apns","token":"a b","app_id":"a"}"#, "token must be"),
                (#"{"platform":"apns","token":"../../x","app_id":"a"}"#, "token must be"),
                (#"{"platform":"fcm","token":"t","app_id":"a/b"}"#, "app_id must be"),
                (#"{"platform":"fcm","token":"t","app_id":"a","quiet_hours":{"start":"22:00","end":"07:00","time_zone":"Nowhere/Land"}}"#, "IANA time zone"),
                (#"{"platform":"fcm","token":"t","app_id":"a","quiet_hours":{"start":"24:00","end":"07:00","time_zone":"UTC"}}"#, "HH:MM"),
                (#"{"platform":"fcm","token":"t","app_id":"a","quiet_hours":{"start":"22:00"}}"#, "quiet_hours {start, end, time_zone}"),
            ] {
                let refused = try await harness.call(.put, "/v1/users/u1/devices/phone-1", token: own, body: bad)
                #expect(refused.status == .badRequest && refused.errorCode == "invalid_device" && refused.text.contains(said), "\(bad): \(refused.text)")
            }
            let badID = try await harness.call(.put, "/v1/users/u1/devices/a%20b", token: own, body: body)
            #expect(badID.status == .badRequest && badID.text.contains("device id"), "\(badID.text)")
            // A path parameter arrives percent-encoded: `N%3A1` is the device `N:1`, one the
            // document's pattern allows (schemathesis sent it); `%zz` is not valid encoding.
            let encoded = try await harness.call(.put, "/v1/users/u1/devices/N%3A.-1", token: own, body: body)
            #expect(encoded.status == .created && encoded.text.contains(#""id":"N:.-1""#), "\(encoded.text)")
            #expect(try await harness.call(.delete, "/v1/users/u1/devices/N:.-1", token: own).status == .noContent)
            let undecodable = try await harness.call(.put, "/v1/users/u1/devices/a%zz", token: own, body: body)
            #expect(undecodable.status == .badRequest && undecodable.text.contains("percent-encoding"), "\(undecodable.text)")
            #expect(try await harness.call(.delete, "/v1/users/u1/devices/phone-1", token: other).status == .notFound)
            #expect(try await harness.call(.delete, "/v1/users/u1/devices/phone-1", token: own).status == .noContent)
            let gone = try await harness.call(.delete, "/v1/users/u1/devices/phone-1", token: own)
            #expect(gone.status == .notFound && gone.errorCode == "not_found", "\(gone.text)")
            // An id no device can have: 400, as for PUT, not 404.
            let invalid = try await harness.call(.delete, "/v1/users/u1/devices/a%20b", token: own)
            #expect(invalid.status == .badRequest && invalid.errorCode == "invalid_device", "\(invalid.text)")
        }
    }
}
