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
    static let maximumPaths = RequestValues.maximumPaths

    var target: Target
    /// Long-poll: how long to wait for a version other than `since`.
    var wait: Duration?
    var since: Int64?

    init(target: Target, wait: Duration? = nil, since: Int64? = nil) {
        self.target = target
        self.wait = wait
        self.since = since
    }

    /// - Throws: ``APIError`` 400 naming the parameter and what is wrong with it (the values are
    ///   read by ``RequestValues``, which never traps, whatever the text).
    init(_ parameters: Parameters, maximumWait: Duration) throws(APIError) {
        do throws(RequestValueError) {
            let path = try parameters["path"].map { text throws(RequestValueError) in try RequestValues.path(text) }
            let depth = try parameters["depth"].map { text throws(RequestValueError) in try RequestValues.depth(text) }
            if let list = parameters["paths"] {
                guard path == nil, depth == nil else {
                    throw RequestValueError("invalid_query", "paths cannot be combined with path or depth")
                }
                target = .nodes(try RequestValues.paths(list))
            } else {
                target = .tree(path ?? .root, depth)
            }
            wait = try parameters["wait"].map { text throws(RequestValueError) in try RequestValues.wait(text, maximum: maximumWait) }
            since = try parameters["since"].map { text throws(RequestValueError) in try RequestValues.since(text) }
        } catch {
            throw APIError(error)
        }
    }

    static func path(_ text: String) throws(APIError) -> BadgePath {
        do {
            return try RequestValues.path(text)
        } catch {
            throw APIError(error)
        }
    }

    /// `30s`, `500ms`, `2m`, or a plain number of seconds; nil if not one of those (see
    /// ``RequestValues/duration(_:)``).
    static func duration(_ text: String) -> Duration? {
        RequestValues.duration(text)
    }
}

extension APIError {
    /// A 400 answer for a query parameter or header that cannot be read.
    init(_ error: RequestValueError) {
        self = .badRequest(error.code, error.message)
    }
}

/// The body of `POST …/badges/clear` (`{"path": "root.chat", "force": false, "seen_version": 7,
/// "action_id": "…"}`) and of `POST …/badges/seen` (`{"path": "root.chat", "seen_version": 7}`);
/// `action_id` is optional in both.
struct ActionRequest: Sendable {
    /// Which action.
    enum Kind: Sendable {
        case clear, seen, mute, unmute

        /// Whether the action applies at a rendered version (clear, seen); a mute or unmute
        /// applies from now.
        var takesVersion: Bool { self == .clear || self == .seen }
    }

    var kind: Kind
    var path: BadgePath
    var force: Bool
    /// The version the client showed: clear only if the tree is still that one.
    var seenVersion: Int64?
    /// The client's id of the action: applied once however often it is sent.
    var actionID: ActionID?
    /// When a snooze ends (mute only).
    var until: Date?

    private struct Body: Decodable {
        var path: String
        var force: Bool?
        var seenVersion: Int64?
        var actionID: String?
        var until: String?

        enum CodingKeys: String, CodingKey {
            case path, force, until
            case seenVersion = "seen_version"
            case actionID = "action_id"
        }
    }

    /// The badge operation of the action.
    var operation: BadgeOperation {
        switch kind {
        case .clear: return .clear(force: force)
        case .seen: return .seen
        case .mute: return .mute(until: until)
        case .unmute: return .unmute
        }
    }

    /// - Throws: ``APIError`` 400 for a body that is not such an object, an invalid path, a
    ///   negative `seen_version`, an invalid `action_id`, `force` on a seen, mute or unmute (they
    ///   always cover the subtree), `seen_version` on a mute or unmute, `root` for a mute or
    ///   unmute, or `until` on anything but a mute or not an RFC 3339 time.
    init(_ kind: Kind, _ bytes: [UInt8]) throws(APIError) {
        self.kind = kind
        let body: Body
        do {
            body = try JSONDecoder().decode(Body.self, from: Data(bytes))
        } catch {
            throw APIError.badRequest(
                "invalid_body", "the body must be a JSON object {\"path\": \"root.…\", \"force\": false}: \(Self.reason(error))")
        }
        path = try TreeQuery.path(body.path)
        force = body.force ?? false
        if kind == .seen, body.force != nil {
            throw APIError.badRequest("invalid_body", "force does not apply to seen: a seen always covers the whole subtree")
        }
        if !kind.takesVersion {
            if body.force != nil {
                throw APIError.badRequest("invalid_body", "force does not apply to \(kind): it always covers the whole subtree")
            }
            if body.seenVersion != nil {
                throw APIError.badRequest("invalid_body", "seen_version does not apply to \(kind): it applies from now")
            }
            if let problem = operation.pathProblem(path) { throw APIError.badRequest("invalid_path", problem) }
        }
        if let text = body.until {
            guard kind == .mute else {
                throw APIError.badRequest("invalid_body", "until applies only to mute (a snooze ends then)")
            }
            guard let date = Date(rfc3339Clamping: text) else {
                throw APIError.badRequest(
                    "invalid_body", "until is \(Quoting.quoted(text)); it must be an RFC 3339 timestamp such as '2026-03-01T12:00:00Z'")
            }
            until = date
        }
        if let seen = body.seenVersion, seen < 0 {
            throw APIError.badRequest("invalid_body", "seen_version must be a version (an integer ≥ 0), not \(seen)")
        }
        seenVersion = body.seenVersion
        do {
            actionID = try body.actionID.map { text throws(BadgeValidationError) in try ActionID(validating: text) }
        } catch {
            throw APIError.badRequest("invalid_body", error.description)
        }
    }

    /// The version to clear at: `seen_version`, or the version of an `If-Match` ETag (`*`
    /// matches any); nil without either.
    ///
    /// - Throws: 400 when `If-Match` names no version, or names another than `seen_version`.
    func version(ifMatch header: String?) throws(APIError) -> Int64? {
        guard let header else { return seenVersion }
        guard let ifMatch = IfMatch(header) else {
            throw APIError.badRequest("invalid_if_match", "If-Match must be one ETag this API gave (\"7\" or W/\"7\"), or *")
        }
        guard case .version(let tagged) = ifMatch else { return seenVersion }
        if let seenVersion, seenVersion != tagged {
            throw APIError.badRequest(
                "invalid_if_match", "If-Match names version \(tagged) but seen_version is \(seenVersion); give one")
        }
        return tagged
    }

    private static func reason(_ error: any Error) -> String {
        /// The field a decoding error is about, or "the body" for the whole document.
        func field(_ context: DecodingError.Context) -> String {
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            return path.isEmpty ? "the body (a JSON object)" : "\"\(path)\""
        }
        switch error {
        case DecodingError.keyNotFound(let key, _): return "\"\(key.stringValue)\" is missing"
        case DecodingError.typeMismatch(_, let context): return "\(field(context)) has the wrong type"
        case DecodingError.valueNotFound(_, let context): return "\(field(context)) is null"
        // A number out of its type's range, or a value the type refuses.
        case DecodingError.dataCorrupted(let context) where !context.codingPath.isEmpty:
            return "\(field(context)) is out of range or not valid"
        // Foundation reads a number too large for its field as broken JSON, with no field named.
        default: return "it is not valid JSON, or a number in it is out of its field's range"
        }
    }
}
