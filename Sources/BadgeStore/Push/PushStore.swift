public import BadgeCore
public import Foundation
public import LibPQ

/// A device that shows its user's app-icon number (issue 28): where the provider reaches it.
public struct PushDevice: Sendable, Hashable, Codable {
    /// The provider that delivers to it.
    public enum Platform: String, Sendable, Hashable, Codable, CaseIterable {
        case apns, fcm
    }

    /// The app's own id of the device: letters, digits, `_ . : -`, 1 to 128.
    public var id: String
    public var platform: Platform
    /// The provider's device token (APNs, hex) or registration token (FCM): 1 to 4,096 letters,
    /// digits, `_ - : .`.
    public var token: String
    /// The app: its bundle id (the APNs topic) or its package name.
    public var appID: String
    /// When not to push, in the device's time zone; nil: any time.
    public var quietHours: QuietHours?

    /// A daily window, in a time zone, in which the device is not pushed: a number that comes
    /// then is sent when the window ends (the latest one, once). `start` and `end` are minutes
    /// after midnight; a window whose end is before its start runs over midnight.
    public struct QuietHours: Sendable, Hashable, Codable {
        public var start: Int
        public var end: Int
        /// An IANA time zone name (`Europe/Berlin`), as the device reports it.
        public var timeZone: String

        /// A checked window from `HH:MM` texts.
        ///
        /// - Throws: ``Invalid`` with a sentence naming the field.
        public init(start: String, end: String, timeZone: String) throws(Invalid) {
            guard let from = Self.minutes(start), let to = Self.minutes(end) else {
                throw Invalid("quiet_hours start and end must be times HH:MM from 00:00 to 23:59")
            }
            guard from != to else { throw Invalid("quiet_hours start and end must differ") }
            guard (1...64).contains(timeZone.utf8.count), timeZone.utf8.allSatisfy({ Self.zoneBytes.contains($0) }), TimeZone(identifier: timeZone) != nil
            else { throw Invalid("quiet_hours time_zone must be an IANA time zone name such as Europe/Berlin") }
            (self.start, self.end, self.timeZone) = (from, to, timeZone)
        }

        /// A window as stored (minutes), unchecked but for the ranges; nil when out of them.
        public init?(storedStart: Int, end: Int, timeZone: String) {
            guard (0..<1440).contains(storedStart), (0..<1440).contains(end), storedStart != end, TimeZone(identifier: timeZone) != nil else { return nil }
            (self.start, self.end, self.timeZone) = (storedStart, end, timeZone)
        }

        private static let zoneBytes = Set(Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_+-/".utf8))

        static func minutes(_ text: String) -> Int? {
            let bytes = Array(text.utf8)
            guard bytes.count == 5, bytes[2] == UInt8(ascii: ":"), [0, 1, 3, 4].allSatisfy({ (0x30...0x39).contains(bytes[$0]) }) else { return nil }
            let hours = Int(bytes[0] - 0x30) * 10 + Int(bytes[1] - 0x30), minutes = Int(bytes[3] - 0x30) * 10 + Int(bytes[4] - 0x30)
            guard hours < 24, minutes < 60 else { return nil }
            return hours * 60 + minutes
        }

        /// `minutes` after midnight as `HH:MM`.
        public static func text(_ minutes: Int) -> String {
            let (hours, rest) = (minutes / 60, minutes % 60)
            return (hours < 10 ? "0" : "") + "\(hours):" + (rest < 10 ? "0" : "") + "\(rest)"
        }

        /// When the window that holds `now` ends; nil when `now` is outside the window. Local
        /// times a clock change skips or repeats count as the calendar resolves them.
        public func end(containing now: Date) -> Date? {
            guard let zone = TimeZone(identifier: timeZone) else { return nil }
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = zone
            let parts = calendar.dateComponents([.hour, .minute], from: now)
            let minute = (parts.hour ?? 0) * 60 + (parts.minute ?? 0)
            let inside = start < end ? (start <= minute && minute < end) : (minute >= start || minute < end)
            guard inside else { return nil }
            return calendar.nextDate(
                after: now, matching: DateComponents(hour: end / 60, minute: end % 60, second: 0), matchingPolicy: .nextTime)
        }

        enum CodingKeys: String, CodingKey {
            case start, end
            case timeZone = "time_zone"
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            try self.init(
                start: try container.decode(String.self, forKey: .start), end: try container.decode(String.self, forKey: .end),
                timeZone: try container.decode(String.self, forKey: .timeZone))
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(Self.text(start), forKey: .start)
            try container.encode(Self.text(end), forKey: .end)
            try container.encode(timeZone, forKey: .timeZone)
        }
    }

    /// Why `id` is not a device id (1 to 128 of `A-Z a-z 0-9 _ . : -`); nil when it is one.
    public static func idProblem(_ id: String) -> String? {
        guard (1...128).contains(id.utf8.count), id.utf8.allSatisfy({ idBytes.contains($0) }) else {
            return "the device id must be 1 to 128 letters, digits, _, ., : or -"
        }
        return nil
    }

    /// A checked device.
    ///
    /// - Throws: ``Invalid`` with a sentence naming the field.
    public init(id: String, platform: String, token: String, appID: String, quietHours: QuietHours? = nil) throws(Invalid) {
        if let problem = Self.idProblem(id) { throw Invalid(problem) }
        guard let known = Platform(rawValue: platform) else { throw Invalid("platform must be apns or fcm") }
        // APNs tokens are hex, FCM's letters, digits, `_ - : .`; nothing that could change the
        // request's URL (`/ ? # %`) gets in.
        guard (1...4096).contains(token.utf8.count), token.utf8.allSatisfy({ Self.tokenBytes.contains($0) }) else {
            throw Invalid("token must be 1 to 4,096 letters, digits, _, -, : or .")
        }
        guard (1...255).contains(appID.utf8.count), appID.utf8.allSatisfy({ Self.appBytes.contains($0) }) else {
            throw Invalid("app_id must be 1 to 255 letters, digits, _, . or - (the bundle id or package name)")
        }
        (self.id, self.platform, self.token, self.appID, self.quietHours) = (id, known, token, appID, quietHours)
    }

    private static let idBytes = Set(Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:-".utf8))
    private static let tokenBytes = Set(Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-:.".utf8))
    private static let appBytes = Set(Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-".utf8))

    /// A device that cannot be stored, and why.
    public struct Invalid: Error, CustomStringConvertible, Sendable {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    enum CodingKeys: String, CodingKey {
        case id, platform, token
        case appID = "app_id"
        case quietHours = "quiet_hours"
    }
}

/// The push tables (migration 26): devices with the number each should show and the number it
/// was last sent, and the feed's position per user.
public enum PushStore {
    /// A device claimed for a try: the number to send and the version it is of.
    public struct Claimed: Sendable, Hashable {
        public var user: String
        public var device: String
        public var platform: PushDevice.Platform
        public var token: String
        public var appID: String
        public var badge: Int64
        public var version: Int64
        /// This try's number since the last success (1 for the first).
        public var attempt: Int
        /// When the change that made the number happened, if known.
        public var wantedAt: Date?
        /// The device's quiet hours, if any.
        public var quietHours: PushDevice.QuietHours?
    }

    /// Registers `device` for `user` (replacing one with its id, which is sent its number
    /// again): due at once with the user's visible root total now (own badges and the
    /// broadcasts not dismissed, as the change log counts them), at the user's visible version.
    /// Returns true when it is new.
    @discardableResult
    public static func register(_ device: PushDevice, for user: UserID, on connection: PGConnection) throws(PGError) -> Bool {
        var arguments: [any PGBindable] = [
            user.rawValue, device.id, device.platform.rawValue, device.token, device.appID, device.quietHours?.start, device.quietHours?.end,
            device.quietHours?.timeZone,
        ]
        guard try BadgeStore.citusInstalled(on: connection) else {
            return try connection.query(PushSQL.register, arguments).singleRow().decode(0, as: Bool.self)
        }
        let root = try citusVisibleRoots(of: [user.rawValue], on: connection).first?.1
        arguments += [root?.visibleVersion ?? 0, max(root?.count ?? 0, 0)]
        return try connection.query(PushSQL.registerWithRoot, arguments).singleRow().decode(0, as: Bool.self)
    }

    /// On Citus, the visible roots now of `users` (`BadgeStore.visibleRoots`), a shard of them
    /// at a time.
    private static func citusVisibleRoots(of users: [String], on connection: PGConnection) throws(PGError) -> [(String, BadgeStore.VisibleRoot)] {
        let broadcasts = try BadgeStore.readBroadcastSet(on: connection)
        let modes = try BadgeStore.aggregationModes(on: connection)
        var roots: [(String, BadgeStore.VisibleRoot)] = []
        for group in try BadgeStore.usersByShard(users, on: connection) {
            roots += try BadgeStore.visibleRoots(ofShard: group, broadcasts: broadcasts, modes: modes, on: connection)
        }
        return roots
    }

    /// Removes a device; false when there was none.
    public static func remove(device: String, of user: UserID, on connection: PGConnection) throws(PGError) -> Bool {
        try connection.query(PushSQL.remove, [user.rawValue, device]).affectedRows > 0
    }

    /// Takes the latest root total of each user in `latest` (visible version → count: a change
    /// record's `version`, own plus broadcast, which only grows; `at`: the change's time, now
    /// when unknown) whose version is above the stored one: stored, and their devices made due.
    /// One statement. Returns how many devices were given a new number, and how many of those
    /// still had an unsent one, which the new one replaces (coalesced).
    public static func follow(
        _ latest: [String: (version: Int64, count: Int64, at: Date?)], on connection: PGConnection
    ) throws(PGError) -> (due: Int, coalesced: Int) {
        guard !latest.isEmpty else { return (0, 0) }
        // On Citus, a shard's users a statement (docs/SHARDING.md, rule 10).
        let citus = try BadgeStore.citusInstalled(on: connection)
        var due = 0, coalesced = 0
        for users in citus ? try BadgeStore.usersByShard(latest.keys.sorted(), on: connection) : [latest.keys.sorted()] {
            let times = users.map { user -> Double? in latest[user]?.at.map(\.timeIntervalSince1970).flatMap { $0.isFinite ? $0 : nil } }
            var arguments: [any PGBindable] = [
                users, users.map { latest[$0]?.version ?? 0 }, users.map { latest[$0]?.count ?? 0 }, times,
            ]
            if citus { arguments.append(users) }
            let row = try connection.query(PushSQL.follow.form(citus), arguments).singleRow()
            due += try row.decode(0, as: Int.self)
            coalesced += try row.decode(1, as: Int.self)
        }
        return (due, coalesced)
    }

    /// After a broadcast change: the visible root total now of up to `limit` users with devices
    /// after `cursor` (in user order), stored at their visible version now (own version plus the
    /// broadcast version, read in the same snapshot), their devices made due where it is newer.
    /// One statement per page: users without devices cost nothing. Returns the last user of the
    /// page (nil when there was none), how many devices were given a new number and how many of
    /// those replaced an unsent one.
    public static func followBroadcasts(
        after cursor: String, limit: Int, on connection: PGConnection
    ) throws(PGError) -> (last: String?, due: Int, coalesced: Int) {
        guard try BadgeStore.citusInstalled(on: connection) else {
            let row = try connection.query(PushSQL.followBroadcasts, [cursor, limit]).singleRow()
            return (try row.decode(0, as: String?.self), try row.decode(1, as: Int.self), try row.decode(2, as: Int.self))
        }
        // On Citus: the page, its users' visible roots merged here, then stored as `follow` does.
        let page = try connection.query(PushSQL.devicePage, [cursor, limit]).rows.map { row throws(PGError) in try row.decode(0, as: String.self) }
        var latest: [String: (version: Int64, count: Int64, at: Date?)] = [:]
        for (user, root) in try citusVisibleRoots(of: page, on: connection) {
            latest[user] = (root.visibleVersion, max(root.count, 0), nil)
        }
        let (due, coalesced) = try follow(latest, on: connection)
        return (page.max(), due, coalesced)
    }

    /// Claims up to `limit` due devices for a try, each held for `lease`, from one part of
    /// `push_device` (`TableParts`: the first in turn from `parts.next` with any due; on the
    /// shipped schema the table). Returns them and `parts` as read (merge it into the owner's;
    /// the owner moves `next`).
    public static func claim(
        limit: Int, lease: Duration, parts: TableParts = TableParts(of: "push_device"), on connection: PGConnection
    ) throws(PGError) -> (claimed: [Claimed], parts: TableParts) {
        var parts = parts
        let claimed = try parts.claimInTurn(
            PushSQL.claim, make: { PushSQL.claim(from: $0) }, citus: PushSQL.citusClaim, [limit, WebhookStore.seconds(lease)], on: connection
        ) {
            row throws(PGError) in
            Claimed(
                user: try row.decode(0), device: try row.decode(1), platform: PushDevice.Platform(rawValue: try row.decode(2)) ?? .apns,
                token: try row.decode(3), appID: try row.decode(4), badge: try row.decode(5), version: try row.decode(6),
                attempt: try row.decode(7), wantedAt: try row.decode(8, as: Double?.self).map { Date(timeIntervalSince1970: $0) },
                quietHours: Self.quietHours(try row.decode(9, as: Int?.self), try row.decode(10, as: Int?.self), try row.decode(11, as: String?.self)))
        }
        return (claimed, parts)
    }

    static func quietHours(_ start: Int?, _ end: Int?, _ zone: String?) -> PushDevice.QuietHours? {
        guard let start, let end, let zone else { return nil }
        return PushDevice.QuietHours(storedStart: start, end: end, timeZone: zone)
    }

    /// `claimed` is in its quiet hours: due again at `until`, the try not counted.
    public static func quiet(_ claimed: Claimed, until: Date, on connection: PGConnection) throws(PGError) {
        _ = try connection.query(PushSQL.quiet, [claimed.user, claimed.device, until.timeIntervalSince1970])
    }

    /// The provider accepted `claimed`'s number.
    public static func sent(_ claimed: Claimed, on connection: PGConnection) throws(PGError) {
        _ = try connection.query(PushSQL.sent, [claimed.user, claimed.device, claimed.badge, claimed.version, claimed.token])
    }

    /// The try failed; the device is due again after `retryAfter`.
    public static func failed(_ claimed: Claimed, error: String, retryAfter: Duration, on connection: PGConnection) throws(PGError) {
        _ = try connection.query(PushSQL.failed, [claimed.user, claimed.device, WebhookStore.seconds(retryAfter), String(error.prefix(1000))])
    }

    /// The provider says the device is gone: removed, unless it registered a new token meanwhile.
    public static func gone(_ claimed: Claimed, on connection: PGConnection) throws(PGError) -> Bool {
        try connection.query(PushSQL.gone, [claimed.user, claimed.device, claimed.token]).affectedRows > 0
    }

    /// A user's devices (for tests and `reddot push devices`).
    public static func devices(of user: UserID, on connection: PGConnection) throws(PGError) -> [(device: String, wanted: Int64, sent: Int64?)] {
        try connection.query(PushSQL.devices, [user.rawValue]).rows.map { row throws(PGError) in
            (try row.decode(0, as: String.self), try row.decode(1, as: Int64.self), try row.decode(2, as: Int64?.self))
        }
    }
}

enum PushSQL {
    static let register = PGStatement("push.register", register(nowState: visibleRoot(users: "SELECT $1::text AS user_id")))

    /// `register` where Citus is installed: the user's visible version and root count come as
    /// `$9` and `$10` (`BadgeStore.visibleRoots`: Citus runs `badge_visible_root` only on the
    /// coordinator).
    static let registerWithRoot = PGStatement(
        "push.register_with_root",
        register(nowState: "SELECT $1::text AS user_id, $9::bigint AS visible_version, $10::bigint AS root_count"))

    /// The SQL of `register` with `nowState` (the user's row: `user_id`, `visible_version`,
    /// `root_count`).
    private static func register(nowState: String) -> String {
        """
        WITH now_state AS (\(nowState)),
        best AS (
            -- The feed's last total when it is newer than this snapshot (it cannot be, but a
            -- stored version never goes back).
            SELECT CASE WHEN u.own_version > s.visible_version THEN u.root_count ELSE s.root_count END AS root_count,
                   greatest(u.own_version, s.visible_version) AS visible_version
            FROM now_state s LEFT JOIN push_user u ON u.user_id = s.user_id AND u.user_id = $1
        )
        INSERT INTO push_device AS d
            (user_id, device_id, platform, token, app_id, wanted_badge, wanted_version, wanted_at, quiet_start, quiet_end, quiet_time_zone,
             next_attempt_at, updated_at)
        SELECT $1, $2, $3, $4, $5, b.root_count, b.visible_version, now(), $6, $7, $8, now(), now() FROM best b
        ON CONFLICT (user_id, device_id) DO UPDATE SET platform = EXCLUDED.platform, token = EXCLUDED.token, app_id = EXCLUDED.app_id,
            quiet_start = EXCLUDED.quiet_start, quiet_end = EXCLUDED.quiet_end, quiet_time_zone = EXCLUDED.quiet_time_zone,
            wanted_badge = CASE WHEN EXCLUDED.wanted_version > d.wanted_version THEN EXCLUDED.wanted_badge ELSE d.wanted_badge END,
            wanted_version = greatest(d.wanted_version, EXCLUDED.wanted_version), wanted_at = EXCLUDED.wanted_at,
            sent_version = 0, sent_badge = NULL, attempts = 0,
            next_attempt_at = EXCLUDED.next_attempt_at, last_error = NULL, updated_at = EXCLUDED.updated_at
        -- New when this transaction made the row (its creation time is this transaction's
        -- start). Not `xmax = 0`: PostgreSQL refuses system columns in the RETURNING of an
        -- insert into a partitioned table (SQLSTATE 0A000), and push_device is per user.
        RETURNING (d.created_at = now())
        """
    }

    static let remove = PGStatement("push.remove", "DELETE FROM push_device WHERE user_id = $1 AND device_id = $2")

    /// Each user of `users` (a query with a `user_id` column) with their visible version now
    /// (own version plus the broadcast version) and visible root count now: the own root with
    /// the broadcasts they have not dismissed merged in under the modes and the version's mutes
    /// (`badge_visible_root`, migration 0014, as the change log counts it). One snapshot reads
    /// the version, the aggregates and the broadcasts, which change together.
    static func visibleRoot(users: String) -> String {
        """
        SELECT u.user_id, coalesce(v.version, 0) + (SELECT version FROM broadcast_version) AS visible_version,
               greatest(coalesce((badge_visible_root(u.user_id, a.count, a.unseen, v.writes_through, NULL, v.mutes))[1], 0), 0) AS root_count
        FROM (\(users)) u
        LEFT JOIN user_version v ON v.user_id = u.user_id
        LEFT JOIN badge_aggregate a ON a.user_id = u.user_id AND a.path = 'root'
        """
    }

    /// Stores `input`'s rows (user_id, own_version: the visible version, root_count, at: the
    /// change's time or NULL) in `push_user` where newer, and makes the users' devices due.
    static func store(_ input: String, pin: BadgeSQL.Pin = .none) -> String {
        """
        moved AS (
            INSERT INTO push_user AS u (user_id, own_version, root_count)
            SELECT user_id, own_version, root_count FROM \(input) ORDER BY 1
            ON CONFLICT (user_id) DO UPDATE SET own_version = EXCLUDED.own_version, root_count = EXCLUDED.root_count
            WHERE u.own_version < EXCLUDED.own_version
            RETURNING u.user_id, u.own_version, u.root_count
        ), due AS (\(pin.isNone ? """

            UPDATE push_device d
            SET wanted_badge = m.root_count, wanted_version = m.own_version,
                wanted_at = coalesce((SELECT i.at FROM \(input) i WHERE i.user_id = m.user_id), now()),
                next_attempt_at = CASE WHEN d.wanted_version > d.sent_version THEN d.next_attempt_at ELSE now() END
            FROM moved m, push_device o
            WHERE d.user_id = m.user_id AND d.wanted_version < m.own_version AND o.user_id = d.user_id AND o.device_id = d.device_id
            """ : """

            -- Citus takes no function but an immutable one in a CASE or coalesce of a write:
            -- the time comes from the input's row (its `stamp`, the statement's now()).
            UPDATE push_device d
            SET wanted_badge = m.root_count, wanted_version = m.own_version,
                wanted_at = coalesce(i.at, i.stamp),
                next_attempt_at = CASE WHEN d.wanted_version > d.sent_version THEN d.next_attempt_at ELSE i.stamp END
            FROM moved m, \(input) i, push_device o
            WHERE d.user_id = m.user_id AND i.user_id = m.user_id AND d.wanted_version < m.own_version
              AND o.user_id = d.user_id AND o.device_id = d.device_id\(pin.on("d"))\(pin.on("o"))
            """)
            -- `o` is the row before: a number still unsent that this one replaces is coalesced.
            RETURNING o.wanted_version > o.sent_version AS replaced
        )
        """
    }

    static let followBroadcasts = PGStatement(
        "push.follow_broadcasts",
        """
        WITH page AS (
            SELECT DISTINCT user_id FROM push_device WHERE user_id > $1 ORDER BY user_id LIMIT $2
        ), now_state AS (
            SELECT user_id, visible_version AS own_version, root_count, now() AS at FROM (\(visibleRoot(users: "SELECT user_id FROM page"))) s
        ), \(store("now_state"))
        SELECT (SELECT max(user_id) FROM page), (SELECT count(*)::int FROM due), (SELECT count(*)::int FROM due WHERE replaced)
        """)

    /// In its form for one Citus shard, `$5` are the shard's users (those of `$1`).
    static let follow = BadgeSQL.ShardForms("push.follow", users: "$5::text[]") { pin in
        """
        WITH input AS (
            SELECT i.user_id, i.own_version, i.root_count, to_timestamp(i.at) AS at\(pin.isNone ? "" : ", now() AS stamp")
            FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::float8[]) AS i(user_id, own_version, root_count, at)
        ),
        \(store("input", pin: pin))
        SELECT count(*)::int, (count(*) FILTER (WHERE replaced))::int FROM due
        """
    }

    /// `followBroadcasts`' page where Citus is installed: the next `$2` users with devices after
    /// `$1`, in user order (their visible roots are merged on the coordinator).
    static let devicePage = PGStatement(
        "push.device_page", "SELECT DISTINCT user_id FROM push_device WHERE user_id > $1 ORDER BY user_id LIMIT $2")

    static let claim = PGStatement("push.claim", claim(from: "push_device"))

    /// Where Citus is installed (`TableParts.claimInTurn`): the users of the first `$1` due
    /// devices, read without locks, then `claim` over one shard's users (`$3`).
    static let citusClaim = TableParts.citusClaim(
        "push", table: "push_device", due: "wanted_version > sent_version AND next_attempt_at <= now()", claim: claim(from:pin:))

    /// The SQL of `claim` over one part of `push_device` (`TableParts`): the table, or one of
    /// its partitions (catalog text, never input); `pin` on each of its reads.
    static func claim(from part: String, pin: BadgeSQL.Pin = .none) -> String {
        """
        WITH due AS (
            SELECT user_id, device_id FROM \(part) x
            WHERE wanted_version > sent_version AND next_attempt_at <= now()\(pin.on("x"))
            ORDER BY next_attempt_at
            LIMIT $1
            FOR UPDATE SKIP LOCKED
        )
        UPDATE \(part) d SET attempts = d.attempts + 1, next_attempt_at = now() + make_interval(secs => $2::float8)
        FROM due WHERE d.user_id = due.user_id AND d.device_id = due.device_id\(pin.on("d"))
        RETURNING d.user_id, d.device_id, d.platform, d.token, d.app_id, d.wanted_badge, d.wanted_version, d.attempts,
                  extract(epoch FROM d.wanted_at - 'epoch'::timestamptz)::float8, d.quiet_start::int, d.quiet_end::int, d.quiet_time_zone
        """
    }

    /// A newer number that arrived during the try stays due (its version is above the one sent).
    static let sent = PGStatement(
        "push.sent",
        """
        UPDATE push_device SET sent_badge = $3, sent_version = greatest(sent_version, $4), attempts = 0, last_error = NULL,
            next_attempt_at = now()
        WHERE user_id = $1 AND device_id = $2 AND token = $5
        """)

    static let failed = PGStatement(
        "push.failed",
        """
        UPDATE push_device SET next_attempt_at = now() + make_interval(secs => $3::float8), last_error = $4
        WHERE user_id = $1 AND device_id = $2
        """)

    static let quiet = PGStatement(
        "push.quiet",
        """
        UPDATE push_device SET next_attempt_at = to_timestamp($3::float8), attempts = greatest(attempts - 1, 0)
        WHERE user_id = $1 AND device_id = $2
        """)

    static let gone = PGStatement("push.gone", "DELETE FROM push_device WHERE user_id = $1 AND device_id = $2 AND token = $3")

    static let devices = PGStatement(
        "push.devices", "SELECT device_id, wanted_badge, sent_badge FROM push_device WHERE user_id = $1 ORDER BY device_id")
}
