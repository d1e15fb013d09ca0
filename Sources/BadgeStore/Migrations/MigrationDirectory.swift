public import Foundation

/// Where `reddot migrate` finds its files when no directory is given.
public enum MigrationDirectory {
    /// The migrations directory: `explicit`, else `REDDOT_MIGRATIONS_DIR` (either unless empty), else `./migrations`,
    /// else the one installed beside the executable (`../share/reddot/migrations`), else the
    /// source tree's, for a development build (`.build/debug/reddot`).
    ///
    /// - Parameters:
    ///   - executable: the running executable's path (`CommandLine.arguments[0]`); symlinks are resolved.
    ///   - currentDirectory: the working directory.
    /// - Throws: `MigrationError` `.invalidFile` (exit 65) naming every place looked in, when none is a directory.
    public static func resolve(
        _ explicit: String?, environment: [String: String], executable: String,
        currentDirectory: String = FileManager.default.currentDirectoryPath
    ) throws(MigrationError) -> URL {
        // An empty flag or variable counts as not given (an empty path would be the working directory).
        if let explicit = [explicit, environment["REDDOT_MIGRATIONS_DIR"]].compactMap({ $0 }).first(where: { !$0.isEmpty }) {
            return URL(fileURLWithPath: explicit)
        }
        let folder = URL(fileURLWithPath: executable).resolvingSymlinksInPath().deletingLastPathComponent()
        let candidates = [
            URL(fileURLWithPath: currentDirectory).appendingPathComponent("migrations"),
            folder.appendingPathComponent("../share/reddot/migrations").standardized,
            // A development build inside the source tree (.build/debug/reddot).
            folder.appendingPathComponent("../../../migrations").standardized,
            folder.appendingPathComponent("../../../../migrations").standardized,
        ]
        var isDirectory: ObjCBool = false
        for candidate in candidates where FileManager.default.fileExists(atPath: candidate.path, isDirectory: &isDirectory) && isDirectory.boolValue {
            return candidate
        }
        throw MigrationError(
            .invalidFile,
            "no migrations directory found (looked in \(candidates.map(\.path).joined(separator: ", "))); pass --migrations DIR or set REDDOT_MIGRATIONS_DIR")
    }
}
