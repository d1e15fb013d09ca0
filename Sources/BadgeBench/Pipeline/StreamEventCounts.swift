import BadgeCore
import Foundation

/// The leaf counts a stream event shows (`root.bench.pN` → N, with its count), from the event's
/// `data:`: a snapshot (`{"tree": …, "version": …}`) or a change (`{"changed": […],
/// "version": …}`), each node with its `path`, its `count` and, in a tree, its `children`.
///
/// The bench's stream client reads every event of every stream, and Foundation's
/// `JSONDecoder` took about a tenth of the bench process's CPU doing so at 20,000 events/s over
/// 200 users (`perf`, BENCHMARKS.md), time the machine then lacked for the services it measures.
/// So the event is read straight from its bytes when it is in the plain form the server writes
/// (`PlainJSONCursor`: strings without escapes, counts as digits), and any other text goes to
/// `JSONDecoder`, which also decides whether the event is readable at all. The two readers agree
/// on what both read (`StreamEventCountsTests`).
enum StreamEventCounts {
    /// The counts in document order, or nil when the event is not readable.
    static func read(_ data: [UInt8]) -> [(path: Int, count: Int64)]? {
        scanned(data) ?? decoded(data)
    }

    /// The counts as `JSONDecoder` reads them (nil: it refused the event).
    static func decoded(_ data: [UInt8]) -> [(path: Int, count: Int64)]? {
        guard let message = try? JSONDecoder().decode(Message.self, from: Data(data)) else { return nil }
        var counts: [(path: Int, count: Int64)] = []
        func visit(_ node: Node) {
            if let path = leafIndex(node.path) { counts.append((path, node.count)) }
            node.children?.forEach(visit)
        }
        if let tree = message.tree { visit(tree) }
        for node in message.changed ?? [] { visit(node) }
        return counts
    }

    /// The counts read from the bytes in the server's plain form; nil for any other text (a
    /// byte beyond ASCII, which `JSONDecoder` checks as UTF-8; an escape; a number that is not
    /// plain digits; a key given twice; nesting deeper than 64).
    static func scanned(_ data: [UInt8]) -> [(path: Int, count: Int64)]? {
        guard !data.contains(where: { $0 >= 0x80 }) else { return nil }
        return data.withUnsafeBufferPointer { bytes -> [(path: Int, count: Int64)]? in
            var cursor = PlainJSONCursor(bytes)
            // The tree's counts before the changed nodes', as `decoded` walks them.
            var tree: [(path: Int, count: Int64)] = [], changed: [(path: Int, count: Int64)] = []
            var seen = (version: false, tree: false, changed: false)
            guard cursor.take(UInt8(ascii: "{")) else { return nil }
            if !cursor.take(UInt8(ascii: "}")) {
                repeat {
                    guard let key = cursor.string(), cursor.take(UInt8(ascii: ":")) else { return nil }
                    switch key {
                    case "version":
                        guard !seen.version, cursor.integer() != nil else { return nil }
                        seen.version = true
                    case "tree":
                        guard !seen.tree else { return nil }
                        seen.tree = true
                        guard cursor.takeNull() || node(&cursor, into: &tree, depth: 1) else { return nil }
                    case "changed":
                        guard !seen.changed else { return nil }
                        seen.changed = true
                        guard cursor.takeNull() || nodes(&cursor, into: &changed, depth: 1) else { return nil }
                    default:
                        guard skipValue(&cursor, depth: 1) else { return nil }
                    }
                } while cursor.take(UInt8(ascii: ","))
                guard cursor.take(UInt8(ascii: "}")) else { return nil }
            }
            guard seen.version, cursor.atEnd() else { return nil }
            return tree + changed
        }
    }

    /// `root.bench.pN` → N.
    static func leafIndex(_ path: String) -> Int? {
        guard path.hasPrefix("root.bench.p") else { return nil }
        return Int(path.dropFirst(12))
    }

    private static let maximumDepth = 64

    /// An array of nodes.
    private static func nodes(_ cursor: inout PlainJSONCursor, into counts: inout [(path: Int, count: Int64)], depth: Int) -> Bool {
        guard depth < maximumDepth, cursor.take(UInt8(ascii: "[")) else { return false }
        if cursor.take(UInt8(ascii: "]")) { return true }
        repeat {
            guard node(&cursor, into: &counts, depth: depth + 1) else { return false }
        } while cursor.take(UInt8(ascii: ","))
        return cursor.take(UInt8(ascii: "]"))
    }

    /// A node: its own count (when it is a leaf of the bench) before its children's, as a walk
    /// of the decoded tree gives them.
    private static func node(_ cursor: inout PlainJSONCursor, into counts: inout [(path: Int, count: Int64)], depth: Int) -> Bool {
        guard depth < maximumDepth, cursor.take(UInt8(ascii: "{")) else { return false }
        var path: String?
        var count: Int64?
        var children: [(path: Int, count: Int64)]?
        if !cursor.take(UInt8(ascii: "}")) {
            repeat {
                guard let key = cursor.string(), cursor.take(UInt8(ascii: ":")) else { return false }
                switch key {
                case "path":
                    guard path == nil, let value = cursor.string() else { return false }
                    path = value
                case "count":
                    guard count == nil, let value = cursor.integer() else { return false }
                    count = value
                case "children":
                    guard children == nil else { return false }
                    var below: [(path: Int, count: Int64)] = []
                    guard cursor.takeNull() || nodes(&cursor, into: &below, depth: depth + 1) else { return false }
                    children = below
                default:
                    guard skipValue(&cursor, depth: depth + 1) else { return false }
                }
            } while cursor.take(UInt8(ascii: ","))
            guard cursor.take(UInt8(ascii: "}")) else { return false }
        }
        guard let path, let count else { return false }
        if let leaf = leafIndex(path) { counts.append((leaf, count)) }
        counts += children ?? []
        return true
    }

    /// Any value in the plain form: a string, digits, `null`, `true`, `false`, an array, an object.
    private static func skipValue(_ cursor: inout PlainJSONCursor, depth: Int) -> Bool {
        guard depth < maximumDepth else { return false }
        if cursor.takeNull() || cursor.boolean() != nil || cursor.integer() != nil || cursor.string() != nil { return true }
        if cursor.take(UInt8(ascii: "[")) {
            if cursor.take(UInt8(ascii: "]")) { return true }
            repeat {
                guard skipValue(&cursor, depth: depth + 1) else { return false }
            } while cursor.take(UInt8(ascii: ","))
            return cursor.take(UInt8(ascii: "]"))
        }
        if cursor.take(UInt8(ascii: "{")) {
            if cursor.take(UInt8(ascii: "}")) { return true }
            repeat {
                guard cursor.string() != nil, cursor.take(UInt8(ascii: ":")), skipValue(&cursor, depth: depth + 1) else { return false }
            } while cursor.take(UInt8(ascii: ","))
            return cursor.take(UInt8(ascii: "}"))
        }
        return false
    }

    private struct Message: Decodable {
        var version: Int64
        var tree: Node?
        var changed: [Node]?
    }

    private struct Node: Decodable {
        var path: String
        var count: Int64
        var children: [Node]?
    }
}
