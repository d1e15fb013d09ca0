/// Why a query parameter or header of an HTTP request cannot be read: a stable machine-readable
/// code (`invalid_wait`, `invalid_request`, …) and a sentence a client developer can act on.
///
/// `BadgeAPI` turns it into an HTTP answer (400, or 401 for the `Authorization` header); this
/// module only says what is wrong.
public struct RequestValueError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The code of the error answer.
    public var code: String
    /// What is wrong, naming the parameter and quoting (a cut of) the value.
    public var message: String

    /// An error with a code and a message.
    public init(_ code: String, _ message: String) {
        self.code = code
        self.message = message
    }

    /// The message.
    public var description: String { message }
}
