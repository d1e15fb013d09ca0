import BadgeCore
import Foundation
import TestSupport
import Testing

/// The hand-written JSON of the change feed's records: every string and number it writes must
/// read back as what it was given.
@Suite("JSON written by hand reads back as written")
struct JSONTextTests {
    /// `text` as `JSONText` writes it, read back by Foundation's reader.
    private func readBack(_ text: String) throws -> String {
        var bytes: [UInt8] = []
        JSONText.appendString(text, to: &bytes)
        return try #require(try JSONSerialization.jsonObject(with: Data(bytes), options: .fragmentsAllowed) as? String)
    }

    @Test("strings with quotes, backslashes, every control character and characters beyond ASCII")
    func strings() throws {
        let fixed = ["", "plain", "a\"b", "back\\slash", "\\\"", "line\nfeed", "tab\tcr\r", "é", "日本", "🦊 fox", "\u{7F}", "\u{2028}"]
            + (0..<0x20).map { String(UnicodeScalar(UInt8($0))) + "x" }
        for text in fixed { #expect(try readBack(text) == text, "\(Array(text.utf8))") }
        var random = SeededRandom(seed: 41)
        let alphabet: [Character] = ["a", "Z", "0", "\"", "\\", "\n", "\u{01}", "\u{1F}", " ", "é", "日", "🦊", "/", "\u{7F}"]
        for _ in 0..<500 {
            let text = String((0..<Int(random.next() % 12)).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] })
            #expect(try readBack(text) == text, "\(Array(text.utf8))")
        }
    }

    @Test("integers, the ends of Int64 included, as Swift prints them")
    func integers() throws {
        var random = SeededRandom(seed: 43)
        let values: [Int64] = [0, 1, -1, 9, 10, -10, 99, 100, Int64.max, Int64.min, Int64.max - 1, Int64.min + 1]
            + (0..<500).map { _ in Int64(bitPattern: random.next()) >> Int64(random.next() % 64) }
        for value in values {
            var bytes: [UInt8] = []
            JSONText.appendInteger(value, to: &bytes)
            #expect(String(decoding: bytes, as: UTF8.self) == String(value))
        }
    }

    @Test("the String form writes what the bytes form does")
    func stringForm() {
        for text in ["", "a\"b\\c\n\u{01}", "日本 🦊"] {
            var bytes: [UInt8] = []
            JSONText.appendString(text, to: &bytes)
            var string = "x"
            JSONText.appendString(text, to: &string)
            #expect(string == "x" + String(decoding: bytes, as: UTF8.self))
        }
    }
}
