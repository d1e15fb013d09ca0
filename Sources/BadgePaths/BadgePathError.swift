/// Why a text is not a valid ``BadgePath``.
///
/// Every case keeps the offending path (as given, possibly very long or hostile); ``description``
/// quotes it safely and names the rule it broke. Label positions count from 1, `root` being
/// label 1, so in `root..a` the empty label is at position 2.
public enum BadgePathError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The path is the empty string.
    case empty
    /// The first label is not `root`.
    case mustStartWithRoot(path: String)
    /// A label between two dots (or after a trailing dot) is empty.
    case emptyLabel(path: String, position: Int)
    /// A label holds a character outside `[A-Za-z0-9_]`.
    case invalidCharacter(path: String, position: Int, label: String, character: Unicode.Scalar)
    /// A label is longer than ``BadgePath/maximumLabelLength``; `length` counts Unicode scalars.
    case labelTooLong(path: String, position: Int, length: Int)
    /// The path has more than ``BadgePath/maximumDepth`` labels after `root`.
    case tooDeep(path: String, depth: Int)

    /// A message a producer or a user can act on, naming the path and the rule.
    public var description: String {
        switch self {
        case .empty:
            return "path is empty; it must start with 'root'"
        case .mustStartWithRoot(let path):
            return "path \(Quoting.quoted(path)) must start with 'root'"
        case .emptyLabel(let path, let position):
            return "path \(Quoting.quoted(path)) has an empty label at position \(position)"
        case .invalidCharacter(let path, let position, let label, let character):
            return "path \(Quoting.quoted(path)) has the character \(Quoting.quoted(String(character))) "
                + "at position \(position) (label \(Quoting.quoted(label))); "
                + "labels may contain only A-Z, a-z, 0-9 and _"
        case .labelTooLong(let path, let position, let length):
            return "path \(Quoting.quoted(path)) has a label of \(length) characters at position \(position); "
                + "the most is \(BadgePath.maximumLabelLength)"
        case .tooDeep(let path, let depth):
            return "path \(Quoting.quoted(path)) has \(depth) labels after root; the most is \(BadgePath.maximumDepth)"
        }
    }
}
