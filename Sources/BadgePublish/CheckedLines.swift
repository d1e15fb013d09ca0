public import BadgeCore

/// The checked events of stdin's JSON lines, one at a time: an invalid line is reported on
/// `onInvalid` and counted, and a read error ends the lines (`throwIfFailed` rethrows it).
public final class CheckedLines {
    private var reader: LineReader
    private let checker: EventIntake
    private var lineNumber = 0
    private var failure: (any Error)?
    private let onInvalid: (_ line: Int, _ rejection: IntakeRejection) -> Void
    /// Non-blank lines read.
    public private(set) var total = 0
    /// Lines that failed the check.
    public private(set) var invalid = 0

    /// Lines of `reader`, checked by `checker`; `onInvalid` hears each line that fails, with
    /// its number.
    public init(
        reader: LineReader, checker: EventIntake, onInvalid: @escaping (_ line: Int, _ rejection: IntakeRejection) -> Void
    ) {
        self.reader = reader
        self.checker = checker
        self.onInvalid = onInvalid
    }

    /// The next valid event, or nil at the end of the input (or after a read error).
    public func next() -> PublishItem? {
        while failure == nil {
            let rawLine: [UInt8]
            do {
                guard let line = try reader.next() else { return nil }
                rawLine = line
            } catch {
                failure = error
                return nil
            }
            lineNumber += 1
            let line = LineReader.trimmed(rawLine, first: lineNumber == 1)
            if line.isEmpty { continue }
            total += 1
            switch checker.check(line) {
            case .failure(let rejection):
                invalid += 1
                onInvalid(lineNumber, rejection)
            case .success(let event):
                return PublishItem(line: lineNumber, event: event, payload: line)
            }
        }
        return nil
    }

    /// Rethrows the error that ended the input early, if one did.
    public func throwIfFailed() throws {
        if let failure { throw failure }
    }
}
