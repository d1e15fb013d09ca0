import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Splits a file descriptor's bytes into lines without decoding them, so that invalid UTF-8
/// reaches the decoder as it is.
public struct LineReader {
    /// Where the bytes come from.
    public let fileDescriptor: Int32
    private var buffer: [UInt8] = []
    private var start = 0
    private var scanned = 0
    private var finished = false

    /// Lines of `fileDescriptor` (not closed here).
    public init(fileDescriptor: Int32) {
        self.fileDescriptor = fileDescriptor
    }

    /// The next line without its `\n`, or nil at the end of the input.
    ///
    /// - Throws: ``LineReadError`` when reading fails.
    public mutating func next() throws(LineReadError) -> [UInt8]? {
        while true {
            if let newline = buffer[scanned...].firstIndex(of: UInt8(ascii: "\n")) {
                let line = Array(buffer[start..<newline])
                start = newline + 1
                scanned = start
                return line
            }
            scanned = buffer.count
            if finished {
                guard start < buffer.count else { return nil }
                let line = Array(buffer[start...])
                start = buffer.count
                return line
            }
            if start > 0 {
                buffer.removeFirst(start)
                scanned -= start
                start = 0
            }
            var chunk = [UInt8](repeating: 0, count: 65_536)
            let count = chunk.withUnsafeMutableBytes { read(fileDescriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw LineReadError(description: "cannot read stdin: \(String(cString: strerror(errno)))")
            }
            if count == 0 {
                finished = true
            } else {
                buffer.append(contentsOf: chunk[0..<count])
            }
        }
    }

    /// The line without surrounding ASCII white space (and, on the first line, a UTF-8 byte-order mark).
    public static func trimmed(_ line: [UInt8], first: Bool) -> [UInt8] {
        var slice = line[...]
        if first, slice.starts(with: [0xEF, 0xBB, 0xBF]) { slice = slice.dropFirst(3) }
        let isSpace: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D || $0 == 0x0A }
        while let byte = slice.first, isSpace(byte) { slice = slice.dropFirst() }
        while let byte = slice.last, isSpace(byte) { slice = slice.dropLast() }
        return Array(slice)
    }
}

/// Reading the input failed.
public struct LineReadError: Error, CustomStringConvertible {
    /// A sentence naming the input and the system's reason.
    public var description: String
}
