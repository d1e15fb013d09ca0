import BadgeCore
import BadgeStore
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

extension QueryBenchmark {
    /// What phase 2 measured.
    struct PGBenchMeasurement: Sendable {
        var result: PGBench.Result
        var script: String
        var arguments: [String]
        /// Nil for runs of 2 s or less.
        var cpu: CPUUsage?
    }

    /// pgbench on the same database: the store's tree query for random users of the sample.
    func runPGBench() async throws -> PGBenchMeasurement {
        let script = try Self.pgbenchScript(sql: BadgeStore.treeQuerySQL, sampleUsers: settings.sampleUsers, stride: settings.stride)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("reddot-bench-query-\(UInt64.random(in: 0...UInt64.max)).sql")
        try Data(script.utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let connection = settings.database.connectionString
        let arguments = { (seconds: Int) in
            [
                "-n", "-M", "prepared", "-f", file.path, "-c", String(settings.pgbenchClients), "-j", String(settings.pgbenchThreads),
                "-T", String(seconds), "-D", "subtree=root", "-D", "max_level=\(BadgePath.maximumDepth + 1)",
            ]
        }
        let pgbench = self.pgbench
        if settings.warmup > 0 {
            let warmupArguments = arguments(settings.warmup)
            _ = try await onThread(named: "reddot.bench.pgbench") { try pgbench.run(warmupArguments, connection: connection) }
        }
        let measured = arguments(settings.duration)
        let duration = UInt64(settings.duration) * 1_000_000_000
        let database = settings.databaseName
        let (result, cpu) = try await onThread(named: "reddot.bench.pgbench") { () throws -> (PGBench.Result, CPUUsage?) in
            // CPU is sampled while pgbench runs (from 1 s after its start to 0.5 s before its
            // end), so that its backends are still there to be counted.
            var cpu: CPUUsage?
            let result = try pgbench.run(measured, connection: connection) { child in
                guard duration > 2_000_000_000 else { return }
                let started = BenchClock.now
                usleep(1_000_000)
                let before = CPUSample.now(database: database, child: child)
                let end = started + duration - 500_000_000
                let now = BenchClock.now
                if end > now { usleep(UInt32((end - now) / 1_000)) }
                cpu = CPUUsage(before: before, after: CPUSample.now(database: database, child: child), httpClientSeconds: nil)
            }
            return (result, cpu)
        }
        return PGBenchMeasurement(result: result, script: script, arguments: measured, cpu: cpu)
    }

    /// The tree query `sql` with `$1`, `$2`, `$3` renamed to pgbench variables, after a line that
    /// draws one of `sampleUsers` users `stride` apart.
    ///
    /// - Throws: `BenchFailure` when the query has another parameter or a `;`.
    public static func pgbenchScript(sql: String, sampleUsers: Int, stride: Int) throws -> String {
        let names = [1: ":user_id", 2: ":subtree", 3: ":max_level"]
        var renamed = ""
        var characters = sql[...]
        while let dollar = characters.firstIndex(of: "$") {
            renamed += characters[..<dollar]
            let digits = characters[characters.index(after: dollar)...].prefix(while: \.isASCII).prefix(while: \.isNumber)
            guard let number = Int(digits), let name = names[number] else {
                throw BenchFailure("the tree query uses a parameter other than $1, $2, $3; the bench cannot rename it for pgbench")
            }
            renamed += name
            characters = characters[digits.endIndex...]
        }
        renamed += characters
        guard !renamed.contains(";") else { throw BenchFailure("the tree query holds a ';': pgbench would split it") }
        return "\\set user_id random(0, \(sampleUsers - 1)) * \(stride)\n\(renamed);\n"
    }
}
