import Foundation
import Hummingbird
import Logging
import Metrics

/// Turns every error into the JSON error shape, and counts requests per route and status.
struct APIMiddleware<Context: RequestContext>: RouterMiddleware {
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let started = ContinuousClock.now
        let response: Response
        do {
            response = try await next(request, context)
        } catch let error as APIError {
            response = error.response()
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
        let route = context.endpointPath ?? "unmatched"
        Counter(
            label: "reddot_api_requests_total",
            dimensions: [("route", route), ("method", request.method.rawValue), ("status", "\(response.status.code)")]
        ).increment()
        Metrics.Timer(label: "reddot_api_request_seconds", dimensions: [("route", route)])
            .recordNanoseconds((ContinuousClock.now - started).nanoseconds)
        return response
    }
}

extension Duration {
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
