public import BadgeCore
import Foundation
public import LibPQ

/// Everything RedDot holds on one user, on request (issue 28): an export as JSON, and an
/// erasure that removes every row of the user and keeps later events for them out for the
/// dedupe retention.
public enum UserData {
    /// Every table that holds rows per user (each has `user_id`, first in its key). A test keeps
    /// this list equal to the schema's tables with a `user_id` column, so that a new per-user
    /// table is exported and erased too.
    public static let tables = [
        "applied_action", "applied_action_generation", "applied_user_event", "applied_user_event_generation", "badge_aggregate", "badge_change", "badge_clear_mark", "badge_delta",
        "badge_increment", "badge_item", "badge_mute", "badge_seen_mark", "badge_state", "broadcast_clear", "broadcast_seen",
        "dirty_mark", "erased_user", "push_device", "push_user", "user_version", "user_write", "webhook_delivery", "webhook_user",
    ]

    /// The per-user tables an erasure empties of the user (all but the marker itself).
    static let erasedTables = tables.filter { $0 != "erased_user" }

    /// What an erasure removed.
    public struct Erasure: Sendable, Hashable, Codable {
        /// The user.
        public var user: String
        /// Rows removed, by table (tables with none are left out).
        public var rows: [String: Int]
        /// Dead letters (rejected records) that named the user, removed.
        public var deadLetters: Int
        /// Whether every transaction that was open when the user was marked had ended before
        /// the second pass (false: one outlasted the wait; run the erasure again to be sure
        /// that nothing it wrote is left).
        public var settled: Bool

        /// Every row removed.
        public var total: Int { rows.values.reduce(0, +) + deadLetters }

        /// An erasure's account.
        public init(user: String, rows: [String: Int], deadLetters: Int, settled: Bool) {
            (self.user, self.rows, self.deadLetters, self.settled) = (user, rows, deadLetters, settled)
        }

        enum CodingKeys: String, CodingKey {
            case user, rows, deadLetters = "dead_letters", settled
        }
    }

    /// Everything stored on `user` as one JSON object: `user`, `exported_at`, `tables` (each
    /// per-user table's rows of the user, as JSON objects of their columns) and `dead_letters`
    /// (the rejected records that name the user: key and payload as text, non-printable bytes
    /// escaped). Read in one statement, so from one snapshot.
    public static func export(_ user: UserID, on connection: PGConnection) throws(PGError) -> String {
        try connection.query(UserDataSQL.export, [user.rawValue]).singleRow().decode(0, as: String.self)
    }

    /// Removes every row of `user` from every per-user table and every dead letter that names
    /// them, and marks them erased (`erased_user`): ingest drops their events until the mark is
    /// as old as the dedupe retention, so an event already in Kafka does not bring the tree back.
    ///
    /// Two passes. The first, in one transaction under the user's rollup lock, deletes and marks.
    /// Then it waits (up to `settle`) for every writing transaction of this database that was
    /// open at that commit to end: an ingest batch that looked for the mark before it was there
    /// (its look gives it a transaction id) may still write the user's rows. The second pass
    /// deletes what such a batch wrote.
    public static func erase(_ user: UserID, settle: Duration = .seconds(30), on connection: PGConnection) throws -> Erasure {
        var erasure = Erasure(user: user.rawValue, rows: [:], deadLetters: 0, settled: false)
        func pass(mark: Bool) throws {
            try connection.withTransaction { connection throws in
                try connection.query(BadgeSQL.lockUsers, [[user.rawValue]])
                if mark { try connection.query(UserDataSQL.mark, [user.rawValue]) }
                let row = try connection.query(UserDataSQL.erase, [user.rawValue]).singleRow()
                for (index, table) in erasedTables.enumerated() {
                    let count = try row.decode(index, as: Int.self)
                    if count > 0 { erasure.rows[table, default: 0] += count }
                }
                erasure.deadLetters += try row.decode(erasedTables.count, as: Int.self)
                // On Citus, the feed's outbox entries of the records just deleted.
                if try BadgeStore.citusInstalled(on: connection) { try connection.query(UserDataSQL.eraseFromFeedOutbox, [user.rawValue]) }
            }
        }
        try pass(mark: true)
        let open = try connection.query(UserDataSQL.openTransactions).singleRow().decode(0, as: String.self)
        let deadline = ContinuousClock.now + settle
        while true {
            if try connection.query(UserDataSQL.anyStillOpen, [open]).singleRow().decode(0, as: Bool.self) == false {
                erasure.settled = true
                break
            }
            guard ContinuousClock.now < deadline else { break }
            Thread.sleep(forTimeInterval: 0.05)
        }
        try pass(mark: false)
        return erasure
    }

    /// The users among `users` marked erased. Call it inside the transaction that writes their
    /// rows.
    public static func erased(among users: [String], on connection: PGConnection) throws(PGError) -> Set<String> {
        guard !users.isEmpty else { return [] }
        // Citus sends a statement that reads one shard whole to its worker, where the
        // transaction id it takes is the worker's: the erasure waits for the coordinator's.
        if try BadgeStore.citusInstalled(on: connection) { try connection.query(UserDataSQL.takeTransactionID) }
        let listed = try connection.query(UserDataSQL.erasedAmong, [users]).singleRow().decode(1, as: String.self)
        // One id a line: an id is visible ASCII, never a line break.
        return listed.isEmpty ? [] : Set(listed.split(separator: "\n").map(String.init))
    }
}

enum UserDataSQL {
    /// Whether a rejected record (`r`) names the user `$1`: as its key, or as a JSON string in
    /// its payload as written (an id written with escapes is not found).
    static let namesUser = "(r.record_key = convert_to($1, 'UTF8') OR position(convert_to('\"' || $1 || '\"', 'UTF8') IN r.payload) > 0)"

    static let export = PGStatement(
        "users.export",
        """
        SELECT jsonb_build_object(
            'user', $1::text,
            'exported_at', now(),
            'tables', jsonb_build_object(\(UserData.tables.map { "'\($0)', (SELECT coalesce(jsonb_agg(to_jsonb(t)), '[]'::jsonb) FROM \($0) t WHERE t.user_id = $1)" }.joined(separator: ", "))),
            'dead_letters', (
                SELECT coalesce(jsonb_agg(jsonb_build_object(
                    'id', r.id, 'topic', r.topic, 'partition', r.partition, 'offset', r.record_offset,
                    'key', encode(r.record_key, 'escape'), 'payload', encode(r.payload, 'escape'),
                    'reason', r.reason, 'message', r.message, 'event_id', r.event_id, 'rejected_at', r.rejected_at,
                    'published_at', r.published_at, 'replayed_at', r.replayed_at) ORDER BY r.id), '[]'::jsonb)
                FROM rejected_record r WHERE \(namesUser))
        )::text
        """, prepared: false)

    /// Deletes the user's rows from every per-user table but the marker, and the dead letters
    /// that name them; one row of counts, in `UserData.erasedTables` order, then the dead letters'.
    static let erase = PGStatement(
        "users.erase",
        """
        WITH \(UserData.erasedTables.enumerated().map { "d\($0.offset) AS (DELETE FROM \($0.element) WHERE user_id = $1 RETURNING 1)" }.joined(separator: ", ")),
        dl AS (DELETE FROM rejected_record r WHERE \(namesUser) RETURNING 1)
        SELECT \(UserData.erasedTables.indices.map { "(SELECT count(*) FROM d\($0))" }.joined(separator: ", ")), (SELECT count(*) FROM dl)
        """, prepared: false)

    /// Deletes the user `$1`'s entries of the change feed's outbox (Citus only:
    /// deploy/citus/layout.sql), whose records `erase` deleted.
    static let eraseFromFeedOutbox = PGStatement("users.erase_from_feed_outbox", "DELETE FROM change_feed_outbox WHERE user_id = $1")

    static let mark = PGStatement(
        "users.mark_erased",
        "INSERT INTO erased_user (user_id, erased_at) VALUES ($1, now()) ON CONFLICT (user_id) DO UPDATE SET erased_at = excluded.erased_at, changes_tombstone_at = NULL, dlq_tombstone_at = NULL",
        prepared: false)

    /// The writing transactions open now in this database (other sessions' `pid:xid`, comma
    /// separated; the server's other databases are none of RedDot's business). Sessions of
    /// another role show their transaction only to a member of `pg_read_all_stats`.
    static let openTransactions = PGStatement(
        "users.open_transactions",
        """
        SELECT coalesce(string_agg(pid || ':' || backend_xid, ','), '') FROM pg_stat_activity
        WHERE datname = current_database() AND backend_xid IS NOT NULL AND pid <> pg_backend_pid()
        """, prepared: false)

    /// Whether any of the transactions `$1` (``openTransactions``) is still open.
    static let anyStillOpen = PGStatement(
        "users.still_open",
        """
        SELECT EXISTS (
            SELECT 1 FROM pg_stat_activity a
            JOIN (SELECT split_part(w, ':', 1)::int AS pid, split_part(w, ':', 2) AS xid FROM unnest(string_to_array($1, ',')) AS w) AS o
                ON a.pid = o.pid AND a.backend_xid::text = o.xid)
        """, prepared: false)

    /// The users of `$1` marked erased: one probe per user, of an index that is empty while
    /// nobody is (a gate such as `EXISTS (SELECT 1 FROM erased_user)` would read every shard).
    /// It also gives the transaction its id (`pg_current_xact_id()`), so that an erasure
    /// committing after this look waits for the transaction (``UserData/erase``).
    static let erasedAmong = PGStatement(
        "users.erased_among",
        "SELECT pg_current_xact_id()::text, array_to_string(ARRAY(SELECT user_id FROM erased_user WHERE user_id = ANY($1::text[])), E'\\n')")

    /// Gives the transaction its id on this server (the coordinator, under Citus).
    static let takeTransactionID = PGStatement("users.take_transaction_id", "SELECT pg_current_xact_id()")

    /// One chunk of marks older than the dedupe retention.
    static let pruneMarks = PerUserPrune("users.prune_erased", table: "erased_user", key: "user_id", before: "erased_at")
}

extension BadgeStore {
    /// `UserData.export` on a connection of the pool.
    public func exportUser(_ user: UserID) async throws -> String {
        try await pool.withConnection { connection in try UserData.export(user, on: connection) }
    }

    /// `UserData.erase` on a connection of the pool.
    public func eraseUser(_ user: UserID, settle: Duration = .seconds(30)) async throws -> UserData.Erasure {
        try await pool.withConnection { connection in try UserData.erase(user, settle: settle, on: connection) }
    }
}
