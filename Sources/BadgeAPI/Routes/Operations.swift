import Hummingbird
import NIOCore
import Prometheus

/// `/healthz`, `/readyz`, `/metrics`, `/openapi.yaml`, and the live view at `/`.
///
/// The OpenAPI 3.1 description of the routes (`Resources/openapi.yaml`; a test checks every
/// route of the router is in it, and schemathesis checks the answers against it) and the live
/// view (`Resources/live.html`) are compiled into the binary, and served byte for byte.
///
/// The live view, served when enabled (`reddot dev`, or `reddot serve --live-view`), shows one
/// user's badge tree as red dots and numbers, kept current by the stream: the fastest way to see
/// what RedDot does. `/?user=alice&token=JWT` opens alice's tree (the token goes to the stream as
/// `access_token`, because browsers' EventSource cannot send headers); without them, a form asks.
struct OperationsController {
    let api: BadgeAPI

    var routes: [APIRoute<APIRequestContext>] {
        var routes: [APIRoute<APIRequestContext>] = [
            APIRoute(.get, "/healthz", access: .open) { _, _ in BadgeAPI.json(status: .ok, "{\"status\":\"ok\"}") },
            APIRoute(.get, "/readyz", access: .open) { _, _ in await self.readiness() },
            APIRoute(.get, "/metrics", access: .open) { _, _ in try self.metricsPage() },
            APIRoute(.get, "/openapi.yaml", access: .open) { _, _ in
                var headers = HTTPFields()
                headers[.contentType] = "application/yaml; charset=utf-8"
                return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: PackageResources.openapi_yaml)))
            },
        ]
        if api.configuration.liveView {
            routes.append(
                APIRoute(.get, "/", access: .open) { _, _ in
                    var headers = HTTPFields()
                    headers[.contentType] = "text/html; charset=utf-8"
                    headers[.cacheControl] = "no-store"
                    return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: PackageResources.live_html)))
                })
        }
        return routes
    }

    private func readiness() async -> Response {
        var problems = await api.store.readinessProblems(deadline: .now + .seconds(2))
        if !api.hub.isListening { problems.append("the change listener is not connected") }
        if problems.isEmpty {
            for check in api.readinessChecks {
                if let problem = await check() { problems.append(problem) }
            }
        }
        if problems.isEmpty { return BadgeAPI.json(status: .ok, "{\"status\":\"ready\"}") }
        return APIError(.serviceUnavailable, code: "not_ready", message: problems.joined(separator: "; ")).response()
    }

    private func metricsPage() throws -> Response {
        guard let metrics = api.metrics else { throw APIError(.notFound, code: "not_found", message: "metrics are not enabled") }
        return Self.metricsResponse(metrics)
    }

    static func metricsResponse(_ metrics: PrometheusCollectorRegistry) -> Response {
        var bytes: [UInt8] = []
        metrics.emit(into: &bytes)
        var headers = HTTPFields()
        headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}
