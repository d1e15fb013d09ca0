import BadgeCore

/// Paths: ``BadgePath``'s 1-pass validator and its rule-by-rule one agree; a valid path
/// round-trips to the same text, and its parent, ancestors and order are consistent; a path
/// template without placeholders is valid exactly when the same text is a valid path; an
/// aggregation-mode pattern parses from every valid path and matches it, round-trips, and
/// becomes an lquery of label characters, dots and `*{1}` only.
enum PathsFuzzTarget {
    static let target = FuzzTarget.paths

    static func run(_ bytes: [UInt8]) {
        let text = String(decoding: bytes, as: UTF8.self)
        let fast = BadgePath.labelCountOfValidPath(text)
        let slow: Result<[String], BadgePathError>
        do throws(BadgePathError) {
            slow = .success(try BadgePath.checkedLabels(text))
        } catch {
            slow = .failure(error)
        }
        switch (fast, slow) {
        case (let count?, .success(let labels)):
            FuzzFailure.check(count == labels.count, target, "1-pass counts \(count) labels, rule by rule \(labels.count)")
        case (let count?, .failure(let error)):
            FuzzFailure.fail(target, "1-pass accepts \(count) labels; rule by rule rejects: \(error)")
        case (nil, .success):
            // Allowed only if the 1-pass check is merely conservative; it is not meant to be.
            FuzzFailure.fail(target, "rule by rule accepts \(text.debugDescription); 1-pass rejects it")
        case (nil, .failure(let error)):
            FuzzFailure.checkMessage(error.description, target)
        }

        let path: BadgePath
        do throws(BadgePathError) {
            path = try BadgePath(validating: text)
        } catch {
            FuzzFailure.check(fast == nil, target, "BadgePath rejects a path both validators accept")
            checkTemplate(text, pathIsValid: false)
            checkPattern(text, path: nil)
            return
        }
        FuzzFailure.check(fast != nil, target, "BadgePath accepts a path the validators reject")
        FuzzFailure.check(path.rawValue == text, target, "the path does not round-trip: \(path.rawValue.debugDescription)")
        let labels = path.labels
        FuzzFailure.check(labels.joined(separator: ".") == text, target, "the labels do not join to the text")
        FuzzFailure.check(path.depth == labels.count - 1 && path.depth <= BadgePath.maximumDepth, target, "depth \(path.depth)")
        FuzzFailure.check(labels.first == "root", target, "the first label is not root")
        let ancestors = path.ancestors
        FuzzFailure.check(ancestors.count == path.depth, target, "\(ancestors.count) ancestors at depth \(path.depth)")
        for (index, ancestor) in ancestors.enumerated() {
            FuzzFailure.check(ancestor.depth == index && path.isWithin(ancestor) && ancestor < path, target, "ancestor \(ancestor)")
            FuzzFailure.check((try? BadgePath(validating: ancestor.rawValue)) == ancestor, target, "ancestor \(ancestor) is not valid")
        }
        if let parent = path.parent {
            FuzzFailure.check(parent == ancestors.last, target, "the parent is not the last ancestor")
            let again = try? parent.appending(label: labels[labels.count - 1])
            FuzzFailure.check(again == path, target, "parent + last label is not the path")
        } else {
            FuzzFailure.check(path == .root, target, "a path other than root has no parent")
        }
        FuzzFailure.check(path.isWithin(.root) && !(path < .root), target, "the path is not within root")
        checkTemplate(text, pathIsValid: true)
        checkPattern(text, path: path)
    }

    /// The text as an aggregation-mode pattern (see the type's summary).
    static func checkPattern(_ text: String, path: BadgePath?) {
        let entry: AggregationModes.Entry
        do throws(RuleSetError) {
            entry = try AggregationModes.entry(pattern: text, mode: .children)
        } catch {
            FuzzFailure.check(path == nil, target, "a valid path is not a valid pattern: \(error)")
            FuzzFailure.checkMessage(error.message, target)
            return
        }
        FuzzFailure.check(entry.pattern == text, target, "the pattern does not round-trip: \(entry.pattern.debugDescription)")
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.*{}")
        FuzzFailure.check(entry.lquery.allSatisfy(allowed.contains), target, "the lquery has other characters: \(entry.lquery.debugDescription)")
        if let path {
            FuzzFailure.check(entry.matches(path), target, "the pattern of a path does not match it")
            FuzzFailure.check(AggregationModes(entries: [entry]).mode(of: path) == .children, target, "the mode of a matched path")
        }
    }

    /// A template is parsed with the same label rules; without placeholders it renders the path.
    static func checkTemplate(_ text: String, pathIsValid: Bool) {
        let template: PathTemplate
        do throws(RuleSetError) {
            template = try PathTemplate(parsing: text)
        } catch {
            FuzzFailure.checkMessage(error.message, target)
            FuzzFailure.check(!pathIsValid, target, "a valid path is not a valid template: \(error.message)")
            return
        }
        let attributes = Dictionary(uniqueKeysWithValues: template.placeholders.map { ($0, "v") })
        do throws(EventRejection) {
            let rendered = try template.render(attributes: attributes, type: "fuzz")
            if template.placeholders.isEmpty {
                FuzzFailure.check(pathIsValid && rendered.rawValue == text, target, "a template without placeholders renders \(rendered)")
            }
        } catch {
            // A placeholder filled with "v" only shortens labels: rendering cannot fail.
            FuzzFailure.fail(target, "a valid template does not render: \(error)")
        }
    }
}
