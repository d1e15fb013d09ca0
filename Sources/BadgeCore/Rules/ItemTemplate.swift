/// A rule's item template, such as `{message}` or `msg-{message}`: literal visible ASCII
/// characters and `{name}` placeholders filled from the event's attributes. Parsed once, when
/// the rules load; rendered per event.
package struct ItemTemplate: Hashable, Sendable {
    /// The template as written.
    package let text: String
    /// Literals and placeholders, in order.
    package let parts: [PathTemplate.Part]

    /// Parses a template (an item id's characters, with `{name}` placeholders).
    ///
    /// - Throws: a message naming the problem: an unclosed or stray brace, or an empty or
    ///   invalid placeholder name.
    package init(parsing text: String) throws(RuleSetError) {
        func problem(_ message: String) -> RuleSetError {
            RuleSetError(message: "item template \(Quoting.quoted(text)) \(message)")
        }
        let parts = try PathTemplate.Part.parse(text.unicodeScalars, location: "", problem: problem)
        self.text = text
        self.parts = parts
    }

    /// The item for an event's attributes.
    ///
    /// - Throws: `missing_attribute` when an attribute is absent, `invalid_field` when the result
    ///   is not an item id.
    package func render(attributes: [String: String], type: String) throws(EventRejection) -> ItemID {
        var rendered = ""
        for part in parts {
            switch part {
            case .literal(let literal):
                rendered += literal
            case .placeholder(let name):
                guard let value = attributes[name] else {
                    throw EventRejection(
                        reason: .missingAttribute,
                        message: "type \(Quoting.quoted(type)): the rule's item \(Quoting.quoted(text)) needs the attribute "
                            + "\(Quoting.quoted(name)), which 'attrs' does not have")
                }
                rendered += value
            }
        }
        do {
            return try ItemID(validating: rendered)
        } catch {
            throw EventRejection(reason: .invalidField, message: "type \(Quoting.quoted(type)): the rule's item: \(error.description)")
        }
    }
}
