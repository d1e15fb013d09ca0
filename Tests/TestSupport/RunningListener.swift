public import LibPQ

/// A ``PGListener`` running in a task of its own from ``init(_:)`` until ``stop()``.
public struct RunningListener: Sendable {
    /// The listener that runs.
    public let listener: PGListener
    private let task: Task<Void, Never>

    /// Starts `listener.run()` in a new task.
    public init(_ listener: PGListener) {
        self.listener = listener
        task = Task { await listener.run() }
    }

    /// Stops the listener and cancels its task (call it in a `defer`).
    public func stop() {
        listener.stop()
        task.cancel()
    }
}
