public import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// How a program run by ``ChildProcess/capture(_:_:removing:setting:in:input:timeoutSeconds:)``
/// ended, and what it printed.
public struct CommandOutput: CustomStringConvertible, Sendable {
    /// The exit status.
    public var exitCode: Int32
    /// Everything written to standard output.
    public var stdout: String
    /// Everything written to standard error.
    public var stderr: String
    /// The status and both outputs, for failure messages.
    public var description: String { "exit \(exitCode)\n--- stdout\n\(stdout)--- stderr\n\(stderr)" }
}

extension ChildProcess {
    /// Runs `executable` to its end off Swift's cooperative threads, in this process's environment
    /// without the variables named in `removing` and with `setting` on top, in `directory` when
    /// given, feeding it `input` (or nothing); never hangs the suite: a program still running after
    /// `timeoutSeconds` is terminated. Throws when the program cannot be started.
    public static func capture(
        _ executable: URL, _ arguments: [String], removing: [String] = [], setting: [String: String] = [:],
        in directory: URL? = nil, input: Data? = nil, timeoutSeconds: Int
    ) async throws -> CommandOutput {
        var environment = ProcessInfo.processInfo.environment
        for name in removing { environment[name] = nil }
        environment.merge(setting) { _, new in new }
        let finalEnvironment = environment
        return try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(
                    with: Result {
                        try captureBlocking(
                            executable, arguments, environment: finalEnvironment, directory: directory, input: input,
                            timeoutSeconds: timeoutSeconds)
                    })
            }
        }
    }

    private static func captureBlocking(
        _ executable: URL, _ arguments: [String], environment: [String: String], directory: URL?, input: Data?,
        timeoutSeconds: Int
    ) throws -> CommandOutput {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.environment = environment
        if let directory { process.currentDirectoryURL = directory }
        let output = Pipe.closedOnExec()
        let errors = Pipe.closedOnExec()
        let standardInput = Pipe.closedOnExec()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = input == nil ? FileHandle.nullDevice : standardInput
        try process.run()
        let watchdog = DispatchWorkItem { if process.isRunning { process.terminate() } }
        DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(timeoutSeconds), execute: watchdog)
        defer { watchdog.cancel() }
        // Read both pipes to the end before waiting, stderr on another thread (and stdin written
        // on a third), so that a full pipe never blocks the child.
        let group = DispatchGroup()
        let errorData = DataBox()
        DispatchQueue.global().async(group: group) {
            errorData.data = errors.fileHandleForReading.readDataToEndOfFile()
        }
        if let input {
            DispatchQueue.global().async(group: group) {
                standardInput.fileHandleForWriting.write(input)
                try? standardInput.fileHandleForWriting.close()
            }
        }
        let outputData = output.fileHandleForReading.readDataToEndOfFile()
        group.wait()
        return CommandOutput(
            exitCode: exitStatus(of: process),
            stdout: String(decoding: outputData, as: UTF8.self),
            stderr: String(decoding: errorData.data, as: UTF8.self))
    }

    /// The exit status of `process`, whose pipes have closed. Not `Process.waitUntilExit`: on
    /// Linux, Foundation can miss a child's exit and never reap it (a CI run hung for minutes on
    /// such a zombie). So Foundation is given 5 s to see the exit; after that the child is reaped
    /// here (exit code, or 128 + the signal that ended it). The watchdog still terminates a child
    /// that runs past its time.
    private static func exitStatus(of process: Process) -> Int32 {
        let seen = Date().addingTimeInterval(5)
        while process.isRunning, Date() < seen { usleep(10_000) }
        guard process.isRunning else { return process.terminationStatus }
        var status: Int32 = 0
        var reaped: pid_t = -1
        repeat {
            reaped = waitpid(process.processIdentifier, &status, 0)
        } while reaped == -1 && errno == EINTR
        guard reaped == process.processIdentifier else {
            // Foundation reaped it meanwhile.
            while process.isRunning { usleep(10_000) }
            return process.terminationStatus
        }
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }

    /// Written by one reader thread, read after `DispatchGroup.wait()`.
    private final class DataBox: @unchecked Sendable {
        var data = Data()
    }
}
