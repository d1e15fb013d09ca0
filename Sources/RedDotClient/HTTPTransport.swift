import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The client's HTTP: one `URLSession` whose delegate hands a streaming body out chunk by chunk
/// (what a Server-Sent Events stream needs; `URLSession.bytes(for:)` is not on every platform),
/// and plain requests that collect their body.
final class HTTPTransport: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    /// What a request yields: the response head, then its body in chunks.
    enum Part: Sendable {
        case head(HTTPURLResponse)
        case body(Data)
    }

    // `@unchecked Sendable`: `session` is set once in `init` and never changed; every other
    // stored property is behind the mutex.
    private var session: URLSession!
    private let tasks = ClientLock<[Int: AsyncThrowingStream<Part, any Error>.Continuation]>([:])
    #if canImport(Glibc)
    /// The open plain-HTTP connections (see ``SocketTransport``), closed by ``close()``.
    private let sockets = ClientLock<(open: [ObjectIdentifier: SocketTransport.Connection], closed: Bool)>(([:], false))
    #endif

    override init() {
        super.init()
        let configuration = URLSessionConfiguration.ephemeral
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.urlCache = nil
        configuration.httpCookieStorage = nil
        // The client's own timers decide when a request or a stream is dead.
        configuration.timeoutIntervalForRequest = 120
        configuration.timeoutIntervalForResource = 7 * 24 * 3600
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        session = URLSession(configuration: configuration, delegate: self, delegateQueue: queue)
    }

    /// Starts `request`; its head and body chunks arrive on the stream, which finishes at the
    /// end of the body or with the transport's error. Ending the iteration cancels the request.
    func start(_ request: URLRequest) -> AsyncThrowingStream<Part, any Error> {
        #if canImport(Glibc)
        if SocketTransport.handles(request) {
            let connection = SocketTransport.Connection()
            let key = ObjectIdentifier(connection)
            let closed = sockets.withLock { sockets -> Bool in
                if !sockets.closed { sockets.open[key] = connection }
                return sockets.closed
            }
            if closed { connection.cancel() }
            return SocketTransport.start(request, on: connection) { [weak self] in
                _ = self?.sockets.withLock { $0.open.removeValue(forKey: key) }
            }
        }
        #endif
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: Part.self, bufferingPolicy: .unbounded)
        let task = session.dataTask(with: request)
        tasks.withLock { $0[task.taskIdentifier] = continuation }
        continuation.onTermination = { _ in task.cancel() }
        task.resume()
        return stream
    }

    /// Sends `request` and collects its body (at most `limit` bytes), giving up after `timeout`.
    ///
    /// - Throws: ``RedDotClientError`` (`.transport`) when the server cannot be reached, does
    ///   not answer in time, or sends more than `limit` bytes.
    func send(_ request: URLRequest, timeout: Duration, limit: Int = 16 << 20) async throws -> (HTTPURLResponse, Data) {
        let parts = start(request)
        return try await withThrowingTaskGroup(of: (HTTPURLResponse, Data)?.self) { group in
            group.addTask {
                var head: HTTPURLResponse?
                var body = Data()
                for try await part in parts {
                    switch part {
                    case .head(let response): head = response
                    case .body(let chunk):
                        guard body.count + chunk.count <= limit else {
                            throw RedDotClientError(.transport, "the server's answer is longer than \(limit) bytes")
                        }
                        body.append(chunk)
                    }
                }
                // An iteration ended by cancellation is not the server's doing.
                try Task.checkCancellation()
                guard let head else { throw RedDotClientError(.transport, "the server closed the connection without an answer") }
                return (head, body)
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                return nil
            }
            defer { group.cancelAll() }
            guard let answer = try await group.next() ?? nil else {
                throw RedDotClientError(.transport, "the server did not answer within \(timeout)")
            }
            return answer
        }
    }

    /// Cancels every request; the transport cannot be used afterwards.
    func close() {
        #if canImport(Glibc)
        let connections = sockets.withLock { sockets in
            sockets.closed = true
            defer { sockets.open.removeAll() }
            return Array(sockets.open.values)
        }
        for connection in connections { connection.cancel() }
        #endif
        session.invalidateAndCancel()
        let open = tasks.withLock { tasks in
            defer { tasks.removeAll() }
            return Array(tasks.values)
        }
        for continuation in open { continuation.finish(throwing: CancellationError()) }
    }

    private func continuation(_ task: URLSessionTask) -> AsyncThrowingStream<Part, any Error>.Continuation? {
        tasks.withLock { $0[task.taskIdentifier] }
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
    ) {
        if let response = response as? HTTPURLResponse {
            continuation(dataTask)?.yield(.head(response))
            completionHandler(.allow)
        } else {
            continuation(dataTask)?.finish(throwing: RedDotClientError(.transport, "the answer is not HTTP"))
            completionHandler(.cancel)
        }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        continuation(dataTask)?.yield(.body(data))
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let continuation = tasks.withLock { $0.removeValue(forKey: task.taskIdentifier) }
        if let error {
            let reason = (error as NSError).localizedDescription
            continuation?.finish(throwing: RedDotClientError(.transport, "the connection failed: \(reason)"))
        } else {
            continuation?.finish()
        }
    }
}
