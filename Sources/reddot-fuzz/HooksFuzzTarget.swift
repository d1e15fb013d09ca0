import BadgeCore
import BadgeStore
import Foundation

/// What `reddot push` and `reddot webhooks` read from outside: a change-feed record (from Kafka),
/// and a webhook subscription or a push device as the admin API and the device route take them
/// (JSON, quiet hours included). The first byte picks which. A record read is consistent (a user, own version 1 or
/// more, valid paths, counts not negative); a refusal is one line; a subscription or device
/// read holds only what its checks allow, and reads back the same after encoding.
enum HooksFuzzTarget {
    static let target = FuzzTarget.hooks

    static func run(_ bytes: [UInt8]) {
        guard let first = bytes.first else { return }
        let rest = Array(bytes.dropFirst())
        switch first % 3 {
        case 0: record(rest)
        case 1: subscription(rest)
        default: device(rest)
        }
    }

    static func record(_ bytes: [UInt8]) {
        switch ChangeRecord.decode(bytes) {
        case .success(.user(let change)):
            FuzzFailure.check(!change.user.isEmpty && change.ownVersion >= 1, target, "a user record without a user or a version")
            FuzzFailure.check(change.root.count >= 0 && change.root.unseen >= 0, target, "a negative root total")
            for node in change.changed {
                FuzzFailure.check((try? BadgePath(validating: node.path.rawValue)) == node.path, target, "a changed path that is not valid")
                FuzzFailure.check(node.count >= 0 && node.unseen >= 0, target, "a negative count")
            }
        case .success(.broadcasts(let version, let json)):
            FuzzFailure.check(version >= 1 && !json.isEmpty, target, "a broadcasts record without a version")
        case .failure(let problem):
            FuzzFailure.checkMessage(problem.description, target)
        }
    }

    static func subscription(_ bytes: [UInt8]) {
        let read: WebhookSubscription
        do {
            read = try JSONDecoder().decode(WebhookSubscription.self, from: Data(bytes))
        } catch let invalid as WebhookSubscription.Invalid {
            FuzzFailure.checkMessage(invalid.description, target)
            return
        } catch {
            return
        }
        FuzzFailure.check(WebhookSubscription.key(of: read.secret) != nil, target, "a subscription with an unusable secret")
        FuzzFailure.check(!read.kinds.isEmpty && Set(read.kinds).count == read.kinds.count, target, "kinds empty or repeated")
        FuzzFailure.check((1...32).contains(read.paths.count), target, "\(read.paths.count) paths")
        guard let encoded = try? JSONEncoder().encode(read), let again = try? JSONDecoder().decode(WebhookSubscription.self, from: encoded) else {
            FuzzFailure.fail(target, "a subscription read does not read back after encoding")
        }
        FuzzFailure.check(again == read, target, "a subscription reads back different")
    }

    static func device(_ bytes: [UInt8]) {
        struct Body: Decodable {
            struct Quiet: Decodable {
                var start: String
                var end: String
                var time_zone: String
            }
            var id: String
            var platform: String
            var token: String
            var app_id: String
            var quiet_hours: Quiet?
        }
        guard let body = try? JSONDecoder().decode(Body.self, from: Data(bytes)) else { return }
        do {
            let quiet = try body.quiet_hours.map { quiet throws(PushDevice.Invalid) in
                try PushDevice.QuietHours(start: quiet.start, end: quiet.end, timeZone: quiet.time_zone)
            }
            if let quiet {
                FuzzFailure.check(
                    (0..<1440).contains(quiet.start) && (0..<1440).contains(quiet.end) && quiet.start != quiet.end, target, "quiet hours out of range")
                _ = quiet.end(containing: Date())
            }
            let device = try PushDevice(id: body.id, platform: body.platform, token: body.token, appID: body.app_id, quietHours: quiet)
            FuzzFailure.check(
                device.id.utf8.count <= 128 && device.token.utf8.count <= 4096 && device.appID.utf8.count <= 255, target, "a device over its limits")
            FuzzFailure.check(
                !device.token.contains(where: { " /?#%\n".contains($0) }), target, "a token that could change the push's URL: \(device.token.debugDescription)")
        } catch {
            FuzzFailure.checkMessage(error.description, target)
        }
    }
}
