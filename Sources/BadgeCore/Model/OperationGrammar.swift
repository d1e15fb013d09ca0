/// The fields each direct operation takes and their ranges, in one place: the event decoder
/// (JSON fields) and the rules (YAML keys) both read an operation through ``operation(_:from:)``.
///
/// `set` takes `count` (0…``BadgeOperation/maximumCount``, default 0) and `icon`; `incr` and
/// `decr` take `by` (1…``BadgeOperation/maximumCount``, default 1); `clear` takes `force`
/// (default false); `add` and `remove` take `item` (required, an ``ItemID``); `mute` takes
/// `until` (an RFC 3339 time: a snooze); `seen` and `unmute` take no field. A field of another op
/// is refused.
enum OperationGrammar {
    /// The ops, by the name events and rules give them.
    typealias Op = OperationName

    /// The ops in words, for messages: `'set', 'incr', …, 'mute' or 'unmute'`.
    static let opList: String = {
        let names = Op.allCases.map { "'\($0.rawValue)'" }
        return names.dropLast().joined(separator: ", ") + " or " + (names.last ?? "")
    }()

    /// Every op's fields, in the order they are checked.
    static let fieldNames = ["count", "by", "icon", "force", "item", "until"]
    /// The range of a set's `count`.
    static let countRange: ClosedRange<Int64> = 0...BadgeOperation.maximumCount
    /// The range of an increment's `by`.
    static let byRange: ClosedRange<Int64> = 1...BadgeOperation.maximumCount

    /// Reads the operation `op` from `fields`.
    ///
    /// - Throws: the source's failure for an unknown op, a field of another op, a field out of
    ///   range or of the wrong kind, or an invalid icon.
    static func operation<Fields: OperationFieldSource>(
        _ op: String, from fields: Fields
    ) throws(Fields.Failure) -> BadgeOperation {
        guard let kind = Op(rawValue: op) else { throw fields.unknownOp(op) }
        for name in fieldNames where !kind.takes(name) && fields.has(name) {
            throw fields.problem(field: name, " does not apply to op '\(op)'")
        }
        switch kind {
        case .set:
            let count = try fields.integer("count", in: countRange) ?? 0
            var icon: BadgeIcon?
            if let iconText = try fields.text("icon") {
                do {
                    icon = try BadgeIcon(validating: iconText)
                } catch {
                    throw fields.problem(field: "icon", ": \(error.description)")
                }
            }
            return .set(count: count, icon: icon)
        case .incr:
            return .increment(by: try fields.integer("by", in: byRange) ?? 1)
        case .decr:
            return .decrement(by: try fields.integer("by", in: byRange) ?? 1)
        case .clear:
            return .clear(force: try fields.flag("force") ?? false)
        case .add, .remove:
            guard let text = try fields.text("item") else {
                throw fields.problem(field: "item", " is required for op '\(op)'")
            }
            let item: ItemID
            do {
                item = try ItemID(validating: text)
            } catch {
                throw fields.problem(field: "item", ": \(error.description)")
            }
            return kind == .add ? .addItem(item) : .removeItem(item)
        case .seen:
            return .seen
        case .mute:
            guard let text = try fields.text("until") else { return .mute(until: nil) }
            guard let until = RFC3339.parse(text) else {
                throw fields.problem(
                    field: "until",
                    " is \(Quoting.quoted(text)); it must be an RFC 3339 timestamp from 1970 to 9999 (UTC), "
                        + "such as '2025-03-01T12:00:00Z'")
            }
            return .mute(until: until.toMicroseconds)
        case .unmute:
            return .unmute
        }
    }
}

/// Where the fields of one direct operation are read from: an event's JSON object or a rule's
/// YAML mapping. Each source reads values and words its failures in its own way.
protocol OperationFieldSource {
    /// What reading a field throws.
    associatedtype Failure: Error

    /// Whether the field is given.
    func has(_ name: String) -> Bool
    /// An integer field, checked against `range`; nil when absent.
    func integer(_ name: String, in range: ClosedRange<Int64>) throws(Failure) -> Int64?
    /// A text field; nil when absent.
    func text(_ name: String) throws(Failure) -> String?
    /// A true-or-false field; nil when absent.
    func flag(_ name: String) throws(Failure) -> Bool?
    /// A failure about the field `name`, the rest of the sentence following its name.
    func problem(field name: String, _ rest: String) -> Failure
    /// The failure for an op that is not one of ``OperationGrammar/Op``.
    ///
    /// Its message lists ``OperationGrammar/opList``.
    func unknownOp(_ op: String) -> Failure
}

/// The name of a direct operation, as events, rules and command-line flags spell it (`"op"`).
public enum OperationName: String, CaseIterable, Sendable {
    /// `set`: shown, with an absolute count and an optional icon.
    case set
    /// `incr`: count += `by`.
    case incr
    /// `decr`: count −= `by`.
    case decr
    /// `clear`: the node's own state (with `force`, the subtree's).
    case clear
    /// `add`: an item.
    case add
    /// `remove`: an item, for good.
    case remove
    /// `seen`: the node's subtree seen.
    case seen
    /// `mute`: the node's subtree gives its ancestors nothing (until `until`: a snooze).
    case mute
    /// `unmute`: ends a mute or snooze.
    case unmute

    /// The name of an operation.
    public init(_ operation: BadgeOperation) {
        switch operation {
        case .set: self = .set
        case .increment: self = .incr
        case .decrement: self = .decr
        case .clear: self = .clear
        case .addItem: self = .add
        case .removeItem: self = .remove
        case .seen: self = .seen
        case .mute: self = .mute
        case .unmute: self = .unmute
        }
    }

    /// Whether this op takes the field `name` (one of ``OperationGrammar/fieldNames``). A
    /// comparison, not a set built per call: ingest checks every event's fields.
    func takes(_ name: String) -> Bool {
        switch self {
        case .set: return name == "count" || name == "icon"
        case .incr, .decr: return name == "by"
        case .clear: return name == "force"
        case .add, .remove: return name == "item"
        case .mute: return name == "until"
        case .seen, .unmute: return false
        }
    }
}
