/// How a node aggregates its subtree (DESIGN §2, Aggregation modes), declared per path pattern
/// in the rules file.
public enum AggregationMode: String, Hashable, Sendable, CaseIterable {
    /// The node's count is its own plus its children's (the default).
    case sum
    /// The node's count is the number of its shown children (an `exclude` child not counted), its
    /// unseen the number of those with something unseen; its own count is not shown.
    case children
    /// The node shows a dot: count and unseen 0, for itself and for its ancestors, while its
    /// children keep their numbers.
    case dot
    /// The node counts its subtree in place, but gives its ancestors only a dot: no count and no
    /// unseen.
    case exclude
}

/// The aggregation modes of a rules file: path patterns in file order, each with a mode. A node
/// takes the mode of the first pattern that matches it, else `sum`.
///
/// A pattern is `root` followed by labels, where a label `*` matches any one label:
/// `root.chat` is that node, `root.chat.*` each conversation below it.
public struct AggregationModes: Hashable, Sendable {
    /// One declared mode.
    public struct Entry: Hashable, Sendable {
        /// The pattern's labels after `root`; `nil` is `*`.
        public var labels: [String?]
        /// The mode of the nodes it matches.
        public var mode: AggregationMode

        /// The pattern as written (`root.chat.*`).
        public var pattern: String { (["root"] + labels.map { $0 ?? "*" }).joined(separator: ".") }

        /// The pattern as a PostgreSQL `lquery` that matches exactly the nodes it does: the labels
        /// are checked label characters, `*` is `*{1}`.
        package var lquery: String { (["root"] + labels.map { $0 ?? "*{1}" }).joined(separator: ".") }

        /// Whether the pattern matches `path`.
        public func matches(_ path: BadgePath) -> Bool {
            let pathLabels = path.labels.dropFirst()
            guard pathLabels.count == labels.count else { return false }
            return zip(labels, pathLabels).allSatisfy { pattern, label in pattern.map { $0 == label } ?? true }
        }
    }

    /// The declared modes, in file order.
    public var entries: [Entry]

    /// No mode declared: every node sums.
    public static let none = AggregationModes(entries: [])

    /// Modes with the given entries.
    public init(entries: [Entry]) {
        self.entries = entries
    }

    /// Parses `pattern` (`root`, then labels or `*`) with its mode.
    ///
    /// - Throws: ``RuleSetError`` naming the pattern and the rule it breaks.
    public static func entry(pattern: String, mode: AggregationMode) throws(RuleSetError) -> Entry {
        let parts = pattern.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.first == "root" else {
            throw RuleSetError(message: "the pattern \(Quoting.quoted(pattern)) must start with 'root'")
        }
        let labels = Array(parts.dropFirst())
        guard labels.count <= BadgePath.maximumDepth else {
            throw RuleSetError(
                message: "the pattern \(Quoting.quoted(pattern)) has \(labels.count) labels after 'root'; the most is \(BadgePath.maximumDepth)")
        }
        var checked: [String?] = []
        for label in labels {
            if label == "*" {
                checked.append(nil)
                continue
            }
            do {
                _ = try BadgePath(validating: "root.\(label)")
            } catch {
                throw RuleSetError(
                    message: "the pattern \(Quoting.quoted(pattern)) has the label \(Quoting.quoted(label)); "
                        + "a label is 1-64 characters of A-Z, a-z, 0-9 and _, or * for any one label")
            }
            checked.append(label)
        }
        return Entry(labels: checked, mode: mode)
    }

    /// The mode of `path`: the first matching entry's, else `sum`.
    public func mode(of path: BadgePath) -> AggregationMode {
        entries.first { $0.matches(path) }?.mode ?? .sum
    }

    /// The aggregate of every shown node from the own aggregates of the nodes that show
    /// something themselves (count, icon and unseen; see ``BadgeTree/ownCounts(now:)``): every
    /// node at or above one of them shows, and its count and unseen follow the modes.
    ///
    /// - `sum` and `exclude`: the own count (or unseen) plus what each child passes up;
    /// - `children`: the number of shown children that are not `exclude`, and of those with
    ///   unseen above 0;
    /// - `dot`: 0 and 0.
    ///
    /// A child passes up its count and unseen, except a `dot` or `exclude` child, which passes 0
    /// (its ancestors still show). A `muted` node passes nothing at all: it is counted in place
    /// by its mode, but is no child of its parent, which shows only when something else makes it
    /// (DESIGN §2, Mute and snooze). Sums saturate at `Int64.max`.
    public func aggregate(own: [BadgePath: BadgeAggregate], muted: Set<BadgePath> = []) -> [BadgePath: BadgeAggregate] {
        var shown: Set<BadgePath> = []
        var children: [BadgePath: [BadgePath]] = [:]
        for path in own.keys {
            var node: BadgePath? = path
            while let current = node, shown.insert(current).inserted, !muted.contains(current) {
                if let parent = current.parent { children[parent, default: []].append(current) }
                node = current.parent
            }
        }
        var result: [BadgePath: BadgeAggregate] = [:]
        // Deepest first: a node's children are done before it.
        for node in shown.sorted(by: { $0.depth > $1.depth }) {
            let mine = own[node]
            var aggregate = BadgeAggregate(count: 0, icon: mine?.icon)
            switch mode(of: node) {
            case .dot:
                break
            case .children:
                for child in children[node] ?? [] where mode(of: child) != .exclude {
                    aggregate.count.addSaturating(1)
                    if (result[child]?.unseen ?? 0) > 0 { aggregate.unseen.addSaturating(1) }
                }
            case .sum, .exclude:
                aggregate.count = max(mine?.count ?? 0, 0)
                aggregate.unseen = max(mine?.unseen ?? 0, 0)
                for child in children[node] ?? [] {
                    switch mode(of: child) {
                    case .dot, .exclude: continue
                    case .sum, .children:
                        aggregate.count.addSaturating(result[child]?.count ?? 0)
                        aggregate.unseen.addSaturating(result[child]?.unseen ?? 0)
                    }
                }
            }
            result[node] = aggregate
        }
        return result
    }
}
