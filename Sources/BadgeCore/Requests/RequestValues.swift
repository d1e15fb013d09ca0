import Foundation

/// The values of the query service's query parameters and headers, read from untrusted text
/// (DESIGN §6). Pure functions without I/O, so that they can be fuzzed on their own: whatever the
/// text, each returns a value within its documented range or throws ``RequestValueError``; none
/// traps.
public enum RequestValues {
    /// The most paths one `?paths=` may name.
    public static let maximumPaths = 100

    /// The longest duration ``duration(_:)`` reads: longer texts are not a duration (this keeps
    /// every conversion to `Duration` exact and far from `Int64`'s limits).
    public static let maximumDuration = Duration.seconds(1_000_000_000)

    /// A `path` parameter (or one item of `paths`).
    ///
    /// - Throws: `invalid_path` with the ``BadgePathError`` message.
    public static func path(_ text: some StringProtocol) throws(RequestValueError) -> BadgePath {
        do {
            return try BadgePath(validating: String(text))
        } catch {
            throw RequestValueError("invalid_path", "\(error)")
        }
    }

    /// `?depth=N`: levels below the path, 0 to ``BadgePath/maximumDepth``.
    ///
    /// - Throws: `invalid_depth`.
    public static func depth(_ text: some StringProtocol) throws(RequestValueError) -> Int {
        guard let value = Int(String(text)), (0...BadgePath.maximumDepth).contains(value) else {
            throw RequestValueError(
                "invalid_depth", "depth must be an integer from 0 to \(BadgePath.maximumDepth), not \(Quoting.quoted(text.prefix(40)))")
        }
        return value
    }

    /// `?paths=a,b`: 1 to ``maximumPaths`` comma-separated paths, in order (an empty item is an
    /// invalid path).
    ///
    /// - Throws: `invalid_query` for too many items, `invalid_path` for the first invalid one.
    public static func paths(_ list: some StringProtocol) throws(RequestValueError) -> [BadgePath] {
        let items = list.splitScalars(",", omittingEmptySubsequences: false)
        guard items.count <= maximumPaths else {
            throw RequestValueError("invalid_query", "paths names \(items.count) paths; at most \(maximumPaths)")
        }
        var paths: [BadgePath] = []
        paths.reserveCapacity(items.count)
        for item in items { paths.append(try path(item)) }
        return paths
    }

    /// `?wait=30s`: a ``duration(_:)`` of at most `maximum`.
    ///
    /// - Throws: `invalid_wait` for anything else (a huge number included).
    public static func wait(_ text: some StringProtocol, maximum: Duration) throws(RequestValueError) -> Duration {
        guard let wait = duration(String(text)), wait <= maximum else {
            throw RequestValueError(
                "invalid_wait", "wait must be a duration such as 30s or 500ms, at most \(maximum), not \(Quoting.quoted(text.prefix(40)))")
        }
        return wait
    }

    /// `30s`, `500ms`, `2m`, or a plain number of seconds (digits and a `.`), rounded to the
    /// millisecond; nil if not one of those, or longer than ``maximumDuration``.
    public static func duration(_ text: String) -> Duration? {
        let units: [(suffix: String, scale: Double)] = [("ms", 0.001), ("s", 1), ("m", 60)]
        var number = Substring(text)
        var scale = 1.0
        for unit in units where text.hasSuffix(unit.suffix) {
            number = text.dropLast(unit.suffix.count)
            scale = unit.scale
            break
        }
        guard !number.isEmpty, number.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }), let value = Double(number),
            value.isFinite, value >= 0
        else { return nil }
        // Checked as a Double before any conversion: `Int64(1e30)` traps.
        let milliseconds = (value * scale * 1000).rounded()
        let limit = Double(maximumDuration.components.seconds) * 1000
        guard milliseconds.isFinite, milliseconds <= limit else { return nil }
        return .milliseconds(Int64(milliseconds))
    }

    /// `?since=VERSION`: a version, an integer ≥ 0.
    ///
    /// - Throws: `invalid_since`.
    public static func since(_ text: some StringProtocol) throws(RequestValueError) -> Int64 {
        guard let value = Int64(String(text)), value >= 0 else {
            throw RequestValueError("invalid_since", "since must be a version (an integer ≥ 0), not \(Quoting.quoted(text.prefix(40)))")
        }
        return value
    }

    /// The version a stream resumes after: `Last-Event-ID` (sent by a reconnecting browser) or
    /// `?since=`, each a version with blanks around allowed; both are checked when both are given,
    /// and the header wins. Nil when neither is given.
    ///
    /// - Throws: `invalid_since`.
    public static func resumeVersion(since: String?, lastEventID: String?) throws(RequestValueError) -> Int64? {
        var version: Int64?
        for text in [since, lastEventID].compactMap({ $0 }) {
            guard let value = Int64(text.trimmingCharacters(in: .whitespaces)), value >= 0 else {
                throw RequestValueError("invalid_since", "Last-Event-ID (or since) must be a version, not \(Quoting.quoted(text.prefix(40)))")
            }
            version = value
        }
        return version
    }
}

extension Substring {
    /// Without leading and trailing spaces and tabs.
    ///
    /// By Unicode scalars, as HTTP reads header bytes: a blank followed by a combining mark is one
    /// `Character` that is not a blank, yet the blank is still one.
    var trimmingBlanks: Substring {
        let blank: (Unicode.Scalar) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = unicodeScalars.firstIndex(where: { !blank($0) }),
            let last = unicodeScalars.lastIndex(where: { !blank($0) })
        else {
            return self[endIndex...]
        }
        return Substring(unicodeScalars[first...last])
    }
}

extension StringProtocol {
    /// The parts between `separator`s, split by Unicode scalars: a separator followed by a
    /// combining mark still separates (`split` by `Character` would see one grapheme there).
    func splitScalars(
        _ separator: Unicode.Scalar, maxSplits: Int = .max, omittingEmptySubsequences: Bool = true
    ) -> [Substring] {
        Substring(self).unicodeScalars
            .split(separator: separator, maxSplits: maxSplits, omittingEmptySubsequences: omittingEmptySubsequences)
            .map(Substring.init)
    }
}
