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
