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
    /// - Throws: ``ChangeLogFormatError`` for anything else: the log is the rollup's own output, so
    ///   this means a bug or a damaged row.
    public static func decodeLog(_ text: String) throws(ChangeLogFormatError) -> [OwnLayerChange.Node] {
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
