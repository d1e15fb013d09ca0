public import BadgeCore
import Foundation
public import LibPQ

/// The webhooks' tables (migration 23): subscriptions, the feed position per user, and the
/// deliveries with their tries. Each function is one statement or one transaction of its own.
public enum WebhookStore {
    /// A delivery to make: the subscription, the user ('' for a broadcasts record), the id
    /// (`webhook-id`), the kind and the JSON body.
    public struct NewDelivery: Sendable, Hashable {
        public var subscription: String
        public var user: String
        public var id: String
        public var kind: String
        public var payload: String

        public init(subscription: String, user: String, id: String, kind: String, payload: String) {
            (self.subscription, self.user, self.id, self.kind, self.payload) = (subscription, user, id, kind, payload)
        }
    }

    /// Where the feed left a user: the last own version handled and the root totals it carried.
    public struct UserPosition: Sendable, Hashable {
        public var ownVersion: Int64
        public var root: BadgeAggregate

        public init(ownVersion: Int64, root: BadgeAggregate) {
            (self.ownVersion, self.root) = (ownVersion, root)
        }
    }

    /// A delivery claimed for a try: with the subscription's URL and secret as they are now.
    public struct Claimed: Sendable, Hashable {
        public var user: String
        public var id: String
        public var subscription: String
        public var kind: String
        public var payload: String
        /// This try's number (1 for the first).
        public var attempt: Int
        public var url: String
        public var secret: String
    }

    /// A delivery as `reddot webhooks deliveries` lists it.
    public struct Listed: Sendable, Hashable, Codable {
        public var user: String
        public var id: String
        public var subscription: String
        public var kind: String
        public var state: String
        public var attempts: Int
        public var lastError: String?
        public var createdAt: String

        enum CodingKeys: String, CodingKey {
            case user, id, subscription, kind, state, attempts
            case lastError = "last_error"
            case createdAt = "created_at"
        }
    }

    // MARK: Subscriptions

    /// Stores `subscription`, replacing one with its id. Returns true when it is new.
    @discardableResult
    public static func put(_ subscription: WebhookSubscription, on connection: PGConnection) throws(PGError) -> Bool {
        let row = try connection.query(
            WebhookSQL.put,
            [
                subscription.id, subscription.url, subscription.secret, subscription.paths.map(\.rawValue),
                subscription.kinds.map(\.rawValue), subscription.origin.rawValue,
            ]
        ).singleRow()
        return try row.decode(0, as: Bool.self)
    }

    /// Every subscription, by id.
    public static func subscriptions(on connection: PGConnection) throws(PGError) -> [WebhookSubscription] {
        var found: [WebhookSubscription] = []
        for row in try connection.query(WebhookSQL.list).rows {
            let id = try row.decode(0, as: String.self)
            let paths = try? JSONDecoder().decode([String].self, from: Data(try row.decode(3, as: String.self).utf8))
            let kinds = try? JSONDecoder().decode([String].self, from: Data(try row.decode(4, as: String.self).utf8))
            do {
                found.append(
                    try WebhookSubscription(
                        id: id, url: try row.decode(1, as: String.self), secret: try row.decode(2, as: String.self),
                        paths: paths ?? [], kinds: kinds ?? [],
                        origin: WebhookSubscription.Origin(rawValue: try row.decode(5, as: String.self)) ?? .api))
            } catch {
                // Only a hand-edited row can get here: the table's checks and the type agree.
                throw PGError(code: .decoding, message: "webhook subscription \(id) is stored invalid: \(error)")
            }
        }
        return found
    }

    /// Removes the subscription `id` and its pending deliveries. Returns false when there was none.
    public static func remove(_ id: String, on connection: PGConnection) throws(PGError) -> Bool {
        try connection.query(WebhookSQL.remove, [id]).singleRow().decode(0, as: Bool.self)
    }

    /// Makes the file's subscriptions the stored ones of origin `file`: `subscriptions` are put,
    /// other file-made ones removed (with their pending deliveries); the API's stay. One
    /// transaction. Returns how many file-made ones were removed.
    public static func replaceFromFile(_ subscriptions: [WebhookSubscription], on connection: PGConnection) throws -> Int {
        try connection.withTransaction { connection in
            let removed = try connection.query(WebhookSQL.removeFileExcept, [subscriptions.map(\.id)]).singleRow().decode(0, as: Int.self)
            for var subscription in subscriptions {
                subscription.origin = .file
                try put(subscription, on: connection)
            }
            return removed
        }
    }

    // MARK: Following the feed

    /// The stored positions of `users`.
    public static func positions(of users: [String], on connection: PGConnection) throws(PGError) -> [String: UserPosition] {
        var found: [String: UserPosition] = [:]
        for row in try connection.query(WebhookSQL.positions, [users]).rows {
            found[try row.decode(0, as: String.self)] = UserPosition(
                ownVersion: try row.decode(1, as: Int64.self),
                root: BadgeAggregate(count: try row.decode(2, as: Int64.self), unseen: try row.decode(3, as: Int64.self)))
        }
        return found
    }

    /// Stores `deliveries` (one already stored, by user and id, is left as it is: a record read
    /// twice makes no second delivery) and moves the users' positions forward (never back), in
    /// one transaction. Returns how many deliveries were new.
    public static func record(
        _ deliveries: [NewDelivery], positions: [String: UserPosition], on connection: PGConnection
    ) throws -> Int {
        let users = positions.keys.sorted()
        return try connection.withTransaction { connection in
            let added = try connection.query(
                WebhookSQL.insertDeliveries,
                [
                    deliveries.map(\.user), deliveries.map(\.id), deliveries.map(\.subscription), deliveries.map(\.kind),
                    deliveries.map(\.payload),
                ]
            ).affectedRows
            if !users.isEmpty {
                let moved = users.map { positions[$0]! }
                _ = try connection.query(
                    WebhookSQL.movePositions,
                    [users, moved.map(\.ownVersion), moved.map(\.root.count), moved.map(\.root.unseen)])
            }
            return added
        }
    }

    // MARK: Delivering

    /// Claims up to `limit` due deliveries for a try: each is held for `lease` (another sender
    /// skips it; a sender that dies before it answers leaves it to be tried again after it) and
    /// its try counted. A delivery whose subscription is gone is marked dead, not claimed.
    /// The deliveries come from one part of `webhook_delivery` (`TableParts`: the first in turn
    /// from `parts.next` with any due; on the shipped schema the table). Returns them and
    /// `parts` as read (merge it into the owner's; the owner moves `next`).
    public static func claim(
        limit: Int, lease: Duration, parts: TableParts = TableParts(of: "webhook_delivery"), on connection: PGConnection
    ) throws(PGError) -> (claimed: [Claimed], parts: TableParts) {
        var parts = parts
        let claimed = try parts.claimInTurn(
            WebhookSQL.claim, make: { WebhookSQL.claim(from: $0) }, citus: WebhookSQL.citusClaim, [limit, Self.seconds(lease)], on: connection
        ) {
            row throws(PGError) in
            Claimed(
                user: try row.decode(0), id: try row.decode(1), subscription: try row.decode(2), kind: try row.decode(3),
                payload: try row.decode(4), attempt: try row.decode(5), url: try row.decode(6), secret: try row.decode(7))
        }
        return (claimed, parts)
    }

    /// The endpoint answered 2xx.
    public static func delivered(_ delivery: Claimed, on connection: PGConnection) throws(PGError) {
        _ = try connection.query(WebhookSQL.delivered, [delivery.user, delivery.id])
    }

    /// The try failed with `error`: tried again after `retryAfter`, or dead when nil.
    public static func failed(_ delivery: Claimed, error: String, retryAfter: Duration?, on connection: PGConnection) throws(PGError) {
        if let retryAfter {
            _ = try connection.query(WebhookSQL.retry, [delivery.user, delivery.id, Self.seconds(retryAfter), String(error.prefix(1000))])
        } else {
            _ = try connection.query(WebhookSQL.dead, [delivery.user, delivery.id, String(error.prefix(1000))])
        }
    }

    /// Makes dead deliveries pending again, due now, their tries counted from 0: the one with
    /// `id` (and `user`), or every dead one of `subscription`. Returns how many.
    public static func replay(id: String?, user: String?, subscription: String?, on connection: PGConnection) throws(PGError) -> Int {
        try connection.query(WebhookSQL.replay, [id, user, subscription]).affectedRows
    }

    /// The deliveries in `state` (newest first, at most `limit`), of `subscription` when given.
    public static func list(state: String, subscription: String?, limit: Int, on connection: PGConnection) throws(PGError) -> [Listed] {
        try connection.query(WebhookSQL.listDeliveries, [state, subscription, limit]).rows.map { row throws(PGError) in
            Listed(
                user: try row.decode(0), id: try row.decode(1), subscription: try row.decode(2), kind: try row.decode(3),
                state: try row.decode(4), attempts: try row.decode(5), lastError: try row.decode(6), createdAt: try row.decode(7))
        }
    }

    /// Deletes finished deliveries (delivered or dead) older than `retention`, at most `limit`
    /// per call. Returns how many.
    public static func prune(olderThan retention: Duration, limit: Int, on connection: PGConnection) throws(PGError) -> Int {
        try connection.query(WebhookSQL.prune, [Self.seconds(retention), limit]).affectedRows
    }

    /// Whole seconds of `duration`, as PostgreSQL's interval arithmetic takes them.
    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
