import Foundation

/// The offline copy of one user's tree (MagicRemind's restore): the last tree the server
/// confirmed, written to a file after each change, read at start so the app shows its badges at
/// once, before the network answers.
///
/// The file is JSON, `{"format": 1, "server", "user", "version", "nodes": [badges]}`, written
/// atomically (a crash leaves the old file or the new one). A file of another server or user,
/// or one that cannot be read, is not used.
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
    }

    init(file: URL, server: String, user: String) {
        self.file = file
        self.server = server
        self.user = user
    }

    /// The tree the file holds; nil when there is no file, or it is of another server or user.
    ///
    /// - Throws: ``RedDotClientError`` (`.cache`) when the file exists but cannot be read.
    func load() throws -> BadgeTreeState? {
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
        guard contents.format == 1, contents.server == server, contents.user == user, contents.version >= 0 else { return nil }
        var nodes: [String: Badge] = [:]
        for badge in contents.nodes where badge.shown { nodes[badge.path] = badge }
        return BadgeTreeState(version: contents.version, nodes: nodes)
    }

    /// Saves `tree`, the client's `sequence`-th tree (numbered under the client's lock). Saves
    /// from several threads are written one at a time, and the file ends with the tree of the
    /// highest sequence, whatever order the threads come in.
    func save(_ tree: BadgeTreeState, sequence: UInt64) {
        let contents = Contents(
            format: 1, server: server, user: user, version: tree.version, nodes: tree.nodes.values.sorted { $0.path < $1.path })
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
            } catch {
                failure.withLock {
                    $0 = RedDotClientError(.cache, "the offline cache \(file.path) cannot be written: \(error.localizedDescription)")
                }
            }
        }
    }

    /// Why the last save failed; nil when it succeeded.
    var lastFailure: RedDotClientError? { failure.withLock { $0 } }
}
