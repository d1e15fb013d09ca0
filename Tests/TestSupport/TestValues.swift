public import BadgeCore

/// The user `name`, written as a literal in a test; a name that is not valid stops the test
/// process, since it is a mistake in the test itself.
public func user(_ name: String) -> UserID {
    do { return try UserID(validating: name) } catch { preconditionFailure("bad test user \(name)") }
}

/// The path `text`, written as a literal in a test; a path that is not valid stops the test
/// process, since it is a mistake in the test itself.
public func path(_ text: String) -> BadgePath {
    do { return try BadgePath(validating: text) } catch { preconditionFailure("bad test path \(text)") }
}
