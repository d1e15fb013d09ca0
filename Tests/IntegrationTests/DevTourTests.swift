import Dispatch
import Foundation
import TestSupport
import Testing

/// `reddot dev` as a newcomer meets it: the README's tour, line by line, against a running
/// `reddot dev --demo`; Ctrl-C; a second start that reuses the data; a busy port.
@Suite("reddot dev and the README tour", .serialized)
struct DevTourTests {
    /// The shell lines between the README's tour markers.
    static func tourScript() throws -> String {
        let readme = try String(contentsOf: Repository.root.appendingPathComponent("README.md"), encoding: .utf8)
        guard let begin = readme.range(of: "<!-- tour:begin"), let end = readme.range(of: "<!-- tour:end -->"),
            let open = readme.range(of: "```sh\n", range: begin.upperBound..<end.lowerBound),
            let close = readme.range(of: "```", range: open.upperBound..<end.lowerBound)
        else { throw TestSetupError("README.md has no tour block between <!-- tour:begin --> and <!-- tour:end -->") }
        return String(readme[open.upperBound..<close.lowerBound])
    }

    @Test("deploy/dev.sh's reddot dev: the README tour works as written, Ctrl-C exits 0, a restart keeps the data")
    func tour() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("reddot-dev-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        chmod(folder.path, 0o755)  // the PostgreSQL account (when root) must reach the data folder
        defer { try? FileManager.default.removeItem(at: folder) }
        let apiPort = try ServeCLITests.freePort(), postgresPort = try ServeCLITests.freePort()
        let arguments = ["dev", "--data", folder.appendingPathComponent(".reddot-dev").path, "--port", "\(apiPort)", "--pg-port", "\(postgresPort)"]

        let cheatSheet = folder.appendingPathComponent("dev.out")
        let first = try Self.startDev(arguments + ["--demo"], output: cheatSheet)
        defer { if first.isRunning { first.terminate() } }
        // As a newcomer would: start the tour when the cheat sheet shows.
        let deadline = ContinuousClock.now + .seconds(120)
        while !((try? String(contentsOf: cheatSheet, encoding: .utf8))?.contains("RedDot dev is running") ?? false) {
            guard ContinuousClock.now < deadline, first.isRunning else { throw TestSetupError("reddot dev printed no cheat sheet") }
            try await Task.sleep(for: .milliseconds(100))
        }
        let environmentFile = folder.appendingPathComponent(".reddot-dev/env")
        #expect(FileManager.default.fileExists(atPath: environmentFile.path))

        // The same account as the first start: a fresh machine has no reddot-dev, and the account
        // is checked before the port.
        let busy = try await CLITests().reddot(arguments, setting: ["REDDOT_DEV_PG_USER": Self.postgresAccount])
        #expect(busy.exitCode == 69, "\(busy)")
        #expect(busy.stderr.contains("port \(apiPort) is busy"))

        let (status, output) = try await Self.bash(try Self.tourScript(), in: folder)
        #expect(status == 0, "the tour failed:\n\(output)")
        #expect(output.contains(#""path":"root.settings.dark_mode""#), "the demo broadcast is in alice's tree:\n\(output)")
        #expect(output.contains(#""path":"root.chat.c7""#) && output.contains(#""path":"root.chat.c8""#), "\(output)")
        #expect(output.contains(#""since":1,"user":"alice","version":"#), "the delta since version 1:\n\(output)")
        #expect(output.hasSuffix("404\n"), "\(output)")

        kill(first.processIdentifier, SIGINT)
        #expect(await ChildProcess.exitStatus(of: first) == 0)
        #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent(".reddot-dev/postgres/postmaster.pid").path))

        // A second start reuses the data: the tour's kcat badge is still there.
        let second = try Self.startDev(arguments, output: folder.appendingPathComponent("dev2.out"))
        defer { if second.isRunning { second.terminate() } }
        try await ServeCLITests.waitForHealth(port: apiPort, timeout: .seconds(60))
        let (_, again) = try await Self.bash(
            #"source .reddot-dev/env && curl -sf -H "Authorization: Bearer $TOKEN" "$REDDOT_API/v1/users/alice/badges?path=root.promotion""#,
            in: folder)
        #expect(again.contains(#""path":"root.promotion.summer""#), "\(again)")
        kill(second.processIdentifier, SIGTERM)
        #expect(await ChildProcess.exitStatus(of: second) == 0)
    }

    /// The account `reddot dev` runs PostgreSQL as when the tests run as root: the caller's
    /// `REDDOT_DEV_PG_USER`, else deploy/test.sh's `reddot-test` (a fresh machine has no
    /// `reddot-dev`).
    static var postgresAccount: String { ProcessInfo.processInfo.environment["REDDOT_DEV_PG_USER"] ?? "reddot-test" }

    static func startDev(_ arguments: [String], output: URL) throws -> Process {
        let process = Process()
        process.executableURL = try CLITests.binary.get()
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment["REDDOT_LOG_LEVEL"] = "warning"
        environment["REDDOT_DEV_PG_USER"] = postgresAccount
        process.environment = environment
        process.currentDirectoryURL = Repository.root
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        process.standardOutput = try FileHandle(forWritingTo: output)
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        return process
    }

    /// Runs a script with bash -e -o pipefail in `folder`; returns the status and stdout + stderr.
    static func bash(_ script: String, in folder: URL) async throws -> (Int32, String) {
        try await ChildProcess.run("/bin/bash", ["-e", "-o", "pipefail", "-c", script], in: folder, mergingStandardError: true)
    }
}
