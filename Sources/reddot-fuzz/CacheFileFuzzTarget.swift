import Foundation
import RedDotClient

/// The client's offline cache file, as an app finds it at start (its own earlier run, or a file
/// damaged on disk): a client made on it never traps; what it cannot use is reported by
/// `cacheError` in one line or left out; its version is never negative, it holds no more queued
/// taps than the file names, and every badge it shows has a count and unseen of 0 or more where
/// a restored tap took from it.
enum CacheFileFuzzTarget {
    static let target = FuzzTarget.cache
    static let server = URL(string: "http://127.0.0.1:9")!
    /// One folder per process: each input overwrites the one file of the user `fuzz`.
    static let folder = FileManager.default.temporaryDirectory.appendingPathComponent("reddot-fuzz-cache-\(getpid())", isDirectory: true)

    static func run(_ bytes: [UInt8]) {
        let options = RedDotClient.Options(cacheDirectory: folder)
        guard let file = RedDotClient(server: server, user: "fuzz", options: options).cacheFile else {
            FuzzFailure.fail(target, "a client with a cache folder has no cache file")
        }
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try Data(bytes).write(to: file)
        } catch {
            return  // the machine's problem, not the input's
        }
        let client = RedDotClient(server: server, user: "fuzz", options: options)
        if let error = client.cacheError { FuzzFailure.checkMessage(error.description, target) }
        FuzzFailure.check(client.version >= 0, target, "the version is negative")
        let named = bytes.count / 16  // a queued tap takes more than 16 bytes of JSON
        FuzzFailure.check(client.queuedActionCount <= max(named, 0), target, "more taps than the file can name")
        for badge in client.badges(under: "root") {
            _ = badge.text
            _ = client.badge(badge.path)
        }
    }
}
