public import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `reddot dev`'s private PostgreSQL cluster: a data folder initialised on first start (as a
/// non-root user when run as root: PostgreSQL refuses root), started on a TCP port of
/// 127.0.0.1 only, trust authentication, stopped when `reddot dev` stops.
///
/// The cluster and its log live in `clusterFolder`: the data folder itself, or, as root when the
/// server's account cannot enter the data folder (a clone under `/root` or in a 0700 folder),
/// `/var/lib/<account>/<name>-<hash of the data folder's path>` (see `placement`).
public struct DevPostgres: Sendable {
    /// The folder handed to the server's account: `postgres/` and `postgres.log` are in it.
    public let clusterFolder: URL
    /// Where the cluster lives (`<clusterFolder>/postgres`).
    public var dataDirectory: URL { clusterFolder.appendingPathComponent("postgres") }
    /// The server's log.
    public var logFile: URL { clusterFolder.appendingPathComponent("postgres.log") }
    /// The TCP port on 127.0.0.1.
    public let port: Int
    /// The server binaries (initdb, pg_ctl).
    public let binDirectory: URL
    /// The account the server runs as when we are root; nil when not root.
    public let runAs: String?

    /// The role the cluster trusts.
    public static let role = "reddot"
    /// The dev database's name.
    public static let database = "reddot"

    /// A cluster in `clusterFolder` on `port`, run by the binaries in `binDirectory` (as the
    /// account `runAs` when root).
    public init(clusterFolder: URL, port: Int, binDirectory: URL, runAs: String?) {
        self.clusterFolder = clusterFolder
        self.port = port
        self.binDirectory = binDirectory
        self.runAs = runAs
    }

    /// The connection URI of the dev database.
    public var url: String { "postgresql://\(Self.role)@127.0.0.1:\(port)/\(Self.database)" }
    /// The connection URI of the `postgres` database (to create the dev one).
    public var adminURL: String { "postgresql://\(Self.role)@127.0.0.1:\(port)/postgres" }

    /// Finds the server binaries: `REDDOT_PG_BIN`, else the newest `/usr/lib/postgresql/*/bin`.
    public static func findBinaries() -> URL? {
        let fileManager = FileManager.default
        if let explicit = ProcessInfo.processInfo.environment["REDDOT_PG_BIN"], !explicit.isEmpty {
            return URL(fileURLWithPath: explicit)
        }
        let root = "/usr/lib/postgresql"
        let versions = ((try? fileManager.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).sorted()
        for version in versions.reversed() {
            let bin = URL(fileURLWithPath: "\(root)/\(version)/bin")
            if fileManager.isExecutableFile(atPath: bin.appendingPathComponent("initdb").path) { return bin }
        }
        return nil
    }

    public var isInitialized: Bool {
        FileManager.default.fileExists(atPath: dataDirectory.appendingPathComponent("PG_VERSION").path)
    }

    /// Creates the cluster if the folder has none.
    public func initializeIfNeeded() throws {
        guard !isInitialized else { return }
        if runAs != nil { _ = try account() }
        try Self.makeReachable(clusterFolder.deletingLastPathComponent())
        try FileManager.default.createDirectory(at: dataDirectory, withIntermediateDirectories: true)
        try handOver(clusterFolder)
        let result = try run(
            "initdb", ["-D", dataDirectory.path, "-U", Self.role, "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-instructions"])
        guard result.status == 0 else { throw DevError("initdb failed:\n\(result.output)") }
    }

    /// Whether a server runs on this data folder now.
    public func isRunning() throws -> Bool {
        try run("pg_ctl", ["-D", dataDirectory.path, "status"]).status == 0
    }

    /// Starts the server and waits until it accepts connections.
    public func start() throws {
        try handOver(clusterFolder)
        let options = "-p \(port) -c listen_addresses=127.0.0.1 -c unix_socket_directories='' -c fsync=off"
        let result = try run(
            "pg_ctl", ["-D", dataDirectory.path, "-l", logFile.path, "-o", options, "-w", "-t", "60", "start"])
        guard result.status == 0 else {
            let log = (try? String(contentsOf: logFile, encoding: .utf8)).map { String($0.suffix(2_000)) } ?? ""
            throw DevError("PostgreSQL did not start (pg_ctl exit \(result.status)):\n\(result.output)\n\(log)")
        }
    }

    /// Stops the server (fast shutdown: connections are closed, nothing is lost).
    public func stop() {
        _ = try? run("pg_ctl", ["-D", dataDirectory.path, "-m", "fast", "-w", "stop"])
    }

    /// When root, gives the folder to the server's account.
    private func handOver(_ folder: URL) throws {
        guard runAs != nil else { return }
        let (uid, gid) = try account()
        let enumerator = FileManager.default.enumerator(atPath: folder.path)
        chown(folder.path, uid, gid)
        while let item = enumerator?.nextObject() as? String {
            chown(folder.appendingPathComponent(item).path, uid, gid)
        }
    }

    /// The user and group ids of `runAs`.
    private func account() throws -> (uid: uid_t, gid: gid_t) {
        guard let runAs, let account = getpwnam(runAs) else {
            throw DevError(
                "PostgreSQL refuses to run as root, and the account '\(runAs ?? "")' does not exist: run deploy/dev.sh (it creates it), or: useradd --system --create-home --home-dir /var/lib/\(runAs ?? "") \(runAs ?? "")")
        }
        return (account.pointee.pw_uid, account.pointee.pw_gid)
    }

    /// Runs one of the server binaries (as `runAs` when set) and returns its exit status and output.
    func run(_ program: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let binary = binDirectory.appendingPathComponent(program).path
        var argv = [binary] + arguments
        var path = binary
        if let runAs {
            // In the cluster's folder: initdb fails when its account cannot enter the working
            // directory (a repository under /root).
            path = "/usr/sbin/runuser"
            argv = [path, "-u", runAs, "--", "/usr/bin/env", "--chdir=\(clusterFolder.path)"] + argv
        }
        return try spawnAndWait(path, argv)
    }
}

extension DevPostgres {
    /// Where the cluster of `dataFolder` lives, and why, when it is not in the data folder.
    public struct Placement: Sendable {
        public var clusterFolder: URL
        /// Nil when the cluster is in the data folder; else the sentence that says why it is not.
        public var reason: String?
    }

    /// Where the cluster of `dataFolder` lives when the server runs as `account` (nil: not root).
    ///
    /// In the data folder when not root, when a cluster is there already, or when `account` can
    /// enter the folder that holds it; else (or when a cluster was made there before) in
    /// `outsideFolder(for:account:)`, kept between runs. The user's folders are never chmod'ed.
    public static func placement(dataFolder: URL, account: String?) -> Placement {
        guard let account else { return Placement(clusterFolder: dataFolder) }
        let inside = DevPostgres(clusterFolder: dataFolder, port: 0, binDirectory: URL(fileURLWithPath: "/"), runAs: account)
        let outsideFolder = outsideFolder(for: dataFolder, account: account)
        let outside = DevPostgres(clusterFolder: outsideFolder, port: 0, binDirectory: URL(fileURLWithPath: "/"), runAs: account)
        let parent = dataFolder.deletingLastPathComponent()
        if inside.isInitialized { return Placement(clusterFolder: dataFolder) }
        let enters = canEnter(parent, account: account)
        if outside.isInitialized {
            let reason = enters
                ? "it was made there when the account \(account) could not enter \(parent.path)"
                : "the account \(account) (PostgreSQL refuses root) cannot enter \(parent.path)"
            return Placement(clusterFolder: outsideFolder, reason: reason)
        }
        if enters { return Placement(clusterFolder: dataFolder) }
        return Placement(
            clusterFolder: outsideFolder, reason: "the account \(account) (PostgreSQL refuses root) cannot enter \(parent.path)")
    }

    /// `/var/lib/<account>/<name>-<hash>`: a stable folder for the cluster of `dataFolder`, named
    /// after the repository folder (or the data folder when it is not `.reddot-dev`) and an FNV-1a
    /// hash of the data folder's full path, so two clones never share a cluster.
    public static func outsideFolder(for dataFolder: URL, account: String) -> URL {
        let path = dataFolder.standardizedFileURL.path
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in path.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        let named = dataFolder.lastPathComponent == ".reddot-dev" ? dataFolder.deletingLastPathComponent() : dataFolder
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
        let label = String(named.lastPathComponent.filter { allowed.contains($0) }.prefix(40))
        let hex = String(hash >> 32, radix: 16)
        let name = (label.isEmpty || label.hasPrefix(".") ? "reddot" : label) + "-" + String(repeating: "0", count: 8 - hex.count) + hex
        return URL(fileURLWithPath: "/var/lib").appendingPathComponent(account).appendingPathComponent(name)
    }

    /// Whether `account` may enter `folder` (search permission on it and every folder above it).
    static func canEnter(_ folder: URL, account: String) -> Bool {
        guard getpwnam(account) != nil else { return false }
        let result = try? spawnAndWait(
            "/usr/sbin/runuser", ["/usr/sbin/runuser", "-u", account, "--", "/usr/bin/test", "-x", folder.path])
        return result?.status == 0
    }

    /// Creates `folder` (root's, mode 0755) when missing: the server's account must pass through it.
    static func makeReachable(_ folder: URL) throws {
        guard !FileManager.default.fileExists(atPath: folder.path) else { return }
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        chmod(folder.path, 0o755)
    }
}

/// Runs a program to its end with stdout and stderr in a temporary file (not a pipe: a server the
/// program starts in the background keeps its descriptors), and returns its status and output.
func spawnAndWait(_ path: String, _ argv: [String]) throws -> (status: Int32, output: String) {
    let outputFile = FileManager.default.temporaryDirectory.appendingPathComponent("reddot-dev-\(UUID().uuidString).log")
    defer { try? FileManager.default.removeItem(at: outputFile) }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, outputFile.path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    posix_spawn_file_actions_adddup2(&actions, 1, 2)
    var pid: pid_t = 0
    let cArguments = argv.map { strdup($0) } + [nil]
    defer { cArguments.forEach { free($0) } }
    let result = posix_spawn(&pid, path, &actions, nil, cArguments, environ)
    guard result == 0 else { throw DevError("cannot start \(path): \(String(cString: strerror(result)))") }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0, errno == EINTR {}
    let output = (try? String(contentsOf: outputFile, encoding: .utf8)) ?? ""
    let exited = (status & 0x7f) == 0
    return (exited ? (status >> 8) & 0xff : 128 + (status & 0x7f), output)
}

/// A `reddot dev` failure with a sentence for the user.
public struct DevError: Error, CustomStringConvertible {
    public var description: String
    /// An error with a sentence.
    public init(_ description: String) { self.description = description }
}

/// Whether something already listens on 127.0.0.1:`port` (or the port cannot be bound).
public func portIsBusy(_ port: Int, host: String = "127.0.0.1") -> Bool {
    let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard socket >= 0 else { return true }
    defer { close(socket) }
    var reuse: Int32 = 1
    setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr(host == "0.0.0.0" ? "0.0.0.0" : "127.0.0.1")
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    return bound != 0
}
