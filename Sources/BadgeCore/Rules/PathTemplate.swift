/// A rule's path template, such as `root.chat.{conversation}` or `root.shop.item_{id}`: `root`
/// then labels made of literal characters `[A-Za-z0-9_]` and `{name}` placeholders, a placeholder
/// filling a whole label or part of one.
package struct PathTemplate: Hashable, Sendable {
    /// A piece of a template: literal text, or a `{name}` placeholder.
    package enum Part: Hashable, Sendable {
        case literal(String)
        case placeholder(String)

        /// Splits `scalars` into literals and `{name}` placeholders (names of `[A-Za-z0-9_]`).
        ///
        /// - Parameters:
        ///   - location: appended to each message (" at position 3"), or empty.
        ///   - problem: makes the error from a message ("has a '}' without '{'…").
        ///   - literal: the characters a literal may hold and the rule that says so; nil for any.
        static func parse(
            _ scalars: some Sequence<Unicode.Scalar>, location: String, problem: (String) -> RuleSetError,
            literal rule: (allows: (Unicode.Scalar) -> Bool, rule: String)? = nil
        ) throws(RuleSetError) -> [Part] {
            var parts: [Part] = []
            var literal = ""
            var placeholder: String?
            for scalar in scalars {
                if var name = placeholder {
                    if scalar == "}" {
                        if name.isEmpty { throw problem("has an empty placeholder '{}'\(location)") }
                        parts.append(.placeholder(name))
                        placeholder = nil
                    } else if BadgePath.isLabelScalar(scalar) {
                        name.unicodeScalars.append(scalar)
                        placeholder = name
                    } else {
                        throw problem(
                            "has the character \(Quoting.quoted(String(scalar))) in a placeholder\(location); "
                                + "placeholder names may contain only A-Z, a-z, 0-9 and _")
                    }
                } else if scalar == "{" {
                    if !literal.isEmpty { parts.append(.literal(literal)) }
                    literal = ""
                    placeholder = ""
                } else if scalar == "}" {
                    throw problem("has a '}' without '{'\(location)")
                } else if let rule, !rule.allows(scalar) {
                    throw problem("has the character \(Quoting.quoted(String(scalar)))\(location); \(rule.rule)")
                } else {
                    literal.unicodeScalars.append(scalar)
                }
            }
            if placeholder != nil { throw problem("has a '{' without '}'\(location)") }
            if !literal.isEmpty { parts.append(.literal(literal)) }
            return parts
        }
    }

    /// The template as written.
    package let text: String
    /// The labels, `root` first, each a list of parts.
    package let labels: [[Part]]

    /// Every placeholder name, in order of first appearance.
    package var placeholders: [String] {
        var names: [String] = []
        for case .placeholder(let name) in labels.joined() where !names.contains(name) {
            names.append(name)
        }
        return names
    }

    /// Parses a template.
    ///
    /// - Throws: a message naming the problem and the label (positions count from 1, `root` at 1).
    package init(parsing text: String) throws(RuleSetError) {
        func problem(_ message: String) -> RuleSetError {
            RuleSetError(message: "path template \(Quoting.quoted(text)) \(message)")
        }
        if text.isEmpty { throw problem("is empty; it must start with 'root'") }
        let rawLabels = text.unicodeScalars.split(separator: ".", omittingEmptySubsequences: false)
        guard let first = rawLabels.first, String(first) == "root" else {
            throw problem("must start with 'root'")
        }
        if rawLabels.count - 1 > BadgePath.maximumDepth {
            throw problem("has \(rawLabels.count - 1) labels after root; the most is \(BadgePath.maximumDepth)")
        }
        var labels: [[Part]] = []
        for (index, rawLabel) in rawLabels.enumerated() {
            let position = index + 1
            if rawLabel.isEmpty { throw problem("has an empty label at position \(position)") }
            let parts = try Part.parse(
                rawLabel, location: " at position \(position)", problem: problem,
                literal: (BadgePath.isLabelScalar, "labels may contain only A-Z, a-z, 0-9 and _ and {placeholders}"))
            let literalLength = parts.reduce(0) { length, part in
                if case .literal(let literal) = part { length + literal.unicodeScalars.count } else { length }
            }
            let placeholderCount = parts.count(where: { if case .placeholder = $0 { true } else { false } })
            if literalLength + placeholderCount > BadgePath.maximumLabelLength {
                throw problem(
                    "has a label at position \(position) longer than \(BadgePath.maximumLabelLength) characters")
            }
            if index == 0, parts != [.literal("root")] {
                throw problem("must start with 'root'")
            }
            labels.append(parts)
        }
        self.text = text
        self.labels = labels
    }

    /// The path for an event's attributes.
    ///
    /// - Throws: `missing_attribute` for an absent attribute; `invalid_path` for a value that is
    ///   not a valid label (or part of one), or a resulting path that is not valid.
    package func render(attributes: [String: String], type: String) throws(EventRejection) -> BadgePath {
        var rendered: [String] = []
        for parts in labels {
            var label = ""
            for part in parts {
                switch part {
                case .literal(let literal):
                    label += literal
                case .placeholder(let name):
                    guard let value = attributes[name] else {
                        throw EventRejection(
                            reason: .missingAttribute,
                            message: "attribute '\(name)' is missing; the rule for type \(Quoting.quoted(type)) "
                                + "needs it for the path \(Quoting.quoted(text))")
                    }
                    if let problem = Self.labelProblem(value) {
                        throw EventRejection(
                            reason: .invalidPath,
                            message: "attribute '\(name)' is \(Quoting.quoted(value)), which cannot be part of a "
                                + "path label: \(problem)")
                    }
                    label += value
                }
            }
            rendered.append(label)
        }
        do {
            return try BadgePath(validating: rendered.joined(separator: "."))
        } catch {
            throw EventRejection(reason: .invalidPath, message: error.description)
        }
    }

    /// Why `value` cannot fill a placeholder, or nil if it can.
    static func labelProblem(_ value: String) -> String? {
        if value.isEmpty { return "it is empty" }
        for scalar in value.unicodeScalars where !BadgePath.isLabelScalar(scalar) {
            return "it has the character \(Quoting.quoted(String(scalar))); labels may contain only A-Z, a-z, 0-9 and _"
        }
        if value.utf8.count > BadgePath.maximumLabelLength {
            return "it has \(value.utf8.count) characters; a label has at most \(BadgePath.maximumLabelLength)"
        }
        return nil
    }
}
