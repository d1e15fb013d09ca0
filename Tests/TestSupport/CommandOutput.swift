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
        let output = try ChildPipe()
        let errors = try ChildPipe()
        let standardInput = try ChildPipe()
        process.standardOutput = output.writing
        process.standardError = errors.writing
        process.standardInput = input == nil ? FileHandle.nullDevice : standardInput.reading
        try process.run()
        for end in [output.writing, errors.writing, standardInput.reading] { ChildPipe.closeChildEnd(end) }
        let watchdog = DispatchWorkItem { if process.isRunning { process.terminate() } }
        DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(timeoutSeconds), execute: watchdog)
        defer { watchdog.cancel() }
        // Read both pipes to the end before waiting, stderr on another thread (and stdin written
        // on a third), so that a full pipe never blocks the child.
        let group = DispatchGroup()
        let errorData = DataBox()
        DispatchQueue.global().async(group: group) {
            errorData.data = errors.reading.readDataToEndOfFile()
        }
        if let input {
            DispatchQueue.global().async(group: group) {
                standardInput.writing.write(input)
                try? standardInput.writing.close()
            }
        }
        let outputData = output.reading.readDataToEndOfFile()
        group.wait()
        return CommandOutput(
            exitCode: reapedStatus(of: process),
            stdout: String(decoding: outputData, as: UTF8.self),
            stderr: String(decoding: errorData.data, as: UTF8.self))
    }

    /// Written by one reader thread, read after `DispatchGroup.wait()`.
    private final class DataBox: @unchecked Sendable {
        var data = Data()
    }
}
