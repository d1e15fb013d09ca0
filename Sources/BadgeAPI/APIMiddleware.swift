import BadgeCore
import Foundation
import Hummingbird
import Logging
import Metrics
import Synchronization

/// Turns every error into the JSON error shape, and counts requests per route and status.
struct APIMiddleware<Context: RequestContext>: RouterMiddleware {
    let logger: Logger
    /// The router's routes, so that another method on a known path answers 405 with `Allow`
    /// rather than 404.
    let routes: RouteTable

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let started = ContinuousClock.now
        let response: Response
        do {
            response = try await next(request, context)
        } catch let error as APIError {
            response = error.response()
        } catch let error as HTTPError {
            response = answer(error, to: request)
        } catch {
            let answer = APIError.from(error)
            if answer.status == .internalServerError {
                logger.info("request failed", metadata: ["http.path": "\(context.endpointPath ?? "-")", RedDotLogKey.error: "\(error)"])
            }
            response = answer.response()
        }
        let (counter, timer) = RequestMetrics.shared.metrics(
            route: context.endpointPath ?? "unmatched", method: Self.methodLabel(request.method), status: Int(response.status.code))
        counter.increment()
        timer.recordNanoseconds((ContinuousClock.now - started).nanoseconds)
        return response
    }

    /// The JSON answer to Hummingbird's own errors; no route for a known path is a wrong method.
    private func answer(_ error: HTTPError, to request: Request) -> Response {
        if error.status == .notFound {
            let allowed = routes.methods(for: request.uri.path)
            if !allowed.isEmpty {
                let names = allowed.map(\.rawValue).joined(separator: ", ")
                var headers = HTTPFields()
                headers[.allow] = names
                return APIError(
                    .methodNotAllowed, code: "method_not_allowed",
                    message: "\(request.method) is not allowed on \(request.uri.path); use \(names)", headers: headers
                ).response()
            }
        }
        let code: String
        switch error.status.code {
        case 404: code = "not_found"
        case 405: code = "method_not_allowed"
        case 413: code = "body_too_large"
        default: code = error.status.code < 500 ? "bad_request" : "internal"
        }
        let message: String
        if error.status == .notFound {
            message = "no route for \(request.method) \(request.uri.path)"
        } else if error.status == .contentTooLarge {
            message = "the request body is too large"
        } else {
            message = error.body ?? error.status.reasonPhrase
        }
        return APIError(error.status, code: code, message: message, headers: error.headers).response()
    }

    /// The method as a metrics label: the standard ones by name, any other as "other" (a client
    /// must not be able to make new time series at will).
    static func methodLabel(_ method: HTTPRequest.Method) -> String {
        switch method {
        case .get, .head, .post, .put, .delete, .patch, .options, .trace, .connect: method.rawValue
        default: "other"
        }
    }
}

/// A route: a method, a path pattern (a `:name` segment matches any one segment), what it
/// requires of its caller (checked before the handler runs, by the router's access middleware)
/// and its handler.
struct APIRoute<Context: RequestContext>: Sendable {
    var method: HTTPRequest.Method
    var path: String
    var access: RouteAccess
    var handler: @Sendable (Request, Context) async throws -> Response

    init(
        _ method: HTTPRequest.Method, _ path: String, access: RouteAccess,
        _ handler: @escaping @Sendable (Request, Context) async throws -> Response
    ) {
        self.method = method
        self.path = path
        self.access = access
        self.handler = handler
    }
}

/// The method and path pattern of every route of a router.
struct RouteTable: Sendable {
    private let routes: [(method: HTTPRequest.Method, segments: [Substring])]

    init(_ routes: [(method: HTTPRequest.Method, path: String)]) {
        self.routes = routes.map { ($0.method, $0.path.split(separator: "/", omittingEmptySubsequences: false)) }
    }

    /// The methods that have a route for `path`; empty for a path no route has.
    func methods(for path: String) -> [HTTPRequest.Method] {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        return routes.filter { route in
            route.segments.count == segments.count
                && zip(route.segments, segments).allSatisfy { pattern, segment in
                    pattern.hasPrefix(":") ? !segment.isEmpty : pattern == segment
                }
        }.map(\.method)
    }
}

extension Router {
    /// Serves `routes` behind the API middleware, which answers another method on one of their
    /// paths with 405 and `Allow`; each route whose access is not `.open` behind the middleware
    /// `guarding` makes for it.
    func addAPIRoutes(
        _ routes: [APIRoute<Context>], logger: Logger, guarding: (RouteAccess) -> (any MiddlewareProtocol<Request, Response, Context>)? = { _ in nil }
    ) {
        add(middleware: APIMiddleware(logger: logger, routes: RouteTable(routes.map { ($0.method, $0.path) })))
        for route in routes {
            if case .open = route.access {
                on(RouterPath(route.path), method: route.method, use: route.handler)
            } else if let middleware = guarding(route.access) {
                self.group().add(middleware: middleware).on(RouterPath(route.path), method: route.method, use: route.handler)
            } else {
                // A guarded route without its guard would answer anyone: refuse it instead.
                on(RouterPath(route.path), method: route.method) { (_: Request, _: Context) throws -> Response in
                    throw APIError(.internalServerError, code: "internal", message: "this route's access check is missing")
                }
            }
        }
    }
}

/// The per-route request metrics, made once per (route, method, status) rather than looked up
/// in the metrics factory on every request.
final class RequestMetrics: Sendable {
    static let shared = RequestMetrics()

    private struct Key: Hashable {
        var route: String
        var method: String
        var status: Int
    }

    private let made = Mutex<[Key: (Counter, Metrics.Timer)]>([:])

    func metrics(route: String, method: String, status: Int) -> (Counter, Metrics.Timer) {
        let key = Key(route: route, method: method, status: status)
        if let found = made.withLock({ $0[key] }) { return found }
        let created = (
            Counter(label: "reddot_api_requests_total", dimensions: [("route", route), ("method", method), ("status", "\(status)")]),
            Metrics.Timer(label: "reddot_api_request_seconds", dimensions: [("route", route)])
        )
        return made.withLock { made in
            if let found = made[key] { return found }
            made[key] = created
            return created
        }
    }
}
