public import Foundation

/// Where the `reddot` executable under test is.
public enum ReddotBinary {
    /// The built executable: `REDDOT_BINARY`, else `reddot` beside the test bundle (or a folder above it).
    public static let url: Result<URL, TestSetupError> = {
        let fileManager = FileManager.default
        if let override = ProcessInfo.processInfo.environment["REDDOT_BINARY"], !override.isEmpty {
            guard fileManager.isExecutableFile(atPath: override) else {
                return .failure(TestSetupError("REDDOT_BINARY=\(override) is not an executable file"))
            }
            return .success(URL(fileURLWithPath: override))
        }
        let start = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL.deletingLastPathComponent()
        var directory = start
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent("reddot")
            var isDirectory: ObjCBool = false
            if fileManager.fileExists(atPath: candidate.path, isDirectory: &isDirectory), !isDirectory.boolValue,
                fileManager.isExecutableFile(atPath: candidate.path)
            {
                return .success(candidate)
            }
            directory = directory.deletingLastPathComponent()
        }
        return .failure(
            TestSetupError(
                "the reddot executable was not found beside the tests (\(start.path)) or above; build it (swift build --build-tests) or set REDDOT_BINARY"
            ))
    }()
}
