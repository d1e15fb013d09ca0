import ArgumentParser
import BadgeCore
import BadgeStore
import Foundation
import LibPQ
import RedDotCommandLine

/// `reddot badges`: inspect and fix one user's badges (an ops tool).
struct BadgesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "badges",
        abstract: "Inspect and fix one user's badges.",
        discussion: """
            Both subcommands print {"user", "version", "tree"}, where tree is a node \
            {"path", "shown", "count", "text", "icon", "children"}: text is the count as displayed \
            ("7", "99+") or null for a dot; nodes with nothing shown are left out; tree is null for \
            a subtree with nothing shown (root is always present).

            Exit codes: 0 done; 64 bad arguments or an invalid path, user or icon (nothing changed); \
            69 the database cannot be reached; 1 another database error.
            """,
        subcommands: [Apply.self, Show.self]
    )

    struct Common: ParsableArguments {
        @OptionGroup var database: DatabaseOptions
        @Option(help: "The user id (1–128 visible ASCII characters).")
        var user: String
        @Option(help: "Counts above this show as N+ in 'text' (≥ 1, as for serve).")
        var countCap: Int64 = 99

        func validate() throws {
            guard countCap >= 1 else { throw ValidationError("--count-cap takes a number ≥ 1") }
        }

        func validatedUser() throws -> UserID {
            do { return try UserID(validating: user) } catch { throw fail("\(error)", code: ExitCodes.usage) }
        }

        func store() throws -> BadgeStore {
            let logger = try database.logger(label: "reddot.badges")
            let pool = PGPool(configuration: database.configuration(statementTimeoutMilliseconds: 30_000), maximumConnections: 1, logger: logger)
            return BadgeStore(pool: pool, display: BadgeDisplay(countCap: countCap))
        }
    }

    struct Apply: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Apply one operation to a user's node, recompute the user's aggregates, and print the tree.",
            discussion: """
                set: shown with --count N (default 0, a dot) and optional --icon; incr, decr: count +/-= \
                --by K (default 1; decr removes the number at 0); clear: the node's own state and items \
                (--force: and its whole subtree); add, remove: an --item of the node; seen: the node \
                and its subtree stop counting as unseen; mute: the node gives its ancestors nothing \
                (--until: a snooze's end); unmute: ends that. Goes through the same store functions as ingest.
                """)
        @OptionGroup var common: Common
        @Option(help: "set, incr, decr, clear, add, remove, seen, mute or unmute.")
        var op: String
        @Option(help: "The node, e.g. root.chat.c7.")
        var path: String
        @Option(help: "set: the absolute count (0…1000000000).")
        var count: Int64?
        @Option(help: "incr, decr: how much to add or take (1…1000000000).")
        var by: Int64?
        @Option(help: "set: a short label shown instead of a plain dot (1–32 of a-z, 0-9, _ and -).")
        var icon: String?
        @Flag(help: "clear: also clear the node's whole subtree.")
        var force = false
        @Option(help: "add, remove: the item's id (1–128 visible ASCII).")
        var item: String?
        @Option(help: "mute: when the snooze ends (RFC 3339, e.g. 2026-12-01T08:00:00Z).")
        var until: String?

        var operation: BadgeOperation {
            get throws(OperationFieldsError) {
                try .named(op, OperationFields(count: count, by: by, icon: icon, force: force, item: item, until: until))
            }
        }

        func validate() throws {
            do { _ = try operation } catch { throw ValidationError(error.description) }
        }

        func run() async throws {
            let user = try common.validatedUser()
            let badgePath: BadgePath
            do { badgePath = try BadgePath(validating: path) } catch { throw fail("\(error)", code: ExitCodes.usage) }
            let operation = try operation
            if let problem = operation.pathProblem(badgePath) { throw fail(problem, code: ExitCodes.usage) }
            let store = try common.store()
            defer { store.pool.close() }
            do {
                try await store.apply([BadgeMutation(user: user, path: badgePath, operation: operation)], recomputeNow: true)
                try printJSON(try await store.tree(for: user))
            } catch let error as PGError {
                throw fail(error.debugDescription, code: error.exitCode)
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print a user's badge tree, or the subtree at --path.")
        @OptionGroup var common: Common
        @Option(help: "The subtree's root (default root).")
        var path: String = "root"
        @Option(help: "Levels below --path to include (default: all).")
        var depth: Int?

        func run() async throws {
            let user = try common.validatedUser()
            let badgePath: BadgePath
            do { badgePath = try BadgePath(validating: path) } catch { throw fail("\(error)", code: ExitCodes.usage) }
            if let depth, depth < 0 { throw fail("--depth takes a number ≥ 0", code: ExitCodes.usage) }
            let store = try common.store()
            defer { store.pool.close() }
            do {
                try printJSON(try await store.tree(for: user, at: badgePath, depth: depth))
            } catch let error as PGError {
                throw fail(error.debugDescription, code: error.exitCode)
            }
        }
    }
}
