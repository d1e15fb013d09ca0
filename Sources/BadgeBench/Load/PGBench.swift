import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The `pgbench` executable.
public struct PGBench: Sendable {
    /// Its path.
    public let executable: String
    /// Its version (`15.18`), or `?`.
    public let version: String

    /// What one run reported.
    public struct Result: Sendable {
        var transactions: Int
        var failed: Int
        var tps: Double
        var latencyAverageMilliseconds: Double
    }

    /// `explicit`, else `pgbench` in PATH, else the newest /usr/lib/postgresql/*/bin/pgbench.
    ///
    /// - Throws: `BenchFailure` when there is none, or `--version` fails. Blocking: call it on a
    ///   thread of its own (see ``onThread(named:_:)``).
    public static func locate(_ explicit: String?) throws -> PGBench {
        var candidates: [String] = []
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
            candidates.append("\(directory)/pgbench")
        }
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        for version in versions.sorted(by: { (Int($0) ?? 0) > (Int($1) ?? 0) }) {
            candidates.append("/usr/lib/postgresql/\(version)/bin/pgbench")
        }
        let found = explicit.map { [$0] } ?? candidates
        guard let executable = found.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw BenchFailure(
                explicit.map { "\($0) is not an executable pgbench" }
                    ?? "pgbench not found in PATH or /usr/lib/postgresql/*/bin; give its path with --pgbench")
        }
        let (status, output) = try execute(executable, ["--version"])
        guard status == 0 else { throw BenchFailure("\(executable) --version failed: \(output.prefix(200))") }
        // "pgbench (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)"
        let words = output.split(whereSeparator: \.isWhitespace)
        let version = words.firstIndex(of: "(PostgreSQL)").flatMap { $0 + 1 < words.count ? String(words[$0 + 1]) : nil } ?? "?"
        return PGBench(executable: executable, version: version)
    }

    /// Runs pgbench with `arguments` against `connection` (a libpq connection string, passed as
    /// the database name, which pgbench expands; empty: the PG* variables) and parses its summary.
    func run(_ arguments: [String], connection: String, whileRunning: (Int32) -> Void = { _ in }) throws -> Result {
        let (status, output) = try Self.execute(executable, arguments + (connection.isEmpty ? [] : [connection]), whileRunning: whileRunning)
        guard status == 0 else {
            throw BenchFailure("pgbench exited with status \(status): \(output.suffix(800))")
        }
        func value(after prefix: String) -> Double? {
            for line in output.split(separator: "\n") where line.hasPrefix(prefix) {
                let rest = line.dropFirst(prefix.count).trimmingCharacters(in: .whitespaces)
                return Double(rest.prefix(while: { $0.isNumber || $0 == "." }))
            }
            return nil
        }
        guard let tps = value(after: "tps = "), let latency = value(after: "latency average = "),
            let transactions = value(after: "number of transactions actually processed:")
        else {
            throw BenchFailure("cannot read pgbench's summary: \(output.suffix(800))")
        }
        let failed = value(after: "number of failed transactions:") ?? 0
        return Result(transactions: Int(transactions), failed: Int(failed), tps: tps, latencyAverageMilliseconds: latency)
    }

    /// Runs a program to its end, calling `whileRunning` with its process id once it started;
    /// returns its exit status and its output (stdout and stderr together; the program blocks
    /// while `whileRunning` runs if it writes more than a pipe holds). Call it on a thread of its
    /// own (see `onThread`): it unblocks that thread's signals.
    static func execute(
        _ executable: String, _ arguments: [String], whileRunning: (Int32) -> Void = { _ in }
    ) throws -> (Int32, String) {
        // A child inherits the spawning thread's signal mask, and threads started from Swift's
        // concurrency pool block nearly every signal: pgbench would never get the SIGALRM that
        // ends its -T run (nor a SIGTERM).
        var unblocked = sigset_t()
        sigemptyset(&unblocked)
        pthread_sigmask(SIG_SETMASK, &unblocked, nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        whileRunning(process.processIdentifier)
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}
