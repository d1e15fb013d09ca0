import Foundation

/// A value behind a lock, shared by reference. `NSLock` rather than `Synchronization.Mutex`, so
/// that the client runs on the Apple systems apps still support (Mutex needs iOS 18 and macOS 15).
final class ClientLock<Value>: @unchecked Sendable {
    // `@unchecked Sendable`: `value` is only touched inside `withLock`, under `lock`.
    private var value: Value
    private let lock = NSLock()

    init(_ value: Value) {
        self.value = value
    }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
