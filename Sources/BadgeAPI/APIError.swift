import Foundation
public import Hummingbird
import LibPQ

/// An error answer: `{"error": {"code": …, "message": …}}` with its status and headers. Only
/// this module turns errors into HTTP statuses.
public struct APIError: HTTPResponseError, Sendable, CustomStringConvertible {
    /// The HTTP status.
    public var status: HTTPResponse.Status
    /// A stable machine-readable code (`invalid_path`, `unauthorized`, …).
    public var code: String
    /// A sentence a client developer can act on.
    public var message: String
    /// Extra headers (`WWW-Authenticate`, `Retry-After`).
    public var headers: HTTPFields

    /// An error answer.
    public init(_ status: HTTPResponse.Status, code: String, message: String, headers: HTTPFields = [:]) {
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers
    }

    public var description: String { "\(status.code) \(code): \(message)" }

    /// The JSON answer.
    public func response(from request: Request, context: some RequestContext) throws -> Response {
        response()
    }

    func response() -> Response {
        let body = "{\"error\":{\"code\":\(Self.jsonString(code)),\"message\":\(Self.jsonString(message))}}\n"
        var headers = self.headers
        headers[.contentType] = "application/json; charset=utf-8"
        headers[.cacheControl] = "no-store"
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: body)))
    }

    static func jsonString(_ text: String) -> String {
        let data = (try? JSONEncoder().encode(text)) ?? Data("\"\"".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    // MARK: - the answers used across routes

    static func badRequest(_ code: String, _ message: String) -> APIError {
        APIError(.badRequest, code: code, message: message)
    }

    /// The one answer for a user the caller may not see and for a user that does not exist.
    static func userNotFound() -> APIError {
        APIError(.notFound, code: "not_found", message: "no badge tree for this user")
    }

    /// 401 with a Bearer challenge; `error` nil for a request that sent no credentials.
    static func unauthorized(_ message: String, error: String? = "invalid_token") -> APIError {
        var headers = HTTPFields()
        headers[.wwwAuthenticate] = "Bearer realm=\"reddot\"" + (error.map { ", error=\"\($0)\"" } ?? "")
        return APIError(.unauthorized, code: "unauthorized", message: message, headers: headers)
    }

    static func unavailable(_ message: String, retryAfterSeconds: Int = 1) -> APIError {
        var headers = HTTPFields()
        headers[.retryAfter] = "\(retryAfterSeconds)"
        return APIError(.serviceUnavailable, code: "unavailable", message: message, headers: headers)
    }

    /// Maps a store error: a database that cannot be reached or answer in time, or a statement
    /// prepared before a migration changed its result, is a 503 with `Retry-After`; anything
    /// else a 500 (logged by the caller, its text not shown).
    static func from(_ error: any Error) -> APIError {
        if let error = error as? APIError { return error }
        if let error = error as? PGError {
            switch error.code {
            case .connectionFailed, .connectionLost, .poolClosed, .cancelled:
                return unavailable("the database is unavailable; try again shortly")
            case .timedOut:
                return unavailable("the database did not answer in time; try again shortly")
            default:
                // A statement prepared before a migration changed its result (prepared again
                // at its next use): the request's transaction can run again at once.
                if error.preparedShapeChanged { return unavailable("the database's schema changed; try again") }
                if error.sqlState == "57014" || error.sqlState?.hasPrefix("08") == true || error.sqlState == "57P01"
                    || error.sqlState == "57P03" || error.sqlState == "53300"
                {
                    return unavailable("the database did not answer in time; try again shortly")
                }
            }
        }
        if error is CancellationError {
            return unavailable("the request timed out; try again shortly")
        }
        return APIError(.internalServerError, code: "internal", message: "internal error; the server log has the details")
    }
}
