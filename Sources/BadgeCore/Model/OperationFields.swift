/// The fields of one direct operation given as values (command-line flags), read by the same
/// grammar as events and rules (``BadgeOperation/named(_:_:)``).
public struct OperationFields: Sendable {
    /// `count` (set).
    public var count: Int64?
    /// `by` (incr, decr).
    public var by: Int64?
    /// `icon` (set).
    public var icon: String?
    /// `force` (clear); false counts as not given.
    public var force: Bool
    /// `item` (add, remove).
    public var item: String?
    /// `until` (mute): an RFC 3339 time.
    public var until: String?

    /// Fields with the given values.
    public init(
        count: Int64? = nil, by: Int64? = nil, icon: String? = nil, force: Bool = false, item: String? = nil, until: String? = nil
    ) {
        self.count = count
        self.by = by
        self.icon = icon
        self.force = force
        self.item = item
        self.until = until
    }
}

/// Why flags do not make an operation: a sentence naming the flag (`--by …`).
public struct OperationFieldsError: Error, Sendable, CustomStringConvertible {
    /// The sentence.
    public let description: String
}

extension OperationFields: OperationFieldSource {
    func has(_ name: String) -> Bool {
        switch name {
        case "count": return count != nil
        case "by": return by != nil
        case "icon": return icon != nil
        case "force": return force
        case "item": return item != nil
        case "until": return until != nil
        default: return false
        }
    }

    func integer(_ name: String, in range: ClosedRange<Int64>) throws(OperationFieldsError) -> Int64? {
        guard let value = name == "count" ? count : name == "by" ? by : nil else { return nil }
        guard range.contains(value) else {
            throw problem(field: name, " \(value) is out of range \(range.lowerBound)…\(range.upperBound)")
        }
        return value
    }

    func text(_ name: String) throws(OperationFieldsError) -> String? {
        switch name {
        case "icon": return icon
        case "item": return item
        case "until": return until
        default: return nil
        }
    }

    func flag(_ name: String) throws(OperationFieldsError) -> Bool? {
        name == "force" && force ? true : nil
    }

    func problem(field name: String, _ rest: String) -> OperationFieldsError {
        OperationFieldsError(description: "--\(name)\(rest)")
    }

    func unknownOp(_ op: String) -> OperationFieldsError {
        OperationFieldsError(description: "--op \(Quoting.quoted(op)) is not an op; the ops are \(OperationGrammar.opList)")
    }
}

extension BadgeOperation {
    /// The operation `op` (`set`, `incr`, `decr`, `clear`, `add`, `remove`, `seen`, `mute`,
    /// `unmute`) with `fields`, checked
    /// by the grammar events and rules use.
    ///
    /// - Throws: ``OperationFieldsError`` naming the flag: a field of another op, a number out
    ///   of range, an invalid icon, item or time, a missing item.
    public static func named(_ op: String, _ fields: OperationFields) throws(OperationFieldsError) -> BadgeOperation {
        try OperationGrammar.operation(op, from: fields)
    }
}
