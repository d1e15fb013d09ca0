import Dispatch
import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `deploy/dev.sh` from a clone in a folder other users cannot enter (a clone under `/root`, a
/// `mktemp -d`): as root, PostgreSQL runs as another account, which cannot reach the clone, so
/// the cluster must live elsewhere and everything else must still work.
@Suite("deploy/dev.sh from a private folder", .serialized)
struct DevAnywhereTests {
    @Test("--reset refuses a folder holding files reddot dev did not make, and an account name that is no account")
    func resetIsCareful() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("reddot-reset-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let notes = folder.appendingPathComponent("notes.txt")
        try Data("mine".utf8).write(to: notes)
        let binary = try CLITests.binary.get().path
        let ports = ["--port", "\(try ServeCLITests.freePort())", "--pg-port", "\(try ServeCLITests.freePort())"]
        let account = "REDDOT_DEV_PG_USER=\(DevTourTests.postgresAccount)"
        let refused = try await ChildProcess.run(
            "/usr/bin/env", [account, binary, "dev", "--data", folder.path, "--reset"] + ports, mergingStandardError: true)
        #expect(refused.status == 64, "\(refused.output)")
        #expect(refused.output.contains("--reset wipes only a folder reddot dev made"), "\(refused.output)")
        #expect(refused.output.contains("notes.txt"), "\(refused.output)")
        #expect(FileManager.default.fileExists(atPath: notes.path))
        if geteuid() == 0 {
            let strange = try await ChildProcess.run(
                "/usr/bin/env", ["REDDOT_DEV_PG_USER=../etc", binary, "dev", "--data", folder.path, "--reset"] + ports,
                mergingStandardError: true)
            #expect(strange.status == 64, "\(strange.output)")
            #expect(strange.output.contains("names no account"), "\(strange.output)")
            #expect(FileManager.default.fileExists(atPath: notes.path))
        }
    }

    @Test(
        "as root, a fresh clone in a 0700 folder: dev.sh answers /healthz, the cluster lives outside, Ctrl-C stops it all",
        .enabled(if: geteuid() == 0, "runs only as root: the private-folder problem is the PostgreSQL account's, which only root uses"),
        .timeLimit(.minutes(5)))
    func freshCloneInPrivateFolder() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("reddot-anywhere-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        chmod(folder.path, 0o700)
        defer { try? FileManager.default.removeItem(at: folder) }
        let clone = folder.appendingPathComponent("reddot")
        let cloned = try await ChildProcess.run(
            "/usr/bin/git", ["clone", "--quiet", "--no-hardlinks", Repository.root.path, clone.path], mergingStandardError: true)
        try #require(cloned.status == 0, "git clone failed: \(cloned.output)")
        // The scripts under test are this tree's, committed or not (the binary is the one under test).
        for script in ["deploy/dev.sh", "deploy/packages.sh"] {
            let target = clone.appendingPathComponent(script)
            try? FileManager.default.removeItem(at: target)
            try FileManager.default.copyItem(at: Repository.root.appendingPathComponent(script), to: target)
        }

        let account = DevTourTests.postgresAccount
        // Free ports, so a developer's running `reddot dev` (8080, 55432) is never in the way.
        let apiPort = try ServeCLITests.freePort(), postgresPort = try ServeCLITests.freePort()
        var environment = ProcessInfo.processInfo.environment
        environment["REDDOT_DEV_BINARY"] = try CLITests.binary.get().path
        environment["REDDOT_DEV_PG_USER"] = account
        environment["REDDOT_LOG_LEVEL"] = "warning"
        environment.removeValue(forKey: "REDDOT_DEV_DATA")
        let dev = try ReddotChild(
            ["--port", "\(apiPort)", "--pg-port", "\(postgresPort)"], in: folder, name: "dev",
            executable: clone.appendingPathComponent("deploy/dev.sh"), environment: environment, directory: folder)
        let process = dev.process, errors = dev.errors
        // Kept to the end of the test (its deinit would kill dev.sh).
        defer { if dev.process.isRunning { kill(dev.process.processIdentifier, SIGKILL) } }

        var outside: URL?
        defer {
            // Remove the cluster made for this clone (stopped first if the test failed early).
            if let outside {
                _ = try? spawnAndWaitInTest(
                    "/usr/sbin/runuser",
                    ["-u", account, "--", "/usr/bin/env", "--chdir=/", pgCtl(), "-D", outside.appendingPathComponent("postgres").path, "-m", "immediate", "-w", "stop"])
                try? FileManager.default.removeItem(at: outside)
            }
        }
        let deadline = ContinuousClock.now + .seconds(180)
        while (try? await ServeCLITests.get(port: apiPort, "/healthz", token: nil))?.0 != 200 {
            guard process.isRunning else { throw TestSetupError("dev.sh exited (\(process.terminationStatus)):\n\(Self.read(errors))") }
            guard ContinuousClock.now < deadline else { throw TestSetupError("dev.sh did not answer /healthz in 180 s:\n\(Self.read(errors))") }
            try await Task.sleep(for: .milliseconds(200))
        }

        // One line says where the cluster lives and why; it is under the account's /var/lib folder.
        let said = Self.read(errors).split(separator: "\n").filter { $0.contains("the PostgreSQL cluster lives in") }
        #expect(said.count == 1, "\(Self.read(errors))")
        let line = String(said.first ?? "")
        let prefix = "/var/lib/\(account)/reddot-"
        let found = line.range(of: prefix).map { range in
            URL(fileURLWithPath: String(line[range.lowerBound...].prefix { $0 != " " }))
        }
        outside = found
        #expect(found != nil && line.contains("cannot enter \(clone.path)"), "\(line)")
        if let found {
            #expect(FileManager.default.fileExists(atPath: found.appendingPathComponent("postgres/PG_VERSION").path))
        }
        // The rest stays in the clone: no cluster there, the user's folder is not chmod'ed.
        let data = clone.appendingPathComponent(".reddot-dev")
        #expect(!FileManager.default.fileExists(atPath: data.appendingPathComponent("postgres").path))
        let mode = try FileManager.default.attributesOfItem(atPath: folder.path)[.posixPermissions] as? Int
        #expect(mode == 0o700)

        // The cheat sheet's env file works as root, from the clone (the demo data is there).
        let (status, output) = try await DevTourTests.bash(
            #"""
            for _ in $(seq 1 300); do [ -f .reddot-dev/env ] && break; sleep 0.2; done
            source .reddot-dev/env
            for _ in $(seq 1 100); do
              curl -sf -H "Authorization: Bearer $TOKEN" "$REDDOT_API/v1/users/alice/badges" | grep -q dark_mode && break
              sleep 0.2
            done
            curl -sf -H "Authorization: Bearer $TOKEN" "$REDDOT_API/v1/users/alice/badges"
            """#, in: clone)
        #expect(status == 0 && output.contains(#""path":"root.settings.dark_mode""#), "\(output)")

        // Ctrl-C: exits 0 and stops its PostgreSQL.
        kill(process.processIdentifier, SIGINT)
        let exitDeadline = ContinuousClock.now + .seconds(60)
        while process.isRunning, ContinuousClock.now < exitDeadline { try await Task.sleep(for: .milliseconds(100)) }
        #expect(!process.isRunning, "dev.sh did not exit within 60 s of SIGINT")
        if !process.isRunning { #expect(process.terminationStatus == 0, "\(Self.read(errors))") }
        if let found {
            #expect(!FileManager.default.fileExists(atPath: found.appendingPathComponent("postgres/postmaster.pid").path))
        }
        #expect((try? await ServeCLITests.get(port: apiPort, "/healthz", token: nil)) == nil, "the API still answers")
        #expect(Self.listens(port: postgresPort) == false, "PostgreSQL still listens on \(postgresPort)")
    }

    static func read(_ file: URL) -> String { (try? String(contentsOf: file, encoding: .utf8)) ?? "" }

    /// Whether something accepts TCP connections on 127.0.0.1:`port`.
    static func listens(port: Int) -> Bool {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard socket >= 0 else { return false }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }
}

/// `pg_ctl` of the newest PostgreSQL in /usr/lib/postgresql.
private func pgCtl() -> String {
    let root = "/usr/lib/postgresql"
    let version = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).max() ?? 15
    return "\(root)/\(version)/bin/pg_ctl"
}

/// Runs a program to its end, synchronously (cleanup only).
private func spawnAndWaitInTest(_ path: String, _ arguments: [String]) throws -> Int32 {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try process.run()
    process.waitUntilExit()
    return process.terminationStatus
}
