import BadgeCore

/// The change feed's records as JSON (`deploy/schema/change.schema.json`), written by hand into
/// bytes (the Kafka value as it is sent): the feed writes one per version of every user, and
/// this is its hot path. (Built as a `String`, the appends were about half of the feed's time in
/// the process: BENCHMARKS.md.)
enum FeedPayload {
    /// A `user` record: one version of the user's own layer. `nodes` are the aggregates it
    /// changed, written in path order with the value after the change (a node without one no
    /// longer shows: count 0); `dismissedJSON`, `seenJSON` and `atJSON` are JSON as the database
    /// wrote them (arrays of the ids of the broadcasts dismissed and seen; the time); `mutes`,
    /// the user's muted nodes after the version when it changed them, is written as `"mutes"`
    /// only then.
    static func user(
        user: String, ownVersion: Int64, broadcastVersion: Int64, version: Int64, nodes: [OwnLayerChange.Node],
        dismissedJSON: String, seenJSON: String, root: BadgeAggregate, atJSON: String, mutes: [MutedNode]? = nil,
        display: BadgeDisplay
    ) -> [UInt8] {
        var json: [UInt8] = []
        json.reserveCapacity(256 + 96 * nodes.count)
        json.append(contentsOf: #"{"type":"user","user":"#.utf8)
        JSONText.appendString(user, to: &json)
        json.append(contentsOf: #","version":"#.utf8)
        JSONText.appendInteger(version, to: &json)
        // The log keeps own versions of 1 or more (a CHECK); no value read back traps here.
        json.append(contentsOf: #","previous_version":"#.utf8)
        JSONText.appendInteger(version == .min ? version : version - 1, to: &json)
        json.append(contentsOf: #","own_version":"#.utf8)
        JSONText.appendInteger(ownVersion, to: &json)
        json.append(contentsOf: #","broadcast_version":"#.utf8)
        JSONText.appendInteger(broadcastVersion, to: &json)
        json.append(contentsOf: #","changed":["#.utf8)
        let ordered = nodes.sorted { $0.path.rawValue.utf8.lexicographicallyPrecedes($1.path.rawValue.utf8) }
        for (index, node) in ordered.enumerated() {
            let count = node.after?.count ?? 0
            json.append(contentsOf: (index > 0 ? #",{"path":"# : #"{"path":"#).utf8)
            JSONText.appendString(node.path.rawValue, to: &json)
            json.append(contentsOf: (node.after == nil ? #","shown":false,"count":"# : #","shown":true,"count":"#).utf8)
            JSONText.appendInteger(count, to: &json)
            json.append(contentsOf: #","unseen":"#.utf8)
            JSONText.appendInteger(node.after?.unseen ?? 0, to: &json)
            json.append(contentsOf: #","text":"#.utf8)
            JSONText.appendString(display.text(for: count), orNullTo: &json)
            json.append(contentsOf: #","icon":"#.utf8)
            JSONText.appendString(node.after?.icon?.rawValue, orNullTo: &json)
            json.append(UInt8(ascii: "}"))
        }
        json.append(contentsOf: #"],"dismissed":"#.utf8)
        json.append(contentsOf: dismissedJSON.utf8)
        json.append(contentsOf: #","seen":"#.utf8)
        json.append(contentsOf: seenJSON.utf8)
        json.append(contentsOf: #","root":{"count":"#.utf8)
        JSONText.appendInteger(root.count, to: &json)
        json.append(contentsOf: #","unseen":"#.utf8)
        JSONText.appendInteger(root.unseen, to: &json)
        json.append(contentsOf: #"},"at":"#.utf8)
        json.append(contentsOf: atJSON.utf8)
        if let mutes {
            json.append(contentsOf: #","mutes":["#.utf8)
            for (index, mute) in mutes.enumerated() {
                json.append(contentsOf: (index > 0 ? #",{"path":"# : #"{"path":"#).utf8)
                JSONText.appendString(mute.path.rawValue, to: &json)
                json.append(contentsOf: #","until":"#.utf8)
                JSONText.appendString(mute.until?.rfc3339, orNullTo: &json)
                json.append(UInt8(ascii: "}"))
            }
            json.append(UInt8(ascii: "]"))
        }
        json.append(UInt8(ascii: "}"))
        return json
    }
}
