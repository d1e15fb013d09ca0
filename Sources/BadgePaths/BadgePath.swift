/// A validated badge path: `root` followed by zero or more labels joined by `.`, such as
/// `root.chat.c7`.
///
/// A label is 1–64 characters of `[A-Za-z0-9_]`, and a path has at most 16 labels after `root`
/// (DESIGN §2). A value of this type is always valid, so it can be bound as a PostgreSQL `ltree`
/// parameter without further checks; it never holds an `lquery` or `ltxtquery` operator.
///
/// Paths order label by label in byte order, a prefix first: the order of PostgreSQL's `ltree`.
public struct BadgePath: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The path of the root node, `root`: its aggregate is the app-icon total.
    public static let root = BadgePath(trustedLabels: ["root"])
    /// The most labels a path may have after `root`.
    public static let maximumDepth = 16
    /// The most characters in one label.
    public static let maximumLabelLength = 64

    /// The path as text, such as `root.chat.c7`.
    public let rawValue: String
    /// How many labels follow `root`: 0 for `root` itself.
    public let depth: Int

    /// The labels, `root` first: `["root", "chat", "c7"]` (split from ``rawValue`` on each use).
    public var labels: [String] {
        rawValue.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Validates `text` as a path.
    ///
    /// - Throws: ``BadgePathError`` naming the path and the first rule it breaks.
    public init(validating text: String) throws(BadgePathError) {
        // Almost every path is valid: one pass over the bytes accepts it. Anything else takes the
        // path below, which names the first rule broken.
        if let labelCount = Self.labelCountOfValidPath(text) {
            self.init(rawValue: text, depth: labelCount - 1)
            return
        }
        self.init(trustedLabels: try Self.checkedLabels(text))
    }

    /// The labels of `text`, checked rule by rule.
    ///
    /// - Throws: ``BadgePathError`` naming the path and the first rule it breaks.
    package static func checkedLabels(_ text: String) throws(BadgePathError) -> [String] {
        if text.isEmpty { throw .empty }
        let parts = text.unicodeScalars.split(separator: ".", omittingEmptySubsequences: false)
        guard let first = parts.first, String(first) == "root" else {
            throw .mustStartWithRoot(path: text)
        }
        if parts.count - 1 > Self.maximumDepth {
            throw .tooDeep(path: text, depth: parts.count - 1)
        }
        var labels: [String] = []
        labels.reserveCapacity(parts.count)
        for (index, part) in parts.enumerated() {
            let label = String(part)
            try Self.check(label: label, position: index + 1, path: text)
            labels.append(label)
        }
        return labels
    }

    /// How many labels `text` has (`root` included) if it is a valid path, checked in one pass
    /// over its UTF-8 bytes; nil if anything is off (the caller then finds out what).
    package static func labelCountOfValidPath(_ text: String) -> Int? {
        let bytes = text.utf8
        var labelCount = 1
        var labelLength = 0
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "."):
                if labelLength == 0 { return nil }
                labelCount += 1
                labelLength = 0
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "_"):
                labelLength += 1
                if labelLength > maximumLabelLength { return nil }
            default:
                return nil
            }
        }
        guard labelLength > 0, labelCount - 1 <= maximumDepth, bytes.starts(with: "root".utf8),
            bytes.count == 4 || bytes[bytes.index(bytes.startIndex, offsetBy: 4)] == UInt8(ascii: ".")
        else { return nil }
        return labelCount
    }

    /// A valid path's text and depth.
    private init(rawValue: String, depth: Int) {
        self.rawValue = rawValue
        self.depth = depth
    }

    /// A path from labels that are known to be valid.
    package init(trustedLabels: [String]) {
        self.depth = trustedLabels.count - 1
        self.rawValue = trustedLabels.joined(separator: ".")
    }

    /// Checks one label; `position` counts from 1 with `root` at 1.
    package static func check(label: String, position: Int, path: String) throws(BadgePathError) {
        if label.isEmpty { throw .emptyLabel(path: path, position: position) }
        for scalar in label.unicodeScalars where !isLabelScalar(scalar) {
            throw .invalidCharacter(path: path, position: position, label: label, character: scalar)
        }
        let length = label.utf8.count
        if length > maximumLabelLength {
            throw .labelTooLong(path: path, position: position, length: length)
        }
    }

    /// Whether `scalar` may appear in a label: `A-Z`, `a-z`, `0-9` or `_`.
    package static func isLabelScalar(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar {
        case "A"..."Z", "a"..."z", "0"..."9", "_": return true
        default: return false
        }
    }

    /// The parent node's path; `nil` for `root`.
    public var parent: BadgePath? {
        guard depth > 0, let dot = rawValue.utf8.lastIndex(of: UInt8(ascii: ".")) else { return nil }
        return BadgePath(rawValue: String(rawValue[..<dot]), depth: depth - 1)
    }

    /// Every ancestor, `root` first and the parent last; empty for `root`. Excludes the path itself.
    public var ancestors: [BadgePath] {
        var ancestors: [BadgePath] = []
        ancestors.reserveCapacity(depth)
        for dot in rawValue.utf8.indices where rawValue.utf8[dot] == UInt8(ascii: ".") {
            ancestors.append(BadgePath(rawValue: String(rawValue[..<dot]), depth: ancestors.count))
        }
        return ancestors
    }

    /// The child path with one more label.
    ///
    /// - Throws: ``BadgePathError`` if `label` is not a valid label or the result would be too deep.
    public func appending(label: String) throws(BadgePathError) -> BadgePath {
        let candidate = rawValue + "." + label
        try Self.check(label: label, position: depth + 2, path: candidate)
        if depth + 1 > Self.maximumDepth {
            throw .tooDeep(path: candidate, depth: depth + 1)
        }
        return BadgePath(rawValue: candidate, depth: depth + 1)
    }

    /// Whether this path is `other` or one of its descendants (`ltree`'s `<@`).
    public func isWithin(_ other: BadgePath) -> Bool {
        if other.depth > depth { return false }
        if other.depth == depth { return rawValue == other.rawValue }
        // Paths are ASCII, so String's prefix test and order are byte-wise (and fast).
        return rawValue.hasPrefix(other.rawValue)
            && rawValue.utf8.dropFirst(other.rawValue.utf8.count).first == UInt8(ascii: ".")
    }

    /// The path as text.
    public var description: String { rawValue }

    /// Equal when the texts are equal.
    public static func == (lhs: BadgePath, rhs: BadgePath) -> Bool { lhs.rawValue == rhs.rawValue }

    /// Hashes the text.
    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }

    /// Label by label in byte order, a prefix first (PostgreSQL `ltree` order). Because `.` sorts
    /// below every label character, this is the byte order of the texts.
    public static func < (lhs: BadgePath, rhs: BadgePath) -> Bool {
        lhs.rawValue < rhs.rawValue
    }
}

extension BadgePath: Codable {
    /// Decodes a path from a single string and validates it.
    ///
    /// - Throws: `DecodingError.dataCorrupted` with the ``BadgePathError`` message.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        do {
            self = try BadgePath(validating: text)
        } catch {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: error.description)
        }
    }

    /// Encodes the path as a single string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}
