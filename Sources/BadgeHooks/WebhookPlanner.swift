public import BadgeCore
public import BadgeStore
import Crypto
import Foundation

/// Turns feed records into deliveries (pure): for each subscription, what each record shows of
/// the kinds it wants within its paths.
///
/// - `cleared` (`badge.cleared`): the changed nodes within the paths that no longer show;
/// - `seen` (`badge.seen`): the changed nodes within the paths that show with nothing unseen;
/// - `root` (`badge.root`): the user's visible root totals differ from those of the last record
///   handled for the user (`previous_root` null when there was none);
/// - `broadcasts` (`broadcasts.changed`): a broadcasts record, whole, once for every user.
///
/// A user record at or below the user's stored position was handled before and makes nothing.
public enum WebhookPlanner {
    /// The deliveries of `records` (in feed order), moving `positions` on.
    public static func plan(
        _ records: [ChangeRecord], positions: inout [String: WebhookStore.UserPosition], subscriptions: [WebhookSubscription]
    ) -> [WebhookStore.NewDelivery] {
        var deliveries: [WebhookStore.NewDelivery] = []
        for record in records {
            switch record {
            case .broadcasts(let version, let json):
                for subscription in subscriptions where subscription.kinds.contains(.broadcasts) {
                    let id = messageID(subscription.id, "", version, .broadcasts)
                    deliveries.append(
                        WebhookStore.NewDelivery(
                            subscription: subscription.id, user: "", id: id, kind: WebhookSubscription.Kind.broadcasts.rawValue,
                            payload: envelope(type: "broadcasts.changed", timestamp: nil, dataJSON: json)))
                }
            case .user(let change):
                let before = positions[change.user]
                guard (before?.ownVersion ?? 0) < change.ownVersion else { continue }
                positions[change.user] = WebhookStore.UserPosition(ownVersion: change.ownVersion, root: change.root)
                for subscription in subscriptions {
                    deliveries += userDeliveries(change, previousRoot: before?.root, for: subscription)
                }
            }
        }
        return deliveries
    }

    private static func userDeliveries(
        _ change: ChangeRecord.User, previousRoot: BadgeAggregate?, for subscription: WebhookSubscription
    ) -> [WebhookStore.NewDelivery] {
        var made: [WebhookStore.NewDelivery] = []
        func add(_ kind: WebhookSubscription.Kind, _ type: String, _ data: [String: Any]) {
            var body: [String: Any] = ["user": change.user, "version": change.version, "own_version": change.ownVersion]
            body.merge(data) { _, new in new }
            made.append(
                WebhookStore.NewDelivery(
                    subscription: subscription.id, user: change.user, id: messageID(subscription.id, change.user, change.ownVersion, kind),
                    kind: kind.rawValue, payload: envelope(type: type, timestamp: change.at, data: body)))
        }
        let within = change.changed.filter { subscription.covers($0.path) }
        for kind in subscription.kinds {
            switch kind {
            case .cleared:
                let cleared = within.filter { !$0.shown }.map(\.path.rawValue)
                if !cleared.isEmpty { add(.cleared, "badge.cleared", ["paths": cleared]) }
            case .seen:
                let seen = within.filter { $0.shown && $0.unseen == 0 }
                if !seen.isEmpty {
                    add(.seen, "badge.seen", ["nodes": seen.map { ["path": $0.path.rawValue, "count": $0.count] as [String: Any] }])
                }
            case .root:
                guard previousRoot?.count != change.root.count || previousRoot?.unseen != change.root.unseen else { continue }
                let previous: Any = previousRoot.map { ["count": $0.count, "unseen": $0.unseen] as [String: Any] } ?? NSNull()
                add(.root, "badge.root", ["root": ["count": change.root.count, "unseen": change.root.unseen], "previous_root": previous])
            case .broadcasts:
                continue
            }
        }
        return made
    }

    /// The `webhook-id` of a delivery: the same for the same subscription, user, version and
    /// kind, whichever process makes it (so a record read twice is stored once).
    static func messageID(_ subscription: String, _ user: String, _ version: Int64, _ kind: WebhookSubscription.Kind) -> String {
        let digest = SHA256.hash(data: Data("\(subscription)\n\(user)\n\(version)\n\(kind.rawValue)".utf8))
        return "msg_" + digest.prefix(16).map { String(format: "%02x", $0) }.joined()
    }

    /// The body: `{"type", "timestamp", "data"}`, as Standard Webhooks suggests.
    static func envelope(type: String, timestamp: String?, data: [String: Any]) -> String {
        let json = (try? JSONSerialization.data(withJSONObject: data, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return envelope(type: type, timestamp: timestamp, dataJSON: String(decoding: json, as: UTF8.self))
    }

    static func envelope(type: String, timestamp: String?, dataJSON: String) -> String {
        var text = "{\"data\":" + dataJSON + ",\"timestamp\":"
        JSONText.appendString(timestamp ?? ISO8601DateFormatter().string(from: Date()), to: &text)
        text += ",\"type\":"
        JSONText.appendString(type, to: &text)
        return text + "}"
    }
}
