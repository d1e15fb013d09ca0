import Yams

/// The rules that map content events to badge operations, loaded from YAML:
///
/// ```yaml
/// rules:
///   - type: chat.message
///     op: incr                 # set | incr | decr | clear | add | remove | seen
///     path: root.chat.{conversation}
///     by: 1                    # incr only, optional, default 1
///   - type: feature.launched
///     op: set
///     icon: new                # set only, optional; so is count (default 0)
///     path: root.settings.{feature}
///   - type: chat.read
///     op: clear
///     force: true              # clear only, optional, default false
///     path: root.chat.{conversation}
///   - type: message.deleted
///     op: remove               # add | remove: an item, `{name}` filled from attrs
///     item: "{message}"
///     path: root.chat.{conversation}
/// modes:                       # optional: how nodes aggregate (DESIGN §2), first match wins
///   - path: root.chat          # root, then labels or * (any one label)
///     mode: children           # sum | children | dot | exclude
/// ```
public struct RuleSet: Sendable {
    /// One rule: a type, the operation it makes, and the path template.
    package struct Rule: Sendable, Hashable {
        package var type: String
        package var template: PathTemplate
        package var operation: BadgeOperation
        /// An `add` or `remove` rule's item, filled per event.
        package var item: ItemTemplate?
    }

    /// The rules in file order.
    package let rules: [Rule]
    /// The rules by type.
    let rulesByType: [String: Rule]
    /// The aggregation modes the file declares (`modes`), applied by the rollup.
    public let modes: AggregationModes
    /// Whether the file has the `modes` key (an empty list included): ingest stores the modes
    /// only then, so a file without it leaves the stored ones as they are.
    public let declaresModes: Bool

    /// A rule set without rules: every content event is `unknown_type`.
    public static let empty = RuleSet(rules: [])

    init(rules: [Rule], modes: AggregationModes? = nil) {
        self.rules = rules
        self.rulesByType = Dictionary(rules.map { ($0.type, $0) }, uniquingKeysWith: { first, _ in first })
        self.modes = modes ?? .none
        self.declaresModes = modes != nil
    }

    /// The types the rules map, in file order.
    public var types: [String] { rules.map(\.type) }

    /// The most characters in an event type.
    static let maximumTypeLength = 128

    /// Why `type` is not a valid event type (1–128 visible ASCII characters), or nil.
    static func typeProblem(_ type: String) -> String? {
        if type.isEmpty { return "the type is empty; a type is 1-128 visible ASCII characters" }
        for scalar in type.unicodeScalars where !BadgeValidationError.isVisibleASCII(scalar) {
            return "the type \(Quoting.quoted(type)) has the character \(Quoting.quoted(String(scalar))); "
                + "a type is 1-128 visible ASCII characters (no spaces)"
        }
        if type.utf8.count > maximumTypeLength {
            return "the type \(Quoting.quoted(type)) has \(type.utf8.count) characters; the most is \(maximumTypeLength)"
        }
        return nil
    }

    /// Parses and checks a rules file.
    ///
    /// - Throws: ``RuleSetError`` naming the rule (position from 1, and type) and the problem:
    ///   invalid YAML, an unknown op, a bad path template, a duplicate type, a missing field, a bad
    ///   `count`, `by`, `icon` or `force`, a field of another op, or an unknown key.
    public init(yaml: String) throws(RuleSetError) {
        let document: Node?
        do {
            document = try Yams.compose(yaml: yaml)
        } catch {
            throw RuleSetError(message: "rules file is not valid YAML: \(error)")
        }
        guard let document else {
            throw RuleSetError(message: "rules file is empty; it must be a mapping with a 'rules' list")
        }
        guard let top = document.mapping else {
            throw RuleSetError(message: "rules file must be a mapping with a 'rules' list")
        }
        var list: Node.Sequence?
        var modes: AggregationModes?
        for (key, value) in top {
            switch key.scalar?.string {
            case "rules":
                guard let sequence = value.sequence else {
                    throw RuleSetError(message: "'rules' must be a list of rules")
                }
                list = sequence
            case "modes":
                guard let sequence = value.sequence else {
                    throw RuleSetError(message: "'modes' must be a list of modes, each with 'path' and 'mode'")
                }
                modes = try Self.modes(sequence)
            default:
                throw RuleSetError(
                    message: "rules file has the unknown key \(Quoting.quoted(key.scalar?.string ?? "?")); "
                        + "the keys are 'rules' and 'modes'")
            }
        }
        guard let list else {
            throw RuleSetError(message: "rules file has no 'rules' list")
        }
        var rules: [Rule] = []
        var positions: [String: Int] = [:]
        for (index, node) in list.enumerated() {
            let rule = try Self.rule(node, position: index + 1)
            if let earlier = positions[rule.type] {
                throw RuleSetError(
                    message: "rule \(index + 1) (type \(Quoting.quoted(rule.type))): duplicate type; "
                        + "rule \(earlier) already maps it")
            }
            positions[rule.type] = index + 1
            rules.append(rule)
        }
        self.init(rules: rules, modes: modes)
    }

    /// Reads the `modes` list: each entry a mapping with `path` (a pattern) and `mode`.
    static func modes(_ list: Node.Sequence) throws(RuleSetError) -> AggregationModes {
        var entries: [AggregationModes.Entry] = []
        var positions: [String: Int] = [:]
        let names = AggregationMode.allCases.map(\.rawValue).joined(separator: ", ")
        for (index, node) in list.enumerated() {
            let position = index + 1
            guard let mapping = node.mapping else {
                throw RuleSetError(message: "mode \(position): must be a mapping with 'path' and 'mode'")
            }
            var path: String?
            var mode: String?
            for (key, value) in mapping {
                let name = key.scalar?.string ?? "?"
                guard let text = value.scalar?.string else {
                    throw RuleSetError(message: "mode \(position): \(Quoting.quoted(name)) must be a single value")
                }
                switch name {
                case "path" where path == nil: path = text
                case "mode" where mode == nil: mode = text
                case "path", "mode": throw RuleSetError(message: "mode \(position): duplicate key \(Quoting.quoted(name))")
                default: throw RuleSetError(message: "mode \(position): unknown key \(Quoting.quoted(name)); the keys are path and mode")
                }
            }
            guard let path else { throw RuleSetError(message: "mode \(position): missing field 'path'") }
            guard let mode else { throw RuleSetError(message: "mode \(position): missing field 'mode'") }
            guard let parsed = AggregationMode(rawValue: mode) else {
                throw RuleSetError(message: "mode \(position) (path \(Quoting.quoted(path))): the mode \(Quoting.quoted(mode)) is not one of \(names)")
            }
            let entry: AggregationModes.Entry
            do {
                entry = try AggregationModes.entry(pattern: path, mode: parsed)
            } catch {
                throw RuleSetError(message: "mode \(position): \(error.message)")
            }
            if let earlier = positions[entry.pattern] {
                throw RuleSetError(message: "mode \(position) (path \(Quoting.quoted(path))): duplicate path; mode \(earlier) already declares it")
            }
            positions[entry.pattern] = position
            entries.append(entry)
        }
        return AggregationModes(entries: entries)
    }

    static let knownKeys = Set(["type", "op", "path"] + OperationGrammar.fieldNames)

    /// Reads one rule.
    static func rule(_ node: Node, position: Int) throws(RuleSetError) -> Rule {
        let fields = try RuleFields(node, position: position)
        for name in fields.order where !knownKeys.contains(name) {
            throw fields.problem(
                "unknown key \(Quoting.quoted(name)); the keys are type, op, path, and by (incr, decr), count and "
                    + "icon (set), force (clear), item (add, remove) or until (mute)")
        }
        let type = try fields.required("type")
        if let typeProblem = typeProblem(type) { throw fields.problem(typeProblem) }
        let op = try fields.required("op")
        let pathText = try fields.required("path")
        let operation = try OperationGrammar.operation(op, from: fields)
        let template: PathTemplate
        do {
            template = try PathTemplate(parsing: pathText)
        } catch {
            throw fields.problem(error.message)
        }
        var item: ItemTemplate?
        switch operation {
        case .addItem(let text), .removeItem(let text):
            do {
                item = try ItemTemplate(parsing: text.rawValue)
            } catch {
                throw fields.problem(error.message)
            }
        case .set, .increment, .decrement, .clear, .seen, .mute, .unmute:
            break
        }
        if template.labels.count == 1, let problem = operation.pathProblem(.root) { throw fields.problem(problem) }
        return Rule(type: type, template: template, operation: operation, item: item)
    }

    /// Maps a decoded event to its badge operation.
    ///
    /// Direct operations pass through. A content event uses the rule of its type.
    ///
    /// - Returns: the operation, or a rejection: `unknown_type` when no rule maps the type,
    ///   `missing_attribute` when a placeholder's attribute is absent, `invalid_path` when an
    ///   attribute value cannot be a label (empty, longer than 64, or holding a character such as
    ///   `.`, `*` or `|`) or the resulting path is not valid; messages name the attribute and value.
    public func map(_ event: BadgeEvent) -> Result<MappedOperation, EventRejection> {
        switch event.body {
        case .operation(let path, let operation):
            return .success(
                MappedOperation(
                    eventID: event.id, audience: event.audience, path: path, operation: operation,
                    expiresAt: event.expiresAt, occurredAt: event.occurredAt))
        case .content(let type, let attributes):
            guard let rule = rulesByType[type] else {
                return .failure(
                    EventRejection(reason: .unknownType, message: "no rule maps the type \(Quoting.quoted(type))"))
            }
            if event.audience == .everyone, let problem = Audience.broadcastProblem(rule.operation) {
                return .failure(EventRejection(reason: .invalidField, message: "type \(Quoting.quoted(type)): \(problem)"))
            }
            do throws(EventRejection) {
                let path = try rule.template.render(attributes: attributes, type: type)
                if let problem = rule.operation.pathProblem(path) { throw EventRejection(reason: .invalidPath, message: problem) }
                var operation = rule.operation
                if let item = try rule.item?.render(attributes: attributes, type: type) {
                    if case .removeItem = operation { operation = .removeItem(item) } else { operation = .addItem(item) }
                }
                return .success(
                    MappedOperation(
                        eventID: event.id, audience: event.audience, path: path, operation: operation,
                        expiresAt: event.expiresAt, occurredAt: event.occurredAt))
            } catch {
                return .failure(error)
            }
        }
    }
}

/// The keys of one rule's YAML mapping, read with the messages of ``RuleSet/init(yaml:)``.
struct RuleFields: OperationFieldSource {
    /// The rule's position in the file, from 1.
    let position: Int
    /// The values by key.
    let fields: [String: Node]
    /// The keys in file order.
    let order: [String]
    /// `type 'chat.message'` or `no type`, to name the rule in messages.
    let typeLabel: String

    /// Reads the mapping of the rule at `position`.
    ///
    /// - Throws: ``RuleSetError`` when the rule is not a mapping or repeats a key.
    init(_ node: Node, position: Int) throws(RuleSetError) {
        guard let mapping = node.mapping else {
            throw RuleSetError(message: "rule \(position): must be a mapping with 'type', 'op' and 'path'")
        }
        var fields: [String: Node] = [:]
        var order: [String] = []
        for (key, value) in mapping {
            let name = key.scalar?.string ?? "?"
            if fields[name] != nil {
                throw RuleSetError(message: "rule \(position): duplicate key \(Quoting.quoted(name))")
            }
            fields[name] = value
            order.append(name)
        }
        self.position = position
        self.fields = fields
        self.order = order
        self.typeLabel = fields["type"]?.scalar.map { "type \(Quoting.quoted($0.string))" } ?? "no type"
    }

    /// A failure naming the rule.
    func problem(_ message: String) -> RuleSetError {
        RuleSetError(message: "rule \(position) (\(typeLabel)): \(message)")
    }

    func has(_ name: String) -> Bool { fields[name] != nil }

    func text(_ name: String) throws(RuleSetError) -> String? {
        guard let value = fields[name] else { return nil }
        guard let scalar = value.scalar else { throw problem("'\(name)' must be a single value") }
        return scalar.string
    }

    /// A key the rule must have.
    func required(_ name: String) throws(RuleSetError) -> String {
        guard let text = try text(name) else { throw problem("missing field '\(name)'") }
        return text
    }

    func integer(_ name: String, in range: ClosedRange<Int64>) throws(RuleSetError) -> Int64? {
        guard let text = try text(name) else { return nil }
        guard let number = Int64(text), range.contains(number) else {
            throw problem(
                "'\(name)' is \(Quoting.quoted(text)); it must be an integer from \(range.lowerBound) "
                    + "to \(range.upperBound)")
        }
        return number
    }

    func flag(_ name: String) throws(RuleSetError) -> Bool? {
        guard let text = try text(name) else { return nil }
        switch text {
        case "true", "True", "TRUE": return true
        case "false", "False", "FALSE": return false
        default: throw problem("'\(name)' is \(Quoting.quoted(text)); it must be true or false")
        }
    }

    func problem(field name: String, _ rest: String) -> RuleSetError {
        problem("'\(name)'\(rest)")
    }

    func unknownOp(_ op: String) -> RuleSetError {
        problem("unknown op \(Quoting.quoted(op)); the ops are \(OperationGrammar.opList)")
    }
}
