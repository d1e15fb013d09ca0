public import BadgeCore
import Foundation

/// A webhook subscription (issue 28): where to deliver, the secret deliveries are signed with,
/// the badge subtrees and the kinds of change it wants. Checked when made, so that a stored one
/// is always deliverable.
public struct WebhookSubscription: Sendable, Hashable, Codable {
    /// What a subscription can ask for.
    public enum Kind: String, Sendable, Hashable, Codable, CaseIterable {
        /// A node within the paths stopped showing (cleared, read, removed, expired).
        case cleared
        /// A node within the paths still shows, with nothing unseen (the user saw it).
        case seen
        /// The user's visible root totals (the app-icon number) changed.
        case root
        /// The set of active broadcasts changed (one delivery for every user).
        case broadcasts
    }

    /// Where a subscription came from: the admin API, or a subscriptions file (replaced whole
    /// each time `reddot webhooks run` starts with one).
    public enum Origin: String, Sendable, Hashable, Codable {
        case api, file
    }

    /// Letters, digits, `_` and `-`, 1 to 64.
    public var id: String
    /// `http://` or `https://`.
    public var url: String
    /// `whsec_` and the base64 of 24 to 64 bytes: the HMAC-SHA256 key.
    public var secret: String
    /// Badge paths: a node is within one when it is the path or below it.
    public var paths: [BadgePath]
    /// The kinds wanted, without repeats.
    public var kinds: [Kind]
    /// Where it came from.
    public var origin: Origin

    /// A checked subscription.
    ///
    /// - Throws: ``Invalid`` with a sentence naming the field.
    public init(id: String, url: String, secret: String, paths: [String], kinds: [String], origin: Origin = .api) throws(Invalid) {
        guard (1...64).contains(id.utf8.count), id.utf8.allSatisfy({ Self.idBytes.contains($0) }) else {
            throw Invalid("id must be 1 to 64 letters, digits, _ or -")
        }
        guard url.utf8.count <= 2048, Self.matches(url, Self.urlPattern), let parsed = URL(string: url), let host = parsed.host, !host.isEmpty
        else {
            throw Invalid(
                "url must be an http:// or https:// URL (lower case) with a host name or IPv4 address, an optional port 1-65535, and a path of URL characters (at most 2,048 bytes)")
        }
        guard secret.utf8.count <= 200, Self.matches(secret, Self.secretPattern), Self.key(of: secret) != nil else {
            throw Invalid("secret must be whsec_ followed by the base64 of 24 to 64 random bytes (reddot webhooks secret makes one)")
        }
        guard (1...32).contains(paths.count) else { throw Invalid("paths must hold 1 to 32 badge paths") }
        var checked: [BadgePath] = []
        for path in paths {
            do {
                checked.append(try BadgePath(validating: path))
            } catch {
                throw Invalid("paths: \(error)")
            }
        }
        var wanted: [Kind] = []
        for kind in kinds {
            guard let known = Kind(rawValue: kind) else {
                // Quoted with escapes, and cut: the kind is the caller's text (a line break in it stays on one line).
                throw Invalid("kinds: \(String(reflecting: String(kind.prefix(64)))) is not one of \(Kind.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            if !wanted.contains(known) { wanted.append(known) }
        }
        guard !wanted.isEmpty else { throw Invalid("kinds must name at least one of \(Kind.allCases.map(\.rawValue).joined(separator: ", "))") }
        (self.id, self.url, self.secret, self.paths, self.kinds, self.origin) = (id, url, secret, checked, wanted, origin)
    }

    /// Whether `path` is within one of the subscription's paths.
    public func covers(_ path: BadgePath) -> Bool {
        paths.contains { path.isWithin($0) }
    }

    /// What a subscription's `url` may be, as the API document's pattern says it (a test keeps
    /// the two equal, and the table's check takes it): http or https in lower case, a host name or IPv4 address, an optional port 1-65535, and
    /// a path, query and fragment of URL characters with valid %-escapes.
    public static let urlPattern =
        #"^https?://[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"#
        + #"(?::(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3}))?"#
        + #"(?:[/?#](?:[A-Za-z0-9._~!$&'()*+,;=:@/?#-]|%[0-9A-Fa-f]{2})*)?$"#

    /// What a `secret` may be, as the API document's pattern says it: `whsec_` and the padded
    /// base64 of 24 to 64 bytes.
    public static let secretPattern =
        #"^whsec_(?:(?:[A-Za-z0-9+/]{4}){8,21}|(?:[A-Za-z0-9+/]{4}){8,21}[A-Za-z0-9+/]{2}==|(?:[A-Za-z0-9+/]{4}){8,20}[A-Za-z0-9+/]{3}=)$"#

    /// Whether all of `text` matches `pattern` (compiled here: a `Regex` is not `Sendable`, and
    /// subscriptions are checked rarely).
    static func matches(_ text: String, _ pattern: String) -> Bool {
        guard let grammar = try? Regex(pattern) else { return false }
        return (try? grammar.wholeMatch(in: text)) != nil
    }

    /// The HMAC key of a `whsec_` secret, nil when it is not one.
    public static func key(of secret: String) -> [UInt8]? {
        // The grammar is checked once, when a subscription is made; a delivery only decodes.
        guard secret.hasPrefix("whsec_"), let data = Data(base64Encoded: String(secret.dropFirst(6))), (24...64).contains(data.count) else {
            return nil
        }
        return [UInt8](data)
    }

    /// A new random secret (32 bytes).
    public static func makeSecret() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return "whsec_" + Data(bytes).base64EncodedString()
    }

    private static let idBytes = Set(Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-".utf8))

    /// A subscription that cannot be stored, and why.
    public struct Invalid: Error, CustomStringConvertible, Sendable {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    enum CodingKeys: String, CodingKey {
        case id, url, secret, paths, kinds, origin
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        try self.init(
            id: try container.decode(String.self, forKey: .id), url: try container.decode(String.self, forKey: .url),
            secret: try container.decode(String.self, forKey: .secret),
            paths: try container.decodeIfPresent([String].self, forKey: .paths) ?? ["root"],
            kinds: try container.decode([String].self, forKey: .kinds),
            origin: try container.decodeIfPresent(Origin.self, forKey: .origin) ?? .api)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(url, forKey: .url)
        try container.encode(secret, forKey: .secret)
        try container.encode(paths.map(\.rawValue), forKey: .paths)
        try container.encode(kinds.map(\.rawValue), forKey: .kinds)
        try container.encode(origin, forKey: .origin)
    }
}
