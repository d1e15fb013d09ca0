/// The change log's record of the nodes a version changed could not be read.
public struct ChangeLogFormatError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What was wrong, in a sentence.
    public let description: String

    init(_ description: String) {
        self.description = description
    }

    /// The elements of the JSON array `text`, one of the log's `what` ("nodes").
    static func array(_ text: String, of what: String) throws(ChangeLogFormatError) -> [JSONValue] {
        let value: JSONValue
        do {
            value = try JSONParser.parse(text.utf8)
        } catch {
            throw ChangeLogFormatError("the logged \(what) are not JSON: \(error)")
        }
        guard case .array(let entries) = value else { throw ChangeLogFormatError("the logged \(what) are not an array") }
        return entries
    }
}

extension OwnLayerChange.Node {
    /// The nodes of one logged version, read from the text the change log stores
    /// (`badge_change.nodes`): a JSON array of `[path, before, after]`, each aggregate an object
    /// `{"count": …, "icon": …, "unseen": …}` or `null`. Reading it here rather than in SQL keeps
    /// the change feed's work out of the database (about 70 µs a record there, most of the feed's
    /// cost). Safe on any text.
    ///
    /// The form PostgreSQL prints is read straight from its bytes (`LoggedNodeScanner`); any
    /// other text goes through the JSON parser, which reads every JSON spelling of the same
    /// nodes and says what is wrong with the rest. Every change feed record and every stream
    /// update reads one of these: through the parser alone it was about 4.5% of the services'
    /// CPU at 20,000 events/s (`perf`, BENCHMARKS.md).
    ///
    /// - Throws: ``ChangeLogFormatError`` for anything else: the log is the rollup's own output, so
    ///   this means a bug or a damaged row.
    public static func decodeLog(_ text: String) throws(ChangeLogFormatError) -> [OwnLayerChange.Node] {
        if let nodes = scanLog(text) { return nodes }
        return try decodeParsedLog(text)
    }

    /// `decodeLog` by `LoggedNodeScanner` alone: nil where the text is not in its form.
    package static func scanLog(_ text: String) -> [OwnLayerChange.Node]? {
        var text = text
        return text.withUTF8 { bytes in
            var scanner = LoggedNodeScanner(bytes: bytes)
            return scanner.nodes()
        }
    }

    /// `decodeLog` through the JSON parser, for any text.
    package static func decodeParsedLog(_ text: String) throws(ChangeLogFormatError) -> [OwnLayerChange.Node] {
        let entries = try ChangeLogFormatError.array(text, of: "nodes")
        var nodes: [OwnLayerChange.Node] = []
        nodes.reserveCapacity(entries.count)
        for entry in entries {
            guard case .array(let parts) = entry, parts.count == 3, case .string(let name) = parts[0] else {
                throw ChangeLogFormatError("a logged node is not [path, before, after]")
            }
            let path: BadgePath
            do {
                path = try BadgePath(validating: name)
            } catch {
                throw ChangeLogFormatError("a logged node's path is not a badge path: \(error)")
            }
            nodes.append(
                OwnLayerChange.Node(path: path, before: try aggregate(parts[1], at: name), after: try aggregate(parts[2], at: name)))
        }
        return nodes
    }

    private static func aggregate(_ value: JSONValue, at path: String) throws(ChangeLogFormatError) -> BadgeAggregate? {
        switch value {
        case .null:
            return nil
        case .object(let members):
            guard case .integer(let count)? = members["count"], count >= 0,
                case .integer(let unseen)? = members["unseen"], unseen >= 0
            else {
                throw ChangeLogFormatError("the logged aggregate of \(Quoting.quoted(path)) has no count and unseen of 0 or more")
            }
            switch members["icon"] {
            case nil, .null?:
                return BadgeAggregate(count: count, unseen: unseen)
            case .string(let name)?:
                guard let icon = try? BadgeIcon(validating: name) else {
                    throw ChangeLogFormatError("the logged icon of \(Quoting.quoted(path)) is not an icon")
                }
                return BadgeAggregate(count: count, icon: icon, unseen: unseen)
            default:
                throw ChangeLogFormatError("the logged icon of \(Quoting.quoted(path)) is not a string or null")
            }
        default:
            throw ChangeLogFormatError("the logged aggregate of \(Quoting.quoted(path)) is not an object or null")
        }
    }
}

/// The change log's nodes read from the bytes of the form PostgreSQL prints them in
/// (`[["root", {"icon": null, "count": 3, "unseen": 1}, null], …]`; any whitespace between tokens,
/// the members in any order): strings without escapes, counts as plain integers of `Int64`,
/// each aggregate with its count and unseen and at most an icon (`PlainJSONCursor`). At anything
/// else (an escape, a number in another spelling, another key, a repeated one, a path or an
/// icon that is not valid, text after the array) it reads nothing, and `decodeLog` hands the
/// text to the JSON parser, which decides. So where it reads nodes, they are the parser's.
struct LoggedNodeScanner {
    private var cursor: PlainJSONCursor

    init(bytes: UnsafeBufferPointer<UInt8>) {
        cursor = PlainJSONCursor(bytes)
    }

    /// The nodes, or nil: not this form.
    mutating func nodes() -> [OwnLayerChange.Node]? {
        var nodes: [OwnLayerChange.Node] = []
        guard cursor.take(UInt8(ascii: "[")) else { return nil }
        if !cursor.take(UInt8(ascii: "]")) {
            repeat {
                guard let node = node() else { return nil }
                nodes.append(node)
            } while cursor.take(UInt8(ascii: ","))
            guard cursor.take(UInt8(ascii: "]")) else { return nil }
        }
        return cursor.atEnd() ? nodes : nil
    }

    private mutating func node() -> OwnLayerChange.Node? {
        guard cursor.take(UInt8(ascii: "[")), let name = cursor.string(), let path = try? BadgePath(validating: name),
            cursor.take(UInt8(ascii: ",")), case .some(let before) = aggregate(),
            cursor.take(UInt8(ascii: ",")), case .some(let after) = aggregate(),
            cursor.take(UInt8(ascii: "]"))
        else { return nil }
        return OwnLayerChange.Node(path: path, before: before, after: after)
    }

    /// `.some(nil)` for `null`, `.some(aggregate)` for an object of the form, nil for anything else.
    private mutating func aggregate() -> BadgeAggregate?? {
        if cursor.takeNull() { return .some(nil) }
        guard cursor.take(UInt8(ascii: "{")) else { return nil }
        var count: Int64?
        var unseen: Int64?
        var icon: BadgeIcon??
        repeat {
            guard let key = cursor.string(), cursor.take(UInt8(ascii: ":")) else { return nil }
            switch key {
            case "count":
                guard count == nil, let value = cursor.integer() else { return nil }
                count = value
            case "unseen":
                guard unseen == nil, let value = cursor.integer() else { return nil }
                unseen = value
            case "icon":
                guard icon == nil else { return nil }
                if cursor.takeNull() {
                    icon = .some(nil)
                } else {
                    guard let name = cursor.string(), let value = try? BadgeIcon(validating: name) else { return nil }
                    icon = .some(value)
                }
            default:
                return nil
            }
        } while cursor.take(UInt8(ascii: ","))
        guard cursor.take(UInt8(ascii: "}")), let count, let unseen else { return nil }
        return .some(BadgeAggregate(count: count, icon: icon ?? nil, unseen: unseen))
    }
}

extension OwnLayerChange {
    /// The ids of the broadcasts a logged version dismissed (or, with `what` "seens", marked
    /// seen), read from the JSON array of integers the change log's readers select (`[3, 7]`).
    /// Safe on any text.
    ///
    /// - Throws: ``ChangeLogFormatError`` for anything else.
    public static func decodeBroadcastLog(_ text: String, of what: String = "dismissals") throws(ChangeLogFormatError) -> [Int64] {
        let entries = try ChangeLogFormatError.array(text, of: what)
        var ids: [Int64] = []
        ids.reserveCapacity(entries.count)
        for entry in entries {
            guard case .integer(let id) = entry else { throw ChangeLogFormatError("one of the logged \(what) is not a broadcast id") }
            ids.append(id)
        }
        return ids
    }
}
