import BadgeCore
import BadgeStore
import NIOCore

/// The tree answers and a stream's events written straight into a buffer, in the same shape
/// (and key order) as `JSONEncoder` with sorted keys gives: the hot path of every read, where
/// Foundation's encoder cost more than the database query, and of every stream update.
enum TreeJSON {
    /// `{"mutes": […], "tree": …, "user": …, "version": …}` and a newline.
    static func encode(_ answer: UserBadgeTree) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(256 + 96 * nodeCount(answer.tree) + 64 * answer.mutes.count)
        buffer.writeStaticString("{\"mutes\":")
        write(answer.mutes, into: &buffer)
        buffer.writeStaticString(",\"tree\":")
        if let tree = answer.tree { write(tree, into: &buffer) } else { buffer.writeStaticString("null") }
        buffer.writeStaticString(",\"user\":")
        writeString(answer.user.rawValue, into: &buffer)
        buffer.writeStaticString(",\"version\":")
        buffer.writeString(String(answer.version))
        buffer.writeStaticString("}\n")
        return buffer
    }

    /// A stream's change event: `{"changed": […], "mutes": […], "user": …, "version": …}` (no
    /// `mutes` when they did not change) and a newline. Per stream and version, the hot path of
    /// streams (Foundation's encoder took about a tenth of a serve process under a dense load).
    static func encode(_ change: TreeChange) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(128 + 112 * change.changed.count + 64 * (change.mutes?.count ?? 0))
        buffer.writeStaticString("{\"changed\":[")
        for (index, node) in change.changed.enumerated() {
            if index > 0 { buffer.writeStaticString(",") }
            write(node, into: &buffer)
        }
        buffer.writeStaticString("]")
        if let mutes = change.mutes {
            buffer.writeStaticString(",\"mutes\":")
            write(mutes, into: &buffer)
        }
        buffer.writeStaticString(",\"user\":")
        writeString(change.user.rawValue, into: &buffer)
        buffer.writeStaticString(",\"version\":")
        buffer.writeString(String(change.version))
        buffer.writeStaticString("}\n")
        return buffer
    }

    /// `[{"path": …, "until": …}, …]`.
    private static func write(_ mutes: [MutedNode], into buffer: inout ByteBuffer) {
        buffer.writeStaticString("[")
        for (index, mute) in mutes.enumerated() {
            buffer.writeStaticString(index == 0 ? "{\"path\":" : ",{\"path\":")
            writePlain(mute.path.rawValue, into: &buffer)
            buffer.writeStaticString(",\"until\":")
            if let until = mute.until { writePlain(until.rfc3339, into: &buffer) } else { buffer.writeStaticString("null") }
            buffer.writeStaticString("}")
        }
        buffer.writeStaticString("]")
    }

    /// `{"count": …, "icon": …, "path": …, "shown": …, "text": …, "unseen": …}`.
    static func write(_ node: FlatNode, into buffer: inout ByteBuffer) {
        buffer.writeStaticString("{")
        writeFields(
            count: node.count, icon: node.icon, path: node.path, shown: node.shown, text: node.text, unseen: node.unseen, into: &buffer)
    }

    private static func nodeCount(_ node: BadgeNode?) -> Int {
        guard let node else { return 0 }
        return 1 + node.children.reduce(0) { $0 + nodeCount($1) }
    }

    /// `{"children": […], "count": …, "icon": …, "path": …, "shown": …, "text": …, "unseen": …}`.
    static func write(_ node: BadgeNode, into buffer: inout ByteBuffer) {
        buffer.writeStaticString("{\"children\":[")
        for (index, child) in node.children.enumerated() {
            if index > 0 { buffer.writeStaticString(",") }
            write(child, into: &buffer)
        }
        buffer.writeStaticString("],")
        writeFields(
            count: node.count, icon: node.icon, path: node.path, shown: node.shown, text: node.text, unseen: node.unseen, into: &buffer)
    }

    /// A node's fields after its opening (and its children): `"count": …, "icon": …, "path": …,
    /// "shown": …, "text": …, "unseen": …}`.
    private static func writeFields(
        count: Int64, icon: BadgeIcon?, path: BadgePath, shown: Bool, text: String?, unseen: Int64, into buffer: inout ByteBuffer
    ) {
        buffer.writeStaticString("\"count\":")
        buffer.writeString(String(count))
        buffer.writeStaticString(",\"icon\":")
        // Icons ([a-z0-9_-]) and paths ([A-Za-z0-9_.]) never need escaping.
        if let icon { writePlain(icon.rawValue, into: &buffer) } else { buffer.writeStaticString("null") }
        buffer.writeStaticString(",\"path\":")
        writePlain(path.rawValue, into: &buffer)
        buffer.writeStaticString(shown ? ",\"shown\":true,\"text\":" : ",\"shown\":false,\"text\":")
        if let text { writeString(text, into: &buffer) } else { buffer.writeStaticString("null") }
        buffer.writeStaticString(",\"unseen\":")
        buffer.writeString(String(unseen))
        buffer.writeStaticString("}")
    }

    /// A JSON string of text that holds nothing to escape.
    private static func writePlain(_ text: String, into buffer: inout ByteBuffer) {
        buffer.writeStaticString("\"")
        buffer.writeString(text)
        buffer.writeStaticString("\"")
    }

    /// A JSON string: `"` and `\` escaped, control characters as `\u00XX`; everything else as is
    /// (user ids are printable ASCII; paths, icons and texts narrower still).
    static func writeString(_ text: String, into buffer: inout ByteBuffer) {
        buffer.writeStaticString("\"")
        let special: (UInt8) -> Bool = { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }
        let needsEscaping = text.utf8.withContiguousStorageIfAvailable { $0.contains(where: special) } ?? text.utf8.contains(where: special)
        if !needsEscaping {
            buffer.writeString(text)
        } else {
            let hex = Array("0123456789abcdef".utf8)
            for byte in text.utf8 {
                switch byte {
                case UInt8(ascii: "\""): buffer.writeStaticString("\\\"")
                case UInt8(ascii: "\\"): buffer.writeStaticString("\\\\")
                case 0x0A: buffer.writeStaticString("\\n")
                case 0x0D: buffer.writeStaticString("\\r")
                case 0x09: buffer.writeStaticString("\\t")
                case ..<0x20: buffer.writeBytes([UInt8(ascii: "\\"), UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]])
                default: buffer.writeInteger(byte)
                }
            }
        }
        buffer.writeStaticString("\"")
    }
}
