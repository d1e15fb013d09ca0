public import Foundation

/// Runs programs from tests, off the cooperative thread pool.
public enum ChildProcess {
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
                    let output = Pipe.closedOnExec()
                    process.standardOutput = output
                    process.standardError = mergingStandardError ? output : FileHandle.nullDevice
                    try process.run()
                    let data = output.fileHandleForReading.readDataToEndOfFile()
                    process.waitUntilExit()
                    continuation.resume(returning: (process.terminationStatus, String(decoding: data, as: UTF8.self)))
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }
}

extension Pipe {
    /// A pipe whose two descriptors close in every program this process starts (`FD_CLOEXEC`),
    /// for a child's standard output or error: the child gets its end as descriptor 1 or 2 (a
    /// copy, which stays open), and no other program started meanwhile keeps a copy of it. Without
    /// it, a server a parallel test started inherited a captured command's output pipe, and the
    /// capture never read to its end (the suite hung).
    public static func closedOnExec() -> Pipe {
        let pipe = Pipe()
        for descriptor in [pipe.fileHandleForReading.fileDescriptor, pipe.fileHandleForWriting.fileDescriptor] {
            _ = fcntl(descriptor, F_SETFD, fcntl(descriptor, F_GETFD) | FD_CLOEXEC)
        }
        return pipe
    }
}
