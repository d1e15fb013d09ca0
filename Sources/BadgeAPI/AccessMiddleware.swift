import BadgeCore
import Foundation
import Hummingbird

/// Checks a route's ``RouteAccess`` and puts the caller (and the path's user) in the
/// ``APIRequestContext`` for its handler: the one place the API authenticates and authorizes.
struct AccessMiddleware: RouterMiddleware {
    typealias Context = APIRequestContext

    let access: RouteAccess
    let authenticator: Authenticator
    /// Whether RedDot has stored anything for a user (an administrator asking for one it has not
    /// gets the answer a user asking for someone else's tree gets).
    let userExists: @Sendable (UserID) async throws -> Bool

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        switch access {
        case .open:
            break
        case .publisher:
            let principal = try await authenticator.authenticate(request.headers[.authorization])
            guard principal.mayPublish else {
                throw APIError(.forbidden, code: "forbidden", message: "publishing needs a token with scope reddot:admin or reddot:publish")
            }
            context.principal = principal
        case .admin(let what):
            context.principal = try await admin(request, for: what)
        case .adminOfUser(let what):
            context.principal = try await admin(request, for: what)
            context.user = try Self.pathUser(context)
        case .user(let queryToken):
            var authorization = request.headers[.authorization]
            if authorization == nil, queryToken, let token = request.uri.queryParameters["access_token"] {
                authorization = "Bearer \(token)"
            }
            let principal = try await authenticator.authenticate(authorization)
            let user = try Self.pathUser(context)
            guard principal.mayActFor(user) else { throw APIError.userNotFound() }
            if principal.subject != user.rawValue {
                guard try await userExists(user) else { throw APIError.userNotFound() }
            }
            (context.principal, context.user) = (principal, user)
        }
        return try await next(request, context)
    }

    /// A token (401) with the admin scope (403, naming `what` needs it).
    private func admin(_ request: Request, for what: String) async throws -> Principal {
        let principal = try await authenticator.authenticate(request.headers[.authorization])
        guard principal.isAdmin else {
            throw APIError(.forbidden, code: "forbidden", message: "\(what) need a token with scope reddot:admin")
        }
        return principal
    }

    /// The user id of a `/v1/users/{user}/…` path (400 `invalid_user` when it is not one).
    static func pathUser(_ context: Context) throws -> UserID {
        // "a%2Fb" is the user "a/b".
        let name = try context.pathParameter("user", invalid: "invalid_user")
        do {
            return try UserID(validating: name)
        } catch {
            throw APIError.badRequest("invalid_user", "\(error)")
        }
    }
}
