import ArgumentParser
import Foundation
import RedDotClient
import RedDotCommandLine
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// `reddot watch`: a user's badge tree, live in a terminal, through RedDotClient.
struct WatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Draw a user's badge tree live in a terminal (RedDotClient's demo).",
        discussion: """
            Connects as an app does, with RedDotClient: the stream (Server-Sent Events, resumed \
            after a reconnect), or polling with --poll-seconds. Each shown node is a red dot with \
            its number (and its unseen part, its icon, and "muted" or "snoozed until" when the \
            user muted it); the tree is drawn again in place on every change, with the version and \
            the connection's state on top. When standard output is not a terminal, each tree is \
            printed after the last. Ctrl-C stops it.

            Exit codes: 0 stopped by Ctrl-C or SIGTERM; 64 bad arguments; 77 the server refused \
            the token or the user (401, 403), with a sentence. A user the server has no tree for \
            (404: nothing stored yet, with an admin token or without auth) shows as empty and is asked \
            for again with backoff.
            """)

    @Option(help: ArgumentHelp("The user whose badges to draw.", valueName: "user"))
    var user: String
    @Option(help: ArgumentHelp("The subtree to draw.", valueName: "path"))
    var path = "root"
    @Option(help: ArgumentHelp("The API's base URL. Default: REDDOT_API (as reddot dev's env file sets it), else http://127.0.0.1:8080.", valueName: "url"))
    var url: String?
    @Option(help: ArgumentHelp("The bearer token (the user's, or an admin's). Default: REDDOT_TOKEN; none for a server without auth.", valueName: "jwt"))
    var token: String?
    @Option(
        name: .customLong("poll-seconds"),
        help: ArgumentHelp("Poll every this many seconds (If-None-Match) instead of streaming.", valueName: "seconds"))
    var pollSeconds: Double?
    @Option(
        name: .customLong("cache-directory"),
        help: ArgumentHelp(
            "Keep the last tree in this folder (one file per user and server), shown at once at the next start.", valueName: "folder"))
    var cacheDirectory: String?

    func validate() throws {
        if let pollSeconds, !(pollSeconds.isFinite && pollSeconds >= 0.1 && pollSeconds <= 86_400) {
            throw ValidationError("--poll-seconds takes seconds from 0.1 to 86400, not \(pollSeconds)")
        }
        guard !user.isEmpty, user.utf8.count <= 256 else { throw ValidationError("--user takes a user id of 1 to 256 bytes") }
        if let problem = RedDotClient.pathProblem(path) {
            throw ValidationError("--path takes a badge path such as root.chat: \(problem)")
        }
    }

    /// Whether the port an http(s) URL's text names, if any, is 1…65535: Foundation reads a port
    /// beyond that as no port (the scheme's) or lets it wrap, so the text itself is checked.
    static func portIsValid(_ address: String) -> Bool {
        guard let start = address.range(of: "://")?.upperBound else { return false }
        var authority = address[start...].prefix { !"/?#".contains($0) }
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        if authority.hasPrefix("["), let close = authority.firstIndex(of: "]") { authority = authority[authority.index(after: close)...] }
        guard let colon = authority.lastIndex(of: ":") else { return true }
        let digits = authority[authority.index(after: colon)...]
        guard !digits.isEmpty, digits.count <= 5, digits.allSatisfy(\.isASCII), let port = Int(digits) else { return false }
        return (1...65_535).contains(port)
    }

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        let address = url ?? environment["REDDOT_API"] ?? "http://127.0.0.1:8080"
        guard let server = URL(string: address), let scheme = server.scheme?.lowercased(), ["http", "https"].contains(scheme), server.host != nil,
            Self.portIsValid(address)
        else {
            throw fail("--url takes an http or https URL such as http://127.0.0.1:8080 (a port from 1 to 65535), not \(address)", code: ExitCodes.usage)
        }
        let bearer = token ?? environment["REDDOT_TOKEN"]
        var options = RedDotClient.Options(cacheDirectory: cacheDirectory.map { URL(fileURLWithPath: $0, isDirectory: true) })
        if let pollSeconds {
            let interval = Duration.milliseconds(Int64(pollSeconds * 1000))
            options.transport = .polling(RedDotClient.Polling(interval: interval, toleranceWindow: min(interval, .seconds(5))))
        }
        let provider: (@Sendable () async throws -> String?)? = bearer.map { token in { @Sendable in token } }
        let client = RedDotClient(server: server, user: user, options: options, token: provider)
        let screen = WatchScreen(user: user, server: address, interactive: isatty(STDOUT_FILENO) == 1)
        let tree = try client.observeTree(under: path) { screen.draw(badges: $0, version: client.version, mutes: client.mutes) }
        let refused = Locked<RedDotClientError?>(nil)
        let (stopped, stop) = AsyncStream.makeStream(of: Void.self)
        let connection = client.observeConnection { state in
            screen.draw(state: state, version: client.version)
            if case .failed(let error) = state {
                refused.set(error)
                stop.yield()
            }
        }
        let signals = [SIGINT, SIGTERM].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number)
            source.setEventHandler { stop.yield() }
            source.resume()
            return source
        }
        client.start()
        for await _ in stopped { break }
        client.stop()
        signals.forEach { $0.cancel() }
        tree.cancel()
        connection.cancel()
        screen.finish()
        if let error = refused.get() {
            throw fail(error.description, code: 77)
        }
    }
}

/// Draws the tree (and the connection's state) on each change, one whole frame at a time.
final class WatchScreen: Sendable {
    let user: String
    let server: String
    let interactive: Bool
    private let shown = Mutex<Frame>(Frame())

    /// What a frame shows.
    struct Frame {
        var badges: [Badge] = []
        var version: Int64 = 0
        var state = "starting"
        var mutes: [MutedPath] = []
    }

    init(user: String, server: String, interactive: Bool) {
        self.user = user
        self.server = server
        self.interactive = interactive
        if interactive { Self.write("\u{1B}[?25l") }  // hide the cursor
    }

    // Each frame is written under the lock, so frames from two threads never mix or reorder.
    func draw(badges: [Badge], version: Int64, mutes: [MutedPath]) {
        shown.withLock { shown in
            shown.badges = badges
            shown.mutes = mutes
            shown.version = max(shown.version, version)
            Self.write(render(shown))
        }
    }

    func draw(state: RedDotClient.ConnectionState, version: Int64) {
        shown.withLock { shown in
            shown.state = Self.describe(state)
            shown.version = max(shown.version, version)
            Self.write(render(shown))
        }
    }

    func finish() {
        if interactive { Self.write("\u{1B}[?25h") }  // the cursor back
    }

    private func render(_ shown: Frame) -> String {
        let red = interactive ? "\u{1B}[31m" : ""
        let dim = interactive ? "\u{1B}[2m" : ""
        let reset = interactive ? "\u{1B}[0m" : ""
        var lines = ["RedDot · \(user) · version \(shown.version) · \(shown.state) · \(server)", ""]
        if shown.badges.isEmpty { lines.append("\(dim)(no badges)\(reset)") }
        let base = shown.badges.first?.path.split(separator: ".").count ?? 1
        for badge in shown.badges {
            let parts = badge.path.split(separator: ".")
            let indent = String(repeating: "  ", count: max(0, parts.count - base))
            var line = "\(indent)\(red)●\(reset) \(parts.last ?? "")"
            if let text = badge.text { line += "  \(red)\(text)\(reset)" }
            if badge.unseen > 0 { line += "  \(dim)\(badge.unseen) unseen\(reset)" }
            if let icon = badge.icon { line += "  [\(icon)]" }
            // A muted node counts in place and gives its parents nothing (DESIGN §2).
            if let mute = shown.mutes.first(where: { $0.path == badge.path }) {
                line += "  \(dim)" + (mute.until.map { "snoozed until \($0.formatted(.iso8601))" } ?? "muted") + "\(reset)"
            }
            lines.append(line)
        }
        let body = lines.joined(separator: "\n") + "\n"
        // In a terminal: home, the frame, and clear what is left below it.
        return interactive ? "\u{1B}[H\u{1B}[2J" + body : body + "\n"
    }

    private static func describe(_ state: RedDotClient.ConnectionState) -> String {
        switch state {
        case .idle: "stopped"
        case .connecting: "connecting"
        case .streaming: "live"
        case .polling: "polling"
        case .waiting(let error): "retrying (\(error.description))"
        case .failed(let error): "refused (\(error.description))"
        }
    }

    private static func write(_ text: String) {
        FileHandle.standardOutput.write(Data(text.utf8))
    }
}

/// A value behind a lock, shared between callbacks.
final class Locked<Value: Sendable>: Sendable {
    private let value: Mutex<Value>

    init(_ value: Value) {
        self.value = Mutex(value)
    }

    func get() -> Value { value.withLock { $0 } }
    func set(_ new: Value) { value.withLock { $0 = new } }
}
