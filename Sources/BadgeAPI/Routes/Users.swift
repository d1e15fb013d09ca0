import BadgeCore
import BadgeStore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// `/v1/users/{user}/export` and `DELETE /v1/users/{user}`: a user's data on request (GDPR
/// access and erasure), for administrators.
struct UsersController {
    let api: BadgeAPI

    /// The user of an administrator's request: a token (401) with the admin scope (403), and a
    /// valid user id (400). The user need not exist: an export of nobody is empty, and erasing
    /// nobody still marks the id, so that events already on their way stay out.
    private static let access = RouteAccess.adminOfUser("a user's export and erasure")

    var routes: [APIRoute<APIRequestContext>] {
        [
            APIRoute(.get, "/v1/users/:user/export", access: Self.access) { _, context in
                let user = try context.requireUser()
                let json = try await api.storage { deadline in try await api.store.exportUser(user, deadline: deadline) }
                return BadgeAPI.json(status: .ok, json)
            },
            APIRoute(.delete, "/v1/users/:user", access: Self.access) { _, context in
                let user = try context.requireUser()
                // Who asked, for the audit trail: the administrator token's subject.
                let by = try context.requirePrincipal().subject ?? "-"
                let erasure = try await api.storage { deadline in try await api.store.eraseUser(user, deadline: deadline) }
                api.logger.notice(
                    "erased a user on request",
                    metadata: ["user": "\(user.rawValue)", "rows": "\(erasure.total)", "settled": "\(erasure.settled)", "by": "\(by)"])
                return BadgeAPI.json(status: .ok, String(decoding: try BadgeAPI.encode(erasure).readableBytesView, as: UTF8.self))
            },
        ]
    }
}
