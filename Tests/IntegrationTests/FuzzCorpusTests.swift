import Foundation
import TestSupport
import Testing

/// The fuzz corpora (Tests/FuzzCorpus/<target>/: seeds and the reproducers of crashes found) replay
/// through every fuzz target's invariants with the ordinary build of `reddot-fuzz`.
@Suite("Fuzz corpora replay")
struct FuzzCorpusTests {
    static let corpus = Repository.root.appendingPathComponent("Tests").appendingPathComponent("FuzzCorpus")

    @Test("every corpus input keeps its target's invariants")
    func replay() async throws {
        let reddot = try ReddotBinary.url.get()
        let fuzz = reddot.deletingLastPathComponent().appendingPathComponent("reddot-fuzz")
        let (status, output) = try await ChildProcess.run(fuzz.path, ["all", Self.corpus.path], mergingStandardError: true)
        #expect(status == 0, "\(output)")
        for target in ["events", "paths", "http", "migrations", "sse", "response", "cache", "hooks", "changelog"] {
            #expect(output.contains("\(target): replayed "), "\(output)")
        }
    }
}
