import ArgumentParser
import BadgeHooks
import BadgeIngest
import Foundation
import RedDotCommandLine
import Testing

/// The runbook's settings tables (deploy/README.md) against `--help`: every flag of `reddot
/// ingest`, `reddot rollup` and `reddot serve` has a row, every row names a flag that exists, and
/// where both give a variable or a plain default they agree. A setting added, renamed or given a
/// new default without the runbook fails here.
@Suite("The runbook's settings tables match --help")
struct RunbookSettingsTests {
    /// One flag as `--help` or a table row gives it.
    struct Entry: Equatable, CustomStringConvertible {
        var variable: String?
        var defaultValue: String?
        var description: String { "variable \(variable ?? "-"), default \(defaultValue ?? "-")" }
    }

    static let runbook = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("deploy/README.md")

    /// The rows of every table in the runbook's section `heading` (up to the next `## `), by flag:
    /// the first cell's flags (`--a` / `--b`, or `--a` / `REDDOT_A`); a `variable` or `env` column,
    /// else a variable in the first cell; the `default` column.
    static func tables(under heading: String) throws -> [String: Entry] {
        let text = try String(contentsOf: runbook, encoding: .utf8)
        guard let start = text.range(of: "\n## \(heading)") else { throw RunbookError("no section '## \(heading)'") }
        let rest = text[start.upperBound...]
        let section = rest.range(of: "\n## ").map { rest[..<$0.lowerBound] } ?? rest
        var entries: [String: Entry] = [:]
        var columns: [String] = []
        for line in section.split(separator: "\n") where line.hasPrefix("|") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast()
                .map { $0.trimmingCharacters(in: .whitespaces) }
            if cells.first == "flag" { columns = cells; continue }
            guard !columns.isEmpty, cells.count == columns.count, !cells[0].hasPrefix("---") else { continue }
            let first = cells[0]
            let flags = Self.matches(of: #"--[a-z0-9-]+"#, in: first)
            var entry = Entry()
            if let column = columns.firstIndex(where: { $0 == "variable" || $0 == "env" }) {
                entry.variable = Self.matches(of: #"REDDOT_[A-Z0-9_]+"#, in: cells[column]).first
            } else {
                entry.variable = Self.matches(of: #"REDDOT_[A-Z0-9_]+"#, in: first).first
            }
            if let column = columns.firstIndex(of: "default") { entry.defaultValue = Self.plain(cells[column]) }
            for flag in flags where !flag.hasPrefix("--no-") || flags.count == 1 { entries[flag] = entry }
        }
        return entries
    }

    /// The options of `--help` (argument-parser's text for `type`), by long flag: the variable and
    /// the default its help names ("Default: REDDOT_X, else Y." or "(default: Y)").
    static func help(of types: [any ParsableArguments.Type]) -> [String: Entry] {
        var entries: [String: Entry] = [:]
        for type in types {
            let text = type.helpMessage(columns: 100_000)
            var blocks: [String] = []
            for line in text.split(separator: "\n") {
                if line.hasPrefix("  -") { blocks.append(String(line)) } else if !blocks.isEmpty, line.hasPrefix("   ") { blocks[blocks.count - 1] += " " + line.trimmingCharacters(in: .whitespaces) }
            }
            for block in blocks {
                let label = block.trimmingCharacters(in: .whitespaces).components(separatedBy: "  ").first ?? ""
                let flags = Self.matches(of: #"--[a-z0-9-]+"#, in: label).filter { $0 != "--help" }
                guard let flag = flags.first else { continue }
                var entry = Entry()
                if let said = Self.matches(of: #"Default: REDDOT_[A-Z0-9_]+"#, in: block).first {
                    entry.variable = String(said.dropFirst("Default: ".count))
                }
                if let value = Self.matches(of: #"\(default: [^)]*\)"#, in: block).last {
                    entry.defaultValue = Self.plain(String(value.dropFirst("(default: ".count).dropLast()))
                } else if let value = Self.matches(of: #"Default: REDDOT_[A-Z0-9_]+, else [^ ,;]+\."#, in: block).first {
                    entry.defaultValue = Self.plain(String(value.split(separator: " ").last!.dropLast()))
                }
                entries[flag] = entry
            }
        }
        return entries
    }

    /// A default as a comparable token: numbers as numbers (`7.0` → `7`), flags as on/off,
    /// backticks dropped; nil for a description rather than a value ("the host name", "—").
    static func plain(_ text: String) -> String? {
        let value = text.replacingOccurrences(of: "`", with: "").trimmingCharacters(in: .whitespaces)
        if value.hasPrefix("--no-") { return "off" }
        if value.hasPrefix("--") { return "on" }
        if let number = Double(value) { return number == number.rounded() ? String(Int64(number)) : String(number) }
        guard !value.isEmpty, !value.contains(" "), value != "—", value != "-" else { return nil }
        return value
    }

    static func matches(of pattern: String, in text: String) -> [String] {
        guard let expression = try? NSRegularExpression(pattern: pattern) else { return [] }
        let range = NSRange(text.startIndex..., in: text)
        return expression.matches(in: text, range: range).compactMap { Range($0.range, in: text).map { String(text[$0]) } }
    }

    struct RunbookError: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// Every flag of `help` has a row and every row a flag; variables and plain defaults agree.
    static func compare(help: [String: Entry], runbook: [String: Entry], command: String) {
        #expect(!help.isEmpty && !runbook.isEmpty, "\(command): --help and the runbook were read")
        for (flag, entry) in help.sorted(by: { $0.key < $1.key }) {
            guard let row = runbook[flag] else {
                Issue.record("\(command) \(flag) (\(entry)) has no row in the runbook's table")
                continue
            }
            if let variable = entry.variable { #expect(row.variable == variable, "\(command) \(flag): runbook \(row), --help \(entry)") }
            if let value = entry.defaultValue, let written = row.defaultValue {
                #expect(written == value, "\(command) \(flag): runbook \(row), --help \(entry)")
            }
        }
        for flag in runbook.keys.sorted() where help[flag] == nil {
            Issue.record("the runbook's \(command) table has \(flag), which --help does not list")
        }
    }

    @Test("reddot ingest")
    func ingest() throws {
        let help = Self.help(of: [DatabaseOptions.self, KafkaOptions.self, IngestOptions.self, OperationsOptions.self])
        var rows = try Self.tables(under: "Ingesting: `reddot ingest`")
        let rollupRows = try Self.tables(under: "Rolling up: `reddot rollup`")
        rows["--metrics-port"] = rows["--metrics-port"] ?? rollupRows["--metrics-port"]
        rows["-X"] = nil
        Self.compare(help: help, runbook: rows, command: "reddot ingest")
        #expect(help["--batch-size"]?.defaultValue == "5000", "the parser read the defaults")
        let text = try String(contentsOf: Self.runbook, encoding: .utf8)
        for (key, value, _) in IngestSettings.kafkaDefaults {
            #expect(text.contains("`\(key)=\(value)`"), "the runbook lists the consumer's default \(key)=\(value)")
        }
    }

    @Test("reddot rollup, with the change feed's flags")
    func rollup() throws {
        let help = Self.help(of: [RollupOptions.self, OperationsOptions.self])
        let rows = try Self.tables(under: "Rolling up: `reddot rollup`").merging(try Self.tables(under: "The change feed: `reddot.changes`")) { first, _ in first }
        Self.compare(help: help, runbook: rows, command: "reddot rollup")
        #expect(help["--rollup-batch-size"]?.defaultValue == "500" && help["--changes-topic"]?.defaultValue == "reddot.changes")
    }

    @Test("reddot serve")
    func serve() throws {
        let help = Self.help(of: [ServeOptions.self])
        let rows = try Self.tables(under: "Serving: `reddot serve`")
        Self.compare(help: help, runbook: rows, command: "reddot serve")
        #expect(help["--port"] == Entry(variable: "REDDOT_HTTP_PORT", defaultValue: "8080"))
    }

    @Test("reddot push run and reddot webhooks run: their delivery settings have rows with the same defaults")
    func senders() throws {
        for (type, heading, command) in [
            (PushSettings.self as any ParsableArguments.Type, "Push badges: `reddot push`", "reddot push run"),
            (WebhookSettings.self, "Signed webhooks: `reddot webhooks`", "reddot webhooks run"),
        ] {
            let help = Self.help(of: [type])
            let rows = try Self.tables(under: heading)
            #expect(help.count >= 3, "\(command): --help was read")
            // These tables also hold the credentials and the feed's flags, declared elsewhere:
            // every delivery setting must have its row; the other rows are not this test's.
            Self.compare(help: help, runbook: rows.filter { help[$0.key] != nil }, command: command)
            for flag in help.keys { #expect(rows[flag] != nil, "\(command) \(flag) has no row in the runbook") }
        }
    }

    @Test("a row that differs is found: a changed default, a missing flag")
    func findsDrift() {
        let help = ["--batch-size": Entry(variable: nil, defaultValue: "5000"), "--writers": Entry(variable: nil, defaultValue: "2")]
        let rows = ["--batch-size": Entry(variable: nil, defaultValue: "500")]
        withKnownIssue("a default and a row that differ must be reported") {
            Self.compare(help: help, runbook: rows, command: "drift")
        }
    }
}
