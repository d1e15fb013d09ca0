import ArgumentParser
import BadgeStore
import Foundation
import LibPQ
import RedDotCommandLine

/// `reddot verify`: recount every aggregate and compare.
struct VerifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Recount every aggregate from the badge state and report (or --repair) each mismatch.",
        discussion: """
            Reads every user's own badge state, recounts each node's aggregate (its own count plus \
            everything below it, under the aggregation modes ingest stored from the rules file), \
            and compares with the stored aggregates the API answers from. \
            Users with a pending rollup are skipped. Prints one line per mismatch (or JSON with \
            --json) and a summary on stderr. With --repair, each user with a mismatch is \
            recomputed by the rollup's own step: run it after the rules file's modes changed.

            Exit codes: 0 no mismatch; 2 mismatches found (repaired with --repair); 1 a database \
            error; 69 the database cannot be reached.
            """)

    @OptionGroup var database: DatabaseOptions

    @Flag(help: "Recompute every user with a mismatch.")
    var repair = false
    @Flag(help: "Print {\"users_checked\", \"mismatches\": [...], \"users_with_mismatches\", \"users_repaired\"} on stdout.")
    var json = false
    @Option(name: .customLong("chunk-size"), help: "Users compared per statement.")
    var chunkSize = 1_000

    func validate() throws {
        guard (1...100_000).contains(chunkSize) else { throw ValidationError("--chunk-size takes 1…100000") }
    }

    func run() async throws {
        let logger = try database.logger(label: "reddot.verify")
        let configuration = database.configuration(statementTimeoutMilliseconds: 0)
        let pool = PGPool(configuration: configuration, maximumConnections: 2, logger: logger)
        defer { pool.close() }
        let verifier = BadgeVerifier(store: BadgeStore(pool: pool), chunkSize: chunkSize)
        let printLines = !json
        let collected = AggregateMismatchList()
        let report: VerifyReport
        do {
            report = try await verifier.run(repair: repair) { mismatch in
                collected.append(mismatch)
                if printLines { print(mismatch.line) }
            }
        } catch let error as PGError {
            throw error.commandFailure()
        }
        if json { try printJSON(VerifyOutput(report: report, mismatches: collected.all)) }
        FileHandle.standardError.write(Data("reddot: \(report.summary(repair: repair))\n".utf8))
        if report.mismatches > 0 { throw ExitCode(2) }
    }
}
