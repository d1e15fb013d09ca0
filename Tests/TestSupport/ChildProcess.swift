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
                    let output = Pipe()
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
