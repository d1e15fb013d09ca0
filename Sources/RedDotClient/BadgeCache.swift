import Foundation

/// The offline copy of one user's tree (MagicRemind's restore): the last tree the server
/// confirmed and the clears and seens it has not answered yet, written to a file after each
/// change, read at start so the app shows its badges (and its taps) at once, before the network
/// answers.
///
/// The file is JSON, `{"format": 2, "server", "user", "version", "nodes": [badges], "queued":
/// [actions]}` (format 1, from older clients, has no `queued`), written atomically (a crash
/// leaves the old file or the new one). Each user of each server has a file of their own in the
/// cache folder (``fileName(server:user:)``); a file of another server or user, or one that
/// cannot be read, is not used.
final class BadgeCache: Sendable {
    let file: URL
    let server: String
    let user: String
    private let writer = ClientLock<(latest: Data?, busy: Bool, sequence: UInt64)>((nil, false, 0))
    private let failure = ClientLock<RedDotClientError?>(nil)

    private struct Contents: Codable {
        var format: Int
        var server: String
        var user: String
        var version: Int64
        var nodes: [Badge]
        var queued: [PendingAction.Stored]?
    }

    /// What the file holds.
    struct Restored {
        var tree: BadgeTreeState
        var queued: [PendingAction.Stored]
    }

    /// The cache of `user` of `server` in `directory`.
    init(directory: URL, server: String, user: String) {
        self.file = directory.appendingPathComponent(Self.fileName(server: server, user: user), isDirectory: false)
        self.server = server
        self.user = user
    }

    /// The name of the cache file of `user` of `server`: `reddot-` and the user id's first 40
    /// characters of `A-Z a-z 0-9 _ -` (for a person looking at the folder), then a 64-bit
    /// FNV-1a hash of the server and the whole user id in hex, so that every user of every
    /// server has a file of their own, named the same in every run.
    static func fileName(server: String, user: String) -> String {
        let readable = String(user.unicodeScalars.filter { $0.isASCII && (CharacterSet.alphanumerics.contains($0) || $0 == "_" || $0 == "-") }.prefix(40))
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in Array(server.utf8) + [0] + Array(user.utf8) {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        return "reddot-\(readable)-\(String(repeating: "0", count: 16 - hex.count) + hex).json"
    }

    /// The tree and the queued actions the file holds; nil when there is no file, or it is of
    /// another server or user.
    ///
    /// - Throws: ``RedDotClientError`` (`.cache`) when the file exists but cannot be read.
    func load() throws -> Restored? {
        let data: Data
        do {
            data = try Data(contentsOf: file)
        } catch CocoaError.fileReadNoSuchFile {
            return nil
        } catch {
            throw RedDotClientError(.cache, "the offline cache \(file.path) cannot be read: \(error.localizedDescription)")
        }
        let contents: Contents
        do {
            contents = try JSONDecoder().decode(Contents.self, from: data)
        } catch {
            throw RedDotClientError(.cache, "the offline cache \(file.path) is not a RedDotClient cache; it is not used and will be replaced")
        }
        guard (1...2).contains(contents.format), contents.server == server, contents.user == user, contents.version >= -1 else { return nil }
        var nodes: [String: Badge] = [:]
        for badge in contents.nodes where badge.shown { nodes[badge.path] = badge }
        return Restored(tree: BadgeTreeState(version: contents.version, nodes: nodes), queued: contents.queued ?? [])
    }

    /// Saves `tree` and the actions not answered yet, the client's `sequence`-th state
    /// (numbered under the client's lock). Saves from several threads are written one at a
    /// time, and the file ends with the state of the highest sequence, whatever order the
    /// threads come in.
    func save(_ tree: BadgeTreeState, queued: [PendingAction.Stored], sequence: UInt64) {
        let contents = Contents(
            format: 2, server: server, user: user, version: tree.version, nodes: tree.nodes.values.sorted { $0.path < $1.path },
            queued: queued)
        guard let data = try? JSONEncoder().encode(contents) else { return }
        let mine = writer.withLock { state -> Bool in
            guard sequence > state.sequence else { return false }
            state.sequence = sequence
            state.latest = data
            guard !state.busy else { return false }
            state.busy = true
            return true
        }
        guard mine else { return }  // the thread writing now writes this too
        while let next = writer.withLock({ state -> Data? in
            defer { state.latest = nil }
            if state.latest == nil { state.busy = false }
            return state.latest
        }) {
            do {
                try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
                try next.write(to: file, options: .atomic)
                failure.withLock { $0 = nil }
                written.withLock { $0 = true }
            } catch {
                failure.withLock {
                    $0 = RedDotClientError(.cache, "the offline cache \(file.path) cannot be written: \(error.localizedDescription)")
                }
            }
        }
    }

    /// Why the last save failed; nil when it succeeded.
    var lastFailure: RedDotClientError? { failure.withLock { $0 } }
    /// Whether a save has written the file (a file that could not be read is then replaced).
    var hasWritten: Bool { written.withLock { $0 } }
    private let written = ClientLock(false)
}
