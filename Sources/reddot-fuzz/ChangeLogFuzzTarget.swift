import BadgeCore
import BadgeStore

/// The change log's nodes as the change feed and the streams read them
/// (`OwnLayerChange.Node.decodeLog`): what the byte scanner reads, the JSON parser reads the same;
/// what it leaves, the parser reads or refuses with a one-line sentence; and nodes it read come
/// back the same from PostgreSQL's printing of them, by the scanner itself. An input that starts
/// with `notify:` is the payload of a change notification instead (`ChangeNotification`): its
/// byte scanner and `JSONSerialization` read the same.
enum ChangeLogFuzzTarget {
    static let target = FuzzTarget.changelog

    static func run(_ bytes: [UInt8]) {
        let text = String(decoding: bytes, as: UTF8.self)
        if text.hasPrefix("notify:") {
            let payload = String(text.dropFirst("notify:".count))
            let scanned = ChangeNotification.scanned(payload)
            let parsed = ChangeNotification.parsed(payload)
            FuzzFailure.check(scanned == nil || scanned == parsed, target, "the scanner reads \(String(describing: scanned)), JSONSerialization \(String(describing: parsed))")
            FuzzFailure.check(ChangeNotification(payload: payload) == parsed, target, "the payload is read otherwise than by JSONSerialization")
            return
        }
        let scanned = OwnLayerChange.Node.scanLog(text)
        let parsed = Result { () throws(ChangeLogFormatError) in try OwnLayerChange.Node.decodeParsedLog(text) }
        let read = Result { () throws(ChangeLogFormatError) in try OwnLayerChange.Node.decodeLog(text) }
        switch (read, parsed) {
        case (.success(let nodes), .success(let parsedNodes)):
            FuzzFailure.check(nodes == parsedNodes, target, "decodeLog and the parser read different nodes")
        case (.failure(let error), .failure(let parsedError)):
            FuzzFailure.check(error == parsedError, target, "decodeLog and the parser refuse with different sentences")
            FuzzFailure.checkMessage(error.description, target)
        case (.success, .failure(let error)):
            FuzzFailure.fail(target, "decodeLog reads what the parser refuses: \(error)")
        case (.failure(let error), .success):
            FuzzFailure.fail(target, "decodeLog refuses what the parser reads: \(error)")
        }
        if let scanned {
            FuzzFailure.check((try? parsed.get()) == scanned, target, "the scanner reads nodes the parser does not")
            FuzzFailure.check(OwnLayerChange.Node.scanLog(printed(scanned)) == scanned, target, "the printed nodes do not scan back")
        }
    }

    /// The nodes as PostgreSQL prints the log's jsonb: keys in its order, spaces after `:` and `,`.
    static func printed(_ nodes: [OwnLayerChange.Node]) -> String {
        func aggregate(_ value: BadgeAggregate?) -> String {
            guard let value else { return "null" }
            let icon = value.icon.map { "\"\($0.rawValue)\"" } ?? "null"
            return "{\"icon\": \(icon), \"count\": \(value.count), \"unseen\": \(value.unseen)}"
        }
        return "[" + nodes.map { "[\"\($0.path.rawValue)\", \(aggregate($0.before)), \(aggregate($0.after))]" }.joined(separator: ", ") + "]"
    }
}
