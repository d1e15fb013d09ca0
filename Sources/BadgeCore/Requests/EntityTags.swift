/// An `If-None-Match` header, read once per request: its entity tags, weak ones (`W/"7"`) as
/// their strong form, since a version names one representation either way.
public struct EntityTags: Sendable, Hashable {
    /// The tags as sent (quotes kept), blanks around each removed, `W/` dropped.
    public var tags: [Substring]

    /// The tags of a header; nil without a header.
    public init?(_ header: String?) {
        guard let header else { return nil }
        tags = header.splitScalars(",").map { item in
            let tag = item.trimmingBlanks
            return tag.hasPrefix("W/\"") ? tag.dropFirst(2) : tag
        }
    }

    /// The entity tag of a version: the version in double quotes, `"7"`.
    public static func tag(_ version: Int64) -> String { "\"\(version)\"" }

    /// Whether it names `version`, or is `*`.
    public func matches(_ version: Int64) -> Bool {
        let tag = Self.tag(version)
        return tags.contains { $0 == "*" || $0 == tag }
    }

    /// The version of the first tag that is one (a quoted integer).
    public var firstVersion: Int64? {
        for tag in tags where tag.count >= 2 && tag.hasPrefix("\"") && tag.hasSuffix("\"") {
            if let version = Int64(tag.dropFirst().dropLast()) { return version }
        }
        return nil
    }
}

/// An `If-Match` header of an action, read strictly, as the API document states it:
/// `*`, or one entity tag this API gives (`"7"`, `W/"7"`: a version of up to 18 digits, no
/// leading zero), with blanks around it. Anything else is refused rather than guessed at.
public enum IfMatch: Sendable, Hashable {
    /// `*`: any version.
    case any
    /// One version.
    case version(Int64)

    /// The forms as the API document's pattern states them (a test keeps the two equal).
    public static let pattern = #"^[ \t]*(?:\*|(?:W/)?"(?:0|[1-9][0-9]{0,17})")[ \t]*$"#

    /// The header read; nil when it is not one of the forms above.
    public init?(_ header: String) {
        let text = header[...].trimmingBlanks
        if text == "*" {
            self = .any
            return
        }
        let tag = text.hasPrefix("W/") ? text.dropFirst(2) : text[...]
        guard tag.count >= 3, tag.first == "\"", tag.last == "\"" else { return nil }
        let digits = tag.dropFirst().dropLast()
        guard (1...18).contains(digits.count), digits.utf8.allSatisfy({ (0x30...0x39).contains($0) }), digits == "0" || digits.first != "0",
            let version = Int64(digits)
        else { return nil }
        self = .version(version)
    }
}
