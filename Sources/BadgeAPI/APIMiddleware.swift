import Foundation
import Hummingbird
import Logging
import Metrics
import Synchronization

/// Turns every error into the JSON error shape, and counts requests per route and status.
struct APIMiddleware<Context: RequestContext>: RouterMiddleware {
    let logger: Logger
    /// The methods a path has routes for (empty: an unknown path), so that another method on a
    /// known path answers 405 with `Allow` rather than 404.
    let allowedMethods: @Sendable (String) -> [HTTPRequest.Method]

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let started = ContinuousClock.now
        let response: Response
        do {
            response = try await next(request, context)
        } catch let error as APIError {
            response = error.response()
        } catch let error as HTTPError where error.status == .notFound && !allowedMethods(request.uri.path).isEmpty {
            let allowed = allowedMethods(request.uri.path).map(\.rawValue).joined(separator: ", ")
            var headers = HTTPFields()
            headers[.allow] = allowed
            response = APIError(
                .methodNotAllowed, code: "method_not_allowed",
                message: "\(request.method) is not allowed on \(request.uri.path); use \(allowed)", headers: headers
            ).response()
        } catch let error as HTTPError {
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
            response = APIError(error.status, code: code, message: message, headers: error.headers).response()
        } catch {
            let answer = APIError.from(error)
            if answer.status == .internalServerError {
                logger.error("request failed", metadata: ["http.path": "\(context.endpointPath ?? "-")", "error": "\(error)"])
            }
            response = answer.response()
        }
        let (counter, timer) = RequestMetrics.shared.metrics(
            route: context.endpointPath ?? "unmatched", method: Self.methodLabel(request.method), status: Int(response.status.code))
        counter.increment()
        timer.recordNanoseconds((ContinuousClock.now - started).nanoseconds)
        return response
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

extension Duration {
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
