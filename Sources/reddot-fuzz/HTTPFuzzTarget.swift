import BadgeCore

/// The query service's query parameters and headers: every reader gets the whole input (and, for
/// the two-valued stream resume, its first line and the rest); what a reader accepts is within its
/// range and reads back the same; what it refuses it refuses with a one-line message.
enum HTTPFuzzTarget {
    static let target = FuzzTarget.http
    static let maximumWait = Duration.seconds(60)

    static func run(_ bytes: [UInt8]) {
        let text = String(decoding: bytes, as: UTF8.self)
        checkNumbers(text)
        checkPaths(text)
        checkEntityTags(text)
        checkBearer(text)
        let lines = text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false)
        let lastEventID = lines.count > 1 ? String(lines[1]) : nil
        do throws(RequestValueError) {
            if let version = try RequestValues.resumeVersion(since: String(lines[0]), lastEventID: lastEventID) {
                FuzzFailure.check(version >= 0, target, "a negative resume version")
            }
        } catch {
            FuzzFailure.checkMessage(error.message, target)
        }
    }

    static func checkNumbers(_ text: String) {
        do throws(RequestValueError) {
            let depth = try RequestValues.depth(text)
            FuzzFailure.check((0...BadgePath.maximumDepth).contains(depth), target, "depth \(depth)")
        } catch {
            FuzzFailure.checkMessage(error.message, target)
        }
        let duration = RequestValues.duration(text)
        if let duration {
            FuzzFailure.check(duration >= .zero && duration <= RequestValues.maximumDuration, target, "duration \(duration)")
        }
        do throws(RequestValueError) {
            let wait = try RequestValues.wait(text, maximum: maximumWait)
            FuzzFailure.check(wait == duration && wait <= maximumWait, target, "wait \(wait) for duration \(String(describing: duration))")
        } catch {
            FuzzFailure.check(duration == nil || duration! > maximumWait, target, "wait refuses the duration \(duration!)")
            FuzzFailure.checkMessage(error.message, target)
        }
        do throws(RequestValueError) {
            let since = try RequestValues.since(text)
            FuzzFailure.check(since >= 0 && (try? RequestValues.since(String(since))) == since, target, "since \(since)")
        } catch {
            FuzzFailure.checkMessage(error.message, target)
        }
    }

    static func checkPaths(_ text: String) {
        do throws(RequestValueError) {
            let paths = try RequestValues.paths(text)
            FuzzFailure.check((1...RequestValues.maximumPaths).contains(paths.count), target, "\(paths.count) paths")
            FuzzFailure.check(paths.map(\.rawValue).joined(separator: ",") == text, target, "the paths do not join to the text")
            FuzzFailure.check((try? RequestValues.paths(paths.map(\.rawValue).joined(separator: ","))) == paths, target, "paths differ when read again")
        } catch {
            FuzzFailure.checkMessage(error.message, target)
        }
        do throws(RequestValueError) {
            let path = try RequestValues.path(text)
            FuzzFailure.check(path.rawValue == text, target, "the path does not round-trip")
        } catch {
            FuzzFailure.checkMessage(error.message, target)
        }
    }

    static func checkEntityTags(_ text: String) {
        guard let tags = EntityTags(text) else { FuzzFailure.fail(target, "a header without tags") }
        // Split at every comma and trimmed of blanks, by Unicode scalars (HTTP's bytes), whatever
        // combining mark follows.
        for tag in tags.tags {
            FuzzFailure.check(!tag.unicodeScalars.contains(","), target, "a tag keeps a comma")
            FuzzFailure.check(!hasBlankEnds(tag), target, "a tag keeps blanks around it")
        }
        if let version = tags.firstVersion {
            // The tag RedDot sends for that version names it.
            let own = EntityTags(EntityTags.tag(version))
            FuzzFailure.check(own?.matches(version) == true && own?.firstVersion == version, target, "the tag of \(version) does not match it")
            _ = tags.matches(version)
        }
        FuzzFailure.check(EntityTags(nil) == nil, target, "no header has tags")
    }

    static func checkBearer(_ text: String) {
        let token: BearerToken
        do throws(RequestValueError) {
            token = try BearerToken(authorization: text)
        } catch {
            FuzzFailure.checkMessage(error.message, target)
            FuzzFailure.check(error.code == "invalid_request", target, "code \(error.code)")
            return
        }
        FuzzFailure.check(!hasBlankEnds(token.text), target, "the token keeps blanks around it")
        if !token.text.isEmpty {
            let again = try? BearerToken(authorization: "Bearer " + token.text)
            FuzzFailure.check(again == token, target, "the token does not read back")
        }
        _ = token.header
    }

    /// Whether the first or last Unicode scalar of `text` is a space or a tab (HTTP's blanks,
    /// counted as bytes are, not by `Character`).
    static func hasBlankEnds(_ text: some StringProtocol) -> Bool {
        let blank: (Unicode.Scalar) -> Bool = { $0 == " " || $0 == "\t" }
        return text.unicodeScalars.first.map(blank) == true || text.unicodeScalars.last.map(blank) == true
    }
}
