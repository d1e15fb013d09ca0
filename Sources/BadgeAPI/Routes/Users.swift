import BadgeCore
import BadgeStore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// `/v1/users/{user}/export` and `DELETE /v1/users/{user}`: a user's data on request (GDPR
/// access and erasure), for administrators.
extension BadgeAPI {
    var userRoutes: [APIRoute<BasicRequestContext>] {
        [
            APIRoute(.get, "/v1/users/:user/export") { request, context in
                let user = try await self.authorizeAdmin(request, context)
                let json = try await self.storage { deadline in try await self.store.exportUser(user, deadline: deadline) }
                return Self.json(status: .ok, json)
            },
            APIRoute(.delete, "/v1/users/:user") { request, context in
                let user = try await self.authorizeAdmin(request, context)
                let erasure = try await self.storage { deadline in try await self.store.eraseUser(user, deadline: deadline) }
                self.logger.notice(
                    "erased a user on request", metadata: ["user": "\(user.rawValue)", "rows": "\(erasure.total)", "settled": "\(erasure.settled)"])
                return Self.json(status: .ok, String(decoding: try Self.encode(erasure).readableBytesView, as: UTF8.self))
            },
        ]
    }

    /// The user of an administrator's request: a token (401) with the admin scope (403), and a
    /// valid user id (400). The user need not exist: an export of nobody is empty, and erasing
    /// nobody still marks the id, so that events already on their way stay out.
    private func authorizeAdmin(_ request: Request, _ context: BasicRequestContext) async throws -> UserID {
        try await requireAdmin(request, for: "a user's export and erasure")
        return try Self.pathUser(context)
    }

    /// A token (401) with the admin scope (403, naming `what` needs it).
    func requireAdmin(_ request: Request, for what: String) async throws {
        let principal = try await authenticator.authenticate(request.headers[.authorization])
        guard principal.isAdmin else {
            throw APIError(.forbidden, code: "forbidden", message: "\(what) need a token with scope reddot:admin")
        }
    }
}
