import Foundation
import Logging
import Synchronization

/// A process a bench starts (`reddot ingest`, `reddot rollup`, the plain consumer), found on
/// `PATH` like a shell would (through `/usr/bin/env`), with its output kept (the last 8 KiB) for
/// the report when it fails. `stop()` ends it: SIGTERM, then SIGKILL after 10 s.
final class BenchChild: @unchecked Sendable {
    /// What the report calls it.
    let name: String
    private let process: Process
    private let output = Mutex<[UInt8]>([])
    private let lastCPUSeconds = Mutex<Double?>(nil)
    private static let keptBytes = 8_192

    private init(name: String, process: Process) {
        self.name = name
        self.process = process
    }

    /// Starts `executable` with `arguments`.
    ///
    /// - Throws: `BenchFailure` when it cannot start.
    static func start(_ executable: String, _ arguments: [String], name: String, logger: Logger) throws -> BenchChild {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [executable] + arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        process.standardInput = FileHandle.nullDevice
        let child = BenchChild(name: name, process: process)
        pipe.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            guard !data.isEmpty else {
                handle.readabilityHandler = nil
                return
            }
            child.output.withLock { kept in
                kept.append(contentsOf: data)
                if kept.count > keptBytes { kept.removeFirst(kept.count - keptBytes) }
            }
        }
        do {
            try process.run()
        } catch {
            throw BenchFailure("cannot start \(name) (\(executable)): \(error)")
        }
        logger.debug("started", metadata: ["bench.child": "\(name)", "bench.pid": "\(process.processIdentifier)"])
        return child
    }

    /// Whether it still runs.
    var isRunning: Bool { process.isRunning }

    /// The CPU time it has used (user and system, core-seconds), read from `/proc` while it runs;
    /// after it exits, the last reading taken (`waitForExit` reads it as it polls). Nil where
    /// `/proc` is not available.
    var cpuSeconds: Double? {
        lastCPUSeconds.withLock { last in
            if let now = CPUSample.processSeconds(String(process.processIdentifier)), process.isRunning { last = now }
            return last
        }
    }

    /// The end of what it printed.
    var outputTail: String {
        String(decoding: output.withLock { $0 }, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Waits until it exits, at most `timeoutSeconds`.
    ///
    /// - Returns: its exit status.
    /// - Throws: `BenchFailure` on the timeout.
    func waitForExit(timeoutSeconds: Int) async throws -> Int32 {
        let deadline = BenchClock.now + UInt64(timeoutSeconds) * 1_000_000_000
        while process.isRunning {
            _ = cpuSeconds
            if BenchClock.now > deadline { throw BenchFailure("\(name) did not finish within \(timeoutSeconds) s") }
            try await Task.sleep(for: .milliseconds(10))
        }
        return process.terminationStatus
    }

    /// Ends it, gracefully first (SIGTERM: it commits what it has and exits), and waits.
    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        let deadline = BenchClock.now + 10_000_000_000
        while process.isRunning, BenchClock.now < deadline { usleep(10_000) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}
