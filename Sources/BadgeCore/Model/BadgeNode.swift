/// A node of a user's badge tree as answers show it.
///
/// JSON: `{"path": "root.chat", "shown": true, "count": 3, "unseen": 1, "text": "3", "icon": null,
/// "children": […]}`; `text` and `icon` are always present, `null` when absent.
public struct BadgeNode: Hashable, Sendable {
    /// The node's path.
    public var path: BadgePath
    /// Whether the node shows a badge; false for an empty tree's `root`, and for a node that
    /// shows nothing itself but holds a muted node that does (it is there so the tree stays a
    /// tree: count and unseen 0, no dot).
    public var shown: Bool
    /// The aggregate count (own count plus the children's).
    public var count: Int64
    /// What arrived after the user last saw this node or an ancestor, summed like ``count``.
    public var unseen: Int64
    /// The display text of ``count``: `"7"`, `"99+"`, or nil for a dot or an icon.
    public var text: String?
    /// The node's own icon, shown when ``count`` is 0.
    public var icon: BadgeIcon?
    /// The shown children, sorted by path; empty when the depth limit was reached.
    public var children: [BadgeNode]

    /// A node with the given fields.
    public init(
        path: BadgePath, shown: Bool, count: Int64, unseen: Int64 = 0, text: String?, icon: BadgeIcon?,
        children: [BadgeNode] = []
    ) {
        self.path = path
        self.shown = shown
        self.count = count
        self.unseen = unseen
        self.text = text
        self.icon = icon
        self.children = children
    }

    /// Builds the node at `path` from a flat map of one user's aggregates.
    ///
    /// Any subset of the user's aggregates may be passed, as long as it holds `path` and the
    /// nodes of its subtree to show (for example only the rows within `path`). A node whose
    /// parent has no aggregate (a muted node gives its ancestors nothing) hangs under unlit nodes
    /// (`shown` false, count 0) down from the nearest one that has.
    ///
    /// - Parameters:
    ///   - depth: how many levels below `path` to include: nil for all, 0 for the node only,
    ///     1 for the node and its children, … A negative depth is taken as 0, one above
    ///     ``BadgePath/maximumDepth`` as that.
    /// - Returns: nil if nothing is shown at or below `path`, except for `root`, which always
    ///   answers: an empty tree's root has `shown` false and count 0.
    public static func build(
        aggregates: [BadgePath: BadgeAggregate], at path: BadgePath, depth: Int?, display: BadgeDisplay
    ) -> BadgeNode? {
        // Clamped first: no path is deeper than maximumDepth, and `path.depth + Int.max` traps.
        let deepest = depth.map { path.depth + min(max($0, 0), BadgePath.maximumDepth) }
        // Sorted by path, a node's descendants directly follow it (`.` sorts below every label
        // character), so one pass with a stack of open nodes builds the tree.
        var below: [(path: BadgePath, aggregate: BadgeAggregate)] = []
        below.reserveCapacity(aggregates.count)
        for (candidate, candidateAggregate) in aggregates where candidate.depth > path.depth && candidate.isWithin(path) {
            if let deepest, candidate.depth > deepest { continue }
            below.append((candidate, candidateAggregate))
        }
        below.sort { $0.path < $1.path }
        let top: BadgeNode
        if let aggregate = aggregates[path] {
            top = BadgeNode(
                path: path, shown: true, count: aggregate.count, unseen: aggregate.unseen, text: display.text(for: aggregate.count),
                icon: aggregate.icon)
        } else if path == .root || !below.isEmpty {
            top = BadgeNode(path: path, shown: false, count: 0, text: nil, icon: nil)
        } else {
            return nil
        }
        var open = [top]
        func closeInnermost() {
            let closed = open.removeLast()
            open[open.count - 1].children.append(closed)
        }
        for (candidate, candidateAggregate) in below {
            while open.count > 1, !candidate.isWithin(open[open.count - 1].path) { closeInnermost() }
            // Unlit nodes down to the candidate's parent, where none has an aggregate.
            let ancestors = candidate.ancestors
            while candidate.depth > open[open.count - 1].path.depth + 1,
                let unlit = ancestors.first(where: { $0.depth == open[open.count - 1].path.depth + 1 })
            {
                open.append(BadgeNode(path: unlit, shown: false, count: 0, text: nil, icon: nil))
            }
            guard candidate.depth == open[open.count - 1].path.depth + 1 else { continue }
            open.append(
                BadgeNode(
                    path: candidate, shown: true, count: candidateAggregate.count, unseen: candidateAggregate.unseen,
                    text: display.text(for: candidateAggregate.count), icon: candidateAggregate.icon))
        }
        while open.count > 1 { closeInnermost() }
        return open[0]
    }
}

extension BadgeNode: Codable {
    enum CodingKeys: String, CodingKey {
        case path, shown, count, unseen, text, icon, children
    }

    /// Decodes a node; `text` and `icon` may be null or absent, `unseen` absent (0).
    ///
    /// - Throws: `DecodingError` when a field is missing or invalid.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.path = try container.decode(BadgePath.self, forKey: .path)
        self.shown = try container.decode(Bool.self, forKey: .shown)
        self.count = try container.decode(Int64.self, forKey: .count)
        self.unseen = try container.decodeIfPresent(Int64.self, forKey: .unseen) ?? 0
        self.text = try container.decodeIfPresent(String.self, forKey: .text)
        self.icon = try container.decodeIfPresent(BadgeIcon.self, forKey: .icon)
        self.children = try container.decodeIfPresent([BadgeNode].self, forKey: .children) ?? []
    }

    /// Encodes every key, with explicit nulls for a missing `text` or `icon`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(path, forKey: .path)
        try container.encode(shown, forKey: .shown)
        try container.encode(count, forKey: .count)
        try container.encode(unseen, forKey: .unseen)
        try container.encode(text, forKey: .text)
        try container.encode(icon, forKey: .icon)
        try container.encode(children, forKey: .children)
    }
}
