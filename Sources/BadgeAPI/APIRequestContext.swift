import BadgeCore
import Foundation
public import Hummingbird

/// The request context of the API's routes: Hummingbird's core context, and who is calling, as
/// the route's ``RouteAccess`` check (``AccessMiddleware``) found it before the handler ran. A
/// handler reads the caller from here, never from the request's headers.
public struct APIRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The caller, for every route but the open ones.
    var principal: Principal?
    /// The user of a `/v1/users/{user}/…` route, valid and one the caller may act for.
    var user: UserID?

    public init(source: ApplicationRequestContextSource) {
        coreContext = CoreRequestContextStorage(source: source)
    }

    /// The caller; a route declared without access to check has none, a mistake of the route
    /// table answered 500.
    func requirePrincipal() throws -> Principal {
        guard let principal else { throw APIError(.internalServerError, code: "internal", message: "this route authenticates no caller") }
        return principal
    }

    /// The path's user, checked against the caller; as ``requirePrincipal()`` for a route without
    /// a user.
    func requireUser() throws -> UserID {
        guard let user else { throw APIError(.internalServerError, code: "internal", message: "this route authorizes no user") }
        return user
    }

    /// A path parameter, percent-decoded: Hummingbird hands them over as the request spelled
    /// them (`N%3A1` is the device `N:1`). Not valid percent-encoding is a 400 with `code`.
    func pathParameter(_ name: String, invalid code: String) throws -> String {
        let encoded = parameters.get(name) ?? ""
        guard encoded.contains("%") else { return encoded }
        guard let decoded = encoded.removingPercentEncoding else {
            throw APIError.badRequest(code, "the \(name) in the path is not valid percent-encoding")
        }
        return decoded
    }
}

/// What a route requires of its caller, checked in this order before its handler runs: a token
/// (401), its scope (403), a valid user id in the path (400), access to that user (404).
enum RouteAccess: Sendable {
    /// Anyone (the operations routes, the live view's page).
    case open
    /// A token that may publish events (`reddot:publish` or `reddot:admin`).
    case publisher
    /// A token with the admin scope; the sentence says what needs it ("webhook subscriptions
    /// need …").
    case admin(String)
    /// A token with the admin scope, and the path's user (which need not exist).
    case adminOfUser(String)
    /// A token for the path's user (its own `sub`, or an administrator's for a user RedDot has
    /// stored something for). With `queryToken`, a request without an `Authorization` header may
    /// carry the token as `?access_token=` (browsers' EventSource cannot send headers).
    case user(queryToken: Bool)
}
