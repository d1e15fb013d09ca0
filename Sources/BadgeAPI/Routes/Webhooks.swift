import BadgeStore
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// `/v1/webhooks`: webhook subscriptions, for administrators (`reddot webhooks run` delivers them).
struct WebhooksController {
    let api: BadgeAPI

    private static let access = RouteAccess.admin("webhook subscriptions")

    var routes: [APIRoute<APIRequestContext>] {
        [
            APIRoute(.get, "/v1/webhooks", access: Self.access) { _, _ in
                var found = try await api.storage { deadline in try await api.store.webhooks(deadline: deadline) }
                for index in found.indices { found[index].secret = "whsec_…" }
                return BadgeAPI.json(status: .ok, try Self.text(Listing(webhooks: found)))
            },
            APIRoute(.put, "/v1/webhooks/:id", access: Self.access) { request, context in
                let id = try context.pathParameter("id", invalid: "invalid_webhook")
                let body = try await api.collectBody(request, limit: api.configuration.maximumBodySize)
                let subscription = try Self.subscription(id: id, body)
                let created = try await api.storage { deadline in try await api.store.putWebhook(subscription, deadline: deadline) }
                api.logger.notice("webhook subscription stored", metadata: ["webhook": "\(id)", "url": "\(subscription.url)"])
                return BadgeAPI.json(status: created ? .created : .ok, try Self.text(subscription))
            },
            APIRoute(.delete, "/v1/webhooks/:id", access: Self.access) { _, context in
                let id = try context.pathParameter("id", invalid: "invalid_webhook")
                guard try await api.storage({ deadline in try await api.store.removeWebhook(id, deadline: deadline) }) else {
                    throw Self.noSubscription(id)
                }
                return Response(status: .noContent)
            },
            APIRoute(.post, "/v1/webhooks/:id/replay", access: Self.access) { _, context in
                let id = try context.pathParameter("id", invalid: "invalid_webhook")
                guard try await api.storage({ deadline in try await api.store.webhooks(deadline: deadline) }).contains(where: { $0.id == id }) else {
                    throw Self.noSubscription(id)
                }
                let replayed = try await api.storage { deadline in try await api.store.replayWebhook(id, deadline: deadline) }
                return BadgeAPI.json(status: .ok, #"{"replayed":\#(replayed)}"#)
            },
        ]
    }

    private struct Listing: Encodable {
        var webhooks: [WebhookSubscription]
    }

    /// What a PUT may send: the id is the path's; the secret is made when left out.
    private struct Body: Decodable {
        var url: String
        var secret: String?
        var paths: [String]?
        var kinds: [String]
    }

    private static func subscription(id: String, _ body: ByteBuffer) throws -> WebhookSubscription {
        let decoded: Body
        do {
            decoded = try JSONDecoder().decode(Body.self, from: Data(buffer: body))
        } catch {
            throw APIError.badRequest("invalid_webhook", "the body must be a JSON object {url, kinds, paths?, secret?}")
        }
        do {
            return try WebhookSubscription(
                id: id, url: decoded.url, secret: decoded.secret ?? WebhookSubscription.makeSecret(), paths: decoded.paths ?? ["root"],
                kinds: decoded.kinds)
        } catch {
            throw APIError.badRequest("invalid_webhook", "\(error)")
        }
    }

    private static func noSubscription(_ id: String) -> APIError {
        APIError(.notFound, code: "not_found", message: "no webhook subscription \(id.prefix(64))")
    }

    private static func text(_ value: some Encodable) throws -> String {
        String(decoding: try BadgeAPI.encode(value).readableBytesView, as: UTF8.self)
    }
}
