/// The fuzz targets: each reads arbitrary bytes with one of RedDot's parsers of untrusted input
/// and checks invariants of what it read (not just that nothing trapped). A broken invariant is
/// reported by ``FuzzFailure/fail(_:_:)``, which traps so that libFuzzer keeps the input.
enum FuzzTarget: String, CaseIterable, Sendable {
    /// An event record: decode, re-encode, decode again; map with rules; apply to the model.
    /// An input that starts with `rules:` is a rules file instead.
    case events
    /// A badge path: the 1-pass and the rule-by-rule validators agree; a valid path round-trips.
    case paths
    /// The query parameters and headers of the query service (wait, since, depth, paths,
    /// If-None-Match, Last-Event-ID, the bearer token).
    case http
    /// A migration file: the first line is its name, the rest its bytes.
    case migrations
    /// A Server-Sent Events body as RedDotClient reads it (the first byte picks a chunk size).
    case sse
    /// An HTTP/1.1 response as RedDotClient's own transport reads it (the first byte picks a
    /// chunk size).
    case response
    /// RedDotClient's offline cache file (the tree and the queued taps), read at start.
    case cache
    /// A change-feed record as `reddot push` and `reddot webhooks` read it, a webhook
    /// subscription and a push device as the API takes them (the first byte picks).
    case hooks
    /// The change log's node list as the change feed and the streams read it, or (after
    /// `notify:`) a change notification's payload: the byte scanner and the JSON parser agree.
    case changelog

    /// Runs the target on one input.
    func run(_ bytes: [UInt8]) {
        switch self {
        case .events: EventsFuzzTarget.run(bytes)
        case .paths: PathsFuzzTarget.run(bytes)
        case .http: HTTPFuzzTarget.run(bytes)
        case .migrations: MigrationsFuzzTarget.run(bytes)
        case .sse: ServerSentEventsFuzzTarget.run(bytes)
        case .response: HTTPResponseFuzzTarget.run(bytes)
        case .cache: CacheFileFuzzTarget.run(bytes)
        case .hooks: HooksFuzzTarget.run(bytes)
        case .changelog: ChangeLogFuzzTarget.run(bytes)
        }
    }

    /// The names, for messages.
    static var names: String { allCases.map(\.rawValue).joined(separator: ", ") }
}

/// A broken invariant: the message goes to standard error, then the process traps, which is
/// how libFuzzer learns of it and saves the reproducer (this harness is not library code).
enum FuzzFailure {
    static func fail(_ target: FuzzTarget, _ message: String, file: StaticString = #fileID, line: UInt = #line) -> Never {
        fatalError("reddot-fuzz \(target.rawValue): invariant broken: \(message)", file: file, line: line)
    }

    /// Fails unless `condition` holds.
    static func check(
        _ condition: @autoclosure () -> Bool, _ target: FuzzTarget, _ message: @autoclosure () -> String,
        file: StaticString = #fileID, line: UInt = #line
    ) {
        if !condition() { fail(target, message(), file: file, line: line) }
    }

    /// Fails when a message meant for people spans lines or is empty (messages quote untrusted
    /// text, escaped).
    static func checkMessage(_ message: String, _ target: FuzzTarget, file: StaticString = #fileID, line: UInt = #line) {
        check(!message.isEmpty, target, "an empty message", file: file, line: line)
        check(
            !message.unicodeScalars.contains { $0 == "\n" || $0 == "\r" }, target, "a message spans lines: \(message.debugDescription)",
            file: file, line: line)
    }
}
