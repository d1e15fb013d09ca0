import ArgumentParser
import BadgeAPI
import BadgeStore
import Foundation
import LibPQ
import Logging
import Metrics
import Prometheus

/// `reddot verify`: recount every aggregate and compare.
struct VerifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Recount every aggregate from the badge state and report (or --repair) each mismatch.",
        discussion: """
            Reads every user's own badge state, recounts each node's aggregate (its own count plus \
            everything below it), and compares with the stored aggregates the API answers from. \
            Users with a pending rollup are skipped. Prints one line per mismatch (or JSON with \
            --json) and a summary on stderr. With --repair, each user with a mismatch is \
            recomputed by the rollup's own step.

            Exit codes: 0 no mismatch; 2 mismatches found (repaired with --repair); 1 a database \
            error; 69 the database cannot be reached.
            """)

    @OptionGroup var database: DatabaseOptions

    @Flag(help: "Recompute every user with a mismatch.")
    var repair = false

    @Flag(help: "Print {\"users_checked\", \"mismatches\": [...], \"users_repaired\"} on stdout.")
    var json = false

    @Option(name: .customLong("chunk-size"), help: "Users compared per statement.")
    var chunkSize = 1_000

    func validate() throws {
        guard (1...100_000).contains(chunkSize) else { throw ValidationError("--chunk-size takes 1…100000") }
    }

    func run() async throws {
        let logger = try database.logger(label: "reddot.verify")
        var configuration = database.configuration(statementTimeoutMilliseconds: 0)
        configuration.sessionSettings += BadgeStore.recommendedSessionSettings
        let pool = PGPool(configuration: configuration, maximumConnections: 2, logger: logger)
        defer { pool.close() }
        let verifier = BadgeVerifier(store: BadgeStore(pool: pool), chunkSize: chunkSize)
        let printLines = !json
        let collected = Collected()
        let report: VerifyReport
        do {
            report = try await verifier.run(repair: repair) { mismatch in
                collected.append(mismatch)
                if printLines { print(Self.line(mismatch)) }
            }
        } catch let error as PGError {
            throw error.commandFailure()
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            let output = VerifyOutput(
                usersChecked: report.usersChecked, mismatches: collected.all, usersWithMismatches: report.usersWithMismatches,
                usersRepaired: report.usersRepaired)
            print(String(decoding: try encoder.encode(output), as: UTF8.self))
        }
        var summary = "checked \(report.usersChecked) users: \(report.mismatches) mismatched aggregates in \(report.usersWithMismatches) users"
        if repair { summary += "; repaired \(report.usersRepaired) users" }
        FileHandle.standardError.write(Data("reddot: \(summary)\n".utf8))
        if report.mismatches > 0 { throw ExitCode(2) }
    }

    static func line(_ mismatch: AggregateMismatch) -> String {
        func describe(_ count: Int64?, _ icon: String?) -> String {
            guard let count else { return "no row" }
            return "count \(count)" + (icon.map { ", icon \($0)" } ?? "")
        }
        return "user '\(mismatch.user.rawValue)' \(mismatch.path.rawValue): stored \(describe(mismatch.storedCount, mismatch.storedIcon)); recounted \(describe(mismatch.expectedCount, mismatch.expectedIcon))"
    }

    final class Collected: @unchecked Sendable {
        private let lock = NSLock()
        private var items: [AggregateMismatch] = []
        func append(_ item: AggregateMismatch) { lock.withLock { items.append(item) } }
        var all: [AggregateMismatch] { lock.withLock { items } }
    }

    struct VerifyOutput: Encodable {
        var usersChecked: Int
        var mismatches: [AggregateMismatch]
        var usersWithMismatches: Int
        var usersRepaired: Int

        enum CodingKeys: String, CodingKey {
            case usersChecked = "users_checked", mismatches, usersWithMismatches = "users_with_mismatches"
            case usersRepaired = "users_repaired"
        }
    }
}
