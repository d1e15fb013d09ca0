import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Monotonic nanoseconds: the clock of every time a bench records.
public enum BenchClock {
    /// Nanoseconds since an arbitrary fixed point (the machine's uptime).
    public static var now: UInt64 { DispatchTime.now().uptimeNanoseconds }

    /// Sleeps until `deadline` (a `now` value); returns at once when it has passed.
    public static func sleep(until deadline: UInt64) async throws {
        let now = Self.now
        if deadline > now { try await Task.sleep(nanoseconds: deadline - now) }
    }
}

/// Runs a blocking body on a thread of its own (never Swift's cooperative pool) and returns what
/// it returns, or throws what it throws.
public func onThread<T: Sendable>(named name: String, _ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
        let thread = Thread { continuation.resume(with: Result { try body() }) }
        thread.name = name
        thread.start()
    }
}

/// A benchmark that could not measure what it set out to; the message says why.
public struct BenchFailure: Error, CustomStringConvertible {
    /// Why the benchmark failed, as a sentence for the user.
    public let description: String

    /// A failure saying `description`.
    public init(_ description: String) { self.description = description }
}

/// Thread CPU time of the calling thread, in nanoseconds.
func threadCPUNanoseconds() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

/// Writes `bench: <message>` to stderr: the benches' progress lines (stdout carries the report).
func benchProgress(_ message: String) {
    FileHandle.standardError.write(Data("bench: \(message)\n".utf8))
}

/// 32 random bytes in hex: a fresh HS256 secret for the in-process query service of a bench.
public func randomBenchSecret() -> String {
    (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
}

/// What every report says about the run: the build, the date, the processors.
enum BenchMachine {
    /// `debug` or `release`: only release figures mean anything.
    static var build: String {
        #if DEBUG
            "debug"
        #else
            "release"
        #endif
    }

    /// Now, in ISO 8601.
    static var date: String { ISO8601DateFormatter().string(from: Date()) }

    /// The processors this process may use.
    static var processors: Int { ProcessInfo.processInfo.activeProcessorCount }
}
