import BadgeCore

/// The change feed's records as JSON (`deploy/schema/change.schema.json`), written by hand: the
/// feed writes one per version of every user, and this is its hot path.
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
    ) -> String {
        var json = "{\"type\":\"user\",\"user\":"
        json.reserveCapacity(256 + 96 * nodes.count)
        JSONText.appendString(user, to: &json)
        // The log keeps own versions of 1 or more (a CHECK); no value read back traps here.
        json += ",\"version\":\(version),\"previous_version\":\(version == .min ? version : version - 1)"
        json += ",\"own_version\":\(ownVersion),\"broadcast_version\":\(broadcastVersion),\"changed\":["
        let ordered = nodes.sorted { $0.path.rawValue.utf8.lexicographicallyPrecedes($1.path.rawValue.utf8) }
        for (index, node) in ordered.enumerated() {
            if index > 0 { json += "," }
            let count = node.after?.count ?? 0
            json += "{\"path\":"
            JSONText.appendString(node.path.rawValue, to: &json)
            json += node.after == nil ? ",\"shown\":false" : ",\"shown\":true"
            json += ",\"count\":\(count),\"unseen\":\(node.after?.unseen ?? 0),\"text\":"
            JSONText.appendString(display.text(for: count), orNullTo: &json)
            json += ",\"icon\":"
            JSONText.appendString(node.after?.icon?.rawValue, orNullTo: &json)
            json += "}"
        }
        json += "],\"dismissed\":\(dismissedJSON),\"seen\":\(seenJSON),\"root\":{\"count\":\(root.count),\"unseen\":\(root.unseen)},\"at\":\(atJSON)"
        if let mutes {
            json += ",\"mutes\":["
            for (index, mute) in mutes.enumerated() {
                json += index > 0 ? ",{\"path\":" : "{\"path\":"
                JSONText.appendString(mute.path.rawValue, to: &json)
                json += ",\"until\":"
                JSONText.appendString(mute.until?.rfc3339, orNullTo: &json)
                json += "}"
            }
            json += "]"
        }
        return json + "}"
    }
}
