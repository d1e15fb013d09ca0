import BadgeCore
import Foundation
import Hummingbird

/// The query of `GET /v1/users/{user}/badges`, validated before any SQL runs.
struct TreeQuery: Sendable {
    enum Target: Sendable {
        /// The subtree at a path, down to a depth (nil: all).
        case tree(BadgePath, Int?)
        /// Several nodes, flat.
        case nodes([BadgePath])
    }

    /// The most paths one `?paths=` may name.
    static let maximumPaths = 100

    var target: Target
    /// Long-poll: how long to wait for a version other than `since`.
    var wait: Duration?
    var since: Int64?

    init(target: Target, wait: Duration? = nil, since: Int64? = nil) {
        self.target = target
        self.wait = wait
        self.since = since
    }

    /// - Throws: ``APIError`` 400 naming the parameter and what is wrong with it.
    init(_ parameters: Parameters, maximumWait: Duration) throws(APIError) {
        let path = try parameters["path"].map { text throws(APIError) in try Self.path(String(text)) }
        var depth: Int?
        if let text = parameters["depth"] {
            guard let value = Int(text), (0...BadgePath.maximumDepth).contains(value) else {
                throw APIError.badRequest("invalid_depth", "depth must be an integer from 0 to \(BadgePath.maximumDepth), not '\(text.prefix(40))'")
            }
            depth = value
        }
        if let list = parameters["paths"] {
            guard path == nil, depth == nil else {
                throw APIError.badRequest("invalid_query", "paths cannot be combined with path or depth")
            }
            let items = list.split(separator: ",", omittingEmptySubsequences: false)
            guard items.count <= Self.maximumPaths else {
                throw APIError.badRequest("invalid_query", "paths names \(items.count) paths; at most \(Self.maximumPaths)")
            }
            var paths: [BadgePath] = []
            for item in items { paths.append(try Self.path(String(item))) }
            target = .nodes(paths)
        } else {
            target = .tree(path ?? .root, depth)
        }
        if let text = parameters["wait"] {
            guard let wait = Self.duration(String(text)), wait <= maximumWait else {
                throw APIError.badRequest(
                    "invalid_wait", "wait must be a duration such as 30s or 500ms, at most \(maximumWait), not '\(text.prefix(40))'")
            }
            self.wait = wait
        }
        if let text = parameters["since"] {
            guard let value = Int64(text), value >= 0 else {
                throw APIError.badRequest("invalid_since", "since must be a version (an integer ≥ 0), not '\(text.prefix(40))'")
            }
            since = value
        }
    }

    static func path(_ text: String) throws(APIError) -> BadgePath {
        do {
            return try BadgePath(validating: text)
        } catch {
            throw APIError.badRequest("invalid_path", "\(error)")
        }
    }

    /// `30s`, `500ms`, `2m`, or a plain number of seconds; nil if not one of those.
    static func duration(_ text: String) -> Duration? {
        let units: [(suffix: String, scale: Double)] = [("ms", 0.001), ("s", 1), ("m", 60)]
        var number = Substring(text)
        var scale = 1.0
        for unit in units where text.hasSuffix(unit.suffix) {
            number = text.dropLast(unit.suffix.count)
            scale = unit.scale
            break
        }
        guard !number.isEmpty, number.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }), let value = Double(number),
            value.isFinite, value >= 0
        else { return nil }
        return .milliseconds(Int64((value * scale * 1000).rounded()))
    }
}

/// The body of `POST …/badges/clear`: `{"path": "root.chat", "force": false}`.
struct ClearRequest: Sendable {
    var path: BadgePath
    var force: Bool

    private struct Body: Decodable {
        var path: String
        var force: Bool?
    }

    /// - Throws: ``APIError`` 400 for a body that is not such an object, or an invalid path.
    init(_ bytes: [UInt8]) throws(APIError) {
        let body: Body
        do {
            body = try JSONDecoder().decode(Body.self, from: Data(bytes))
        } catch {
            throw APIError.badRequest(
                "invalid_body", "the body must be a JSON object {\"path\": \"root.…\", \"force\": false}: \(Self.reason(error))")
        }
        path = try TreeQuery.path(body.path)
        force = body.force ?? false
    }

    private static func reason(_ error: any Error) -> String {
        switch error {
        case DecodingError.keyNotFound(let key, _): return "\"\(key.stringValue)\" is missing"
        case DecodingError.typeMismatch(_, let context): return "\(context.codingPath.map(\.stringValue).joined(separator: ".")) has the wrong type"
        case DecodingError.valueNotFound(_, let context): return "\(context.codingPath.map(\.stringValue).joined(separator: ".")) is null"
        default: return "it is not valid JSON"
        }
    }
}
