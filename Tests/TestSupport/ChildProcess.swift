public import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Runs `body` on a thread of its own and returns what it returns: for a blocking call (a child's
/// exit, librdkafka's close, a wait in `recv`) from a test. The cooperative pool has one thread
/// per core, two here: a test that blocks them holds back every other test running beside it
/// (a client's 10 s wait once ran out while a parallel test waited for `reddot dev` to stop).
public func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try body() }) }
        thread.start()
    }
}

/// Runs programs from tests, off the cooperative thread pool.
public enum ChildProcess {
    /// The exit status of `process` once it has ended (exit code, or 128 + the signal that ended
    /// it), waited for on a thread of its own.
    public static func exitStatus(of process: Process) async -> Int32 {
        // The body cannot throw.
        (try? await onThread { reapedStatus(of: process) }) ?? -1
    }

    /// The exit status of `process`, waiting for it to end. Not `Process.waitUntilExit`: on
    /// Linux, Foundation can miss a child's exit and never reap it (a CI run hung for minutes on
    /// such a zombie). So Foundation is given 5 s to see the exit; after that the child is reaped
    /// here. Blocks: call it off the cooperative pool.
    static func reapedStatus(of process: Process) -> Int32 {
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

    /// Runs `executable` to its end in `directory`; returns its status and its standard output
    /// (with standard error too when `mergingStandardError`, else standard error is dropped).
    public static func run(
        _ executable: String, _ arguments: [String], in directory: URL? = nil, mergingStandardError: Bool = false
    ) async throws -> (status: Int32, output: String) {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                do {
                    let process = Process()
                    process.executableURL = URL(fileURLWithPath: executable)
                    process.arguments = arguments
                    if let directory { process.currentDirectoryURL = directory }
                    let output = try ChildPipe()
                    process.standardOutput = output.writing
                    process.standardError = mergingStandardError ? output.writing : FileHandle.nullDevice
                    try process.run()
                    ChildPipe.closeChildEnd(output.writing)
                    let data = output.reading.readDataToEndOfFile()
                    process.waitUntilExit()
                    continuation.resume(returning: (process.terminationStatus, String(decoding: data, as: UTF8.self)))
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }
}

/// glibc's `pipe2`, which its Swift module does not export (a GNU extension).
@_silgen_name("pipe2")
private func systemPipe2(_ descriptors: UnsafeMutablePointer<Int32>, _ flags: Int32) -> Int32

/// A pipe for a child's standard input, output or error whose two descriptors are made closed
/// on exec in the same step as the pipe (`pipe2(O_CLOEXEC)`): the child gets its end as
/// descriptor 0, 1 or 2 (a copy, which stays open), and no other program started meanwhile keeps
/// a copy of either. A server a parallel test started inherited a captured command's output pipe
/// and the capture never read to its end (the suite hung); setting `FD_CLOEXEC` after `Pipe()`
/// left a window, and a PostgreSQL that a parallel test restarted in it kept the pipe of a
/// `reddot token` capture open, which hung the suite again. Give ``writing`` (or ``reading``,
/// for input) to the child, then close it
/// here once the child runs (``closeChildEnd(_:)``): Foundation closes that end of a `Pipe`
/// itself, not of a `FileHandle`.
public struct ChildPipe: @unchecked Sendable {
    /// The end this process reads.
    public let reading: FileHandle
    /// The end this process writes.
    public let writing: FileHandle

    /// A new pipe, both ends closed on exec.
    public init() throws {
        var descriptors: [Int32] = [-1, -1]
        guard systemPipe2(&descriptors, O_CLOEXEC) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EMFILE) }
        reading = FileHandle(fileDescriptor: descriptors[0], closeOnDealloc: true)
        writing = FileHandle(fileDescriptor: descriptors[1], closeOnDealloc: true)
    }

    /// Closes this process's copy of the child's end, once the child runs (so that the reader
    /// sees the end of the output when the child exits).
    public static func closeChildEnd(_ handle: FileHandle) {
        try? handle.close()
    }
}
