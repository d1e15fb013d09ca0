import BadgeCore
import BadgeStore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// `PUT` and `DELETE /v1/users/{user}/devices/{device}`: the devices `reddot push run` keeps
/// showing the user's app-icon number, registered with the user's own token.
struct DevicesController {
    let api: BadgeAPI

    var routes: [APIRoute<APIRequestContext>] {
        [
            APIRoute(.put, "/v1/users/:user/devices/:device", access: .user(queryToken: false)) { request, context in
                let user = try context.requireUser()
                let body = try await api.collectBody(request, limit: api.configuration.maximumBodySize)
                let device = try Self.device(id: try context.pathParameter("device", invalid: "invalid_device"), body)
                let created = try await api.storage { deadline in try await api.store.registerDevice(device, for: user, deadline: deadline) }
                return BadgeAPI.json(status: created ? .created : .ok, String(decoding: try BadgeAPI.encode(device).readableBytesView, as: UTF8.self))
            },
            APIRoute(.delete, "/v1/users/:user/devices/:device", access: .user(queryToken: false)) { _, context in
                let user = try context.requireUser()
                let id = try context.pathParameter("device", invalid: "invalid_device")
                // As PUT reads it: an id no device can have is a 400, not a 404.
                if let problem = PushDevice.idProblem(id) { throw APIError.badRequest("invalid_device", problem) }
                guard try await api.storage({ deadline in try await api.store.removeDevice(id, of: user, deadline: deadline) }) else {
                    throw APIError(.notFound, code: "not_found", message: "no device \(id.prefix(128)) for this user")
                }
                return Response(status: .noContent)
            },
        ]
    }

    /// What a PUT sends: the device id is the path's.
    private struct DeviceBody: Decodable {
        var platform: String
        var token: String
        var appID: String
        var quietHours: QuietBody?

        struct QuietBody: Decodable {
            var start: String
            var end: String
            var timeZone: String

            enum CodingKeys: String, CodingKey {
                case start, end
                case timeZone = "time_zone"
            }
        }

        enum CodingKeys: String, CodingKey {
            case platform, token
            case appID = "app_id"
            case quietHours = "quiet_hours"
        }
    }

    private static func device(id: String, _ body: ByteBuffer) throws -> PushDevice {
        let decoded: DeviceBody
        do {
            decoded = try JSONDecoder().decode(DeviceBody.self, from: Data(buffer: body))
        } catch {
            throw APIError.badRequest(
                "invalid_device", "the body must be a JSON object {platform, token, app_id} with, optionally, quiet_hours {start, end, time_zone}")
        }
        do {
            let quiet = try decoded.quietHours.map { quiet throws(PushDevice.Invalid) in
                try PushDevice.QuietHours(start: quiet.start, end: quiet.end, timeZone: quiet.timeZone)
            }
            return try PushDevice(id: id, platform: decoded.platform, token: decoded.token, appID: decoded.appID, quietHours: quiet)
        } catch {
            throw APIError.badRequest("invalid_device", "\(error)")
        }
    }
}
