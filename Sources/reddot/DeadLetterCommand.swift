import ArgumentParser
import BadgeCore
import BadgeIngest
import BadgeStore
import Foundation
import LibPQ
import Logging
import RedDotCommandLine

/// `reddot dlq`: inspect and replay rejected records.
struct DeadLetterCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dlq",
        abstract: "List and replay the records ingest rejected (the dead letters).",
        discussion: """
            Every rejected record is kept in the rejected_record table (and sent to the dead-letter \
            topic) with its reason, its origin (topic, partition, offset) and its exact bytes. Once \
            the cause is fixed (a rule added with --rules, for example), replay applies it exactly \
            once and marks it replayed; it stays in the table.
            """,
        subcommands: [List.self, Replay.self])

    struct Selection: ParsableArguments {
        @Option(name: .customLong("id"), help: ArgumentHelp("A rejected record's id (repeatable).", valueName: "id"))
        var ids: [Int64] = []

        @Option(help: ArgumentHelp("Only records rejected for this reason (unknown_type, invalid_path, …).", valueName: "reason"))
        var reason: String?

        func validate() throws {
            if let reason, RejectionReason(rawValue: reason) == nil {
                throw ValidationError(
                    "unknown reason '\(reason)'; one of \(RejectionReason.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            if ids.contains(where: { $0 < 1 }) { throw ValidationError("--id takes a record id ≥ 1") }
        }
    }

    /// `reddot dlq list`.
    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List rejected records, oldest first.",
            discussion: """
                One line per record: id, when, reason, origin topic/partition@offset, event id, \
                whether it was published to the dead-letter topic and replayed, and the message. \
                Exit codes: 0 listed (even none); 64 bad arguments; 69 the database cannot be \
                reached; 1 another database error.
                """)

        @OptionGroup var database: DatabaseOptions
        @OptionGroup var selection: Selection

        @Flag(help: "Include records replayed already.")
        var all = false

        @Option(help: "At most this many records.")
        var limit = 100

        @Option(name: .customLong("after"), help: "Only records with an id above this one (paging).")
        var afterID: Int64 = 0

        @Flag(help: "JSON lines, one record each, with the payload as text.")
        var json = false

        func validate() throws {
            guard (1...100_000).contains(limit) else { throw ValidationError("--limit takes 1…100000") }
        }

        func run() async throws {
            let logger = try database.logger(label: "reddot.dlq")
            let filter = DeadLetterFilter(
                ids: selection.ids, reason: selection.reason, includeReplayed: all, afterID: afterID, limit: limit)
            let records = try await withDatabase(database, logger: logger) { connection in
                try DeadLetterStore.list(filter, on: connection)
            }
            for record in records {
                print(json ? record.jsonLine : record.textLine)
            }
            if records.isEmpty, !json {
                FileHandle.standardError.write(Data("reddot: no rejected records match\n".utf8))
            }
        }
    }

    /// `reddot dlq replay`.
    struct Replay: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Apply rejected records again, now that their cause is fixed.",
            discussion: """
                Decodes and maps each selected record (not replayed yet) as ingest would now, with \
                --rules (or REDDOT_RULES_FILE). One that passes is applied exactly once (an event id \
                applied in the meantime counts as done), its users are marked dirty for the rollup, \
                and it is marked replayed; it stays in the table. One that still fails is left as \
                it was and listed with today's reason. Select with --id, --reason, or --all.

                Exit codes: 0 every selected record was replayed (or none matched); 2 some still \
                fail; 64 bad arguments; 65 an invalid rules file; 69 the database cannot be \
                reached; 1 another database error.
                """)

        @OptionGroup var database: DatabaseOptions
        @OptionGroup var selection: Selection

        @Flag(help: "Replay every record not replayed yet (needed when neither --id nor --reason is given).")
        var all = false

        @Option(help: ArgumentHelp("The rules file (YAML). Default: REDDOT_RULES_FILE.", valueName: "file"))
        var rules: String?

        func validate() throws {
            guard all || !selection.ids.isEmpty || selection.reason != nil else {
                throw ValidationError("choose what to replay: --id N, --reason R, or --all")
            }
        }

        func run() async throws {
            let logger = try database.logger(label: "reddot.dlq")
            let ruleSet = try loadRules(rules)
            var total = ReplayOutcome()
            var afterID: Int64 = 0
            while true {
                let filter = DeadLetterFilter(ids: selection.ids, reason: selection.reason, afterID: afterID, limit: 500)
                let outcome = try await withDatabase(database, logger: logger, transaction: true) { connection in
                    try DeadLetterReplay.replay(filter, rules: ruleSet, on: connection)
                }
                let seen = outcome.replayed + outcome.alreadyApplied + outcome.stillRejected.map(\.id)
                guard let last = seen.max() else { break }
                afterID = last
                total.replayed += outcome.replayed
                total.alreadyApplied += outcome.alreadyApplied
                total.stillRejected += outcome.stillRejected
            }
            for id in total.replayed.sorted() { print("#\(id) replayed") }
            for id in total.alreadyApplied.sorted() { print("#\(id) already applied (its event id was applied since); marked replayed") }
            for (id, rejection) in total.stillRejected.sorted(by: { $0.id < $1.id }) {
                print("#\(id) still rejected: \(rejection.reason.rawValue): \(rejection.message)")
            }
            FileHandle.standardError.write(
                Data(
                    "reddot: replayed \(total.replayed.count), already applied \(total.alreadyApplied.count), still rejected \(total.stillRejected.count)\n"
                        .utf8))
            if !total.stillRejected.isEmpty { throw ExitCode(2) }
        }
    }
}
