/// Why a rules file was refused: the message names the rule (its position, from 1, and its type)
/// and the problem.
public struct RuleSetError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What is wrong, and where.
    public var message: String

    /// An error with the given message.
    public init(message: String) {
        self.message = message
    }

    /// The message.
    public var description: String { message }
}
