public import BadgeCore
import Foundation

/// The rules file of `path` (else `REDDOT_RULES_FILE`); the empty rule set when neither is set.
///
/// - Throws: `ExitCode` 65 with a sentence for an unreadable or invalid file.
public func loadRules(_ path: String?) throws -> RuleSet {
    guard let path = path ?? ProcessInfo.processInfo.environment["REDDOT_RULES_FILE"], !path.isEmpty else { return .empty }
    return try readRules(at: path, failureCode: ExitCodes.dataError)
}

/// The rules file at `path`.
///
/// - Throws: `ExitCode` `failureCode` with a sentence for an unreadable or invalid file.
public func readRules(at path: String, failureCode: Int32) throws -> RuleSet {
    guard let data = FileManager.default.contents(atPath: path) else {
        throw fail("cannot read the rules file \(path)", code: failureCode)
    }
    do {
        return try RuleSet(yaml: String(decoding: data, as: UTF8.self))
    } catch {
        throw fail("the rules file \(path) is invalid: \(error.message)", code: failureCode)
    }
}
