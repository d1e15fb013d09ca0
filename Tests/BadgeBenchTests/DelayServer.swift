import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// A tiny HTTP/1.1 server on 127.0.0.1 and a free port for the load generator's tests:
/// `GET /status/<code>/delay/<ms>` answers `<code>` with the body `ok` after `<ms>` milliseconds.
/// It answers `budget` requests in all and then none (it holds the rest unanswered), so that a
/// run of the load generator ends with every answer read and the counts are exact.
final class DelayServer: Sendable {
    /// One answered request.
    struct Answer: Sendable {
        var status: Int
        var delayMilliseconds: Int
    }

    /// The answers given, in order, and how many more may be given.
    final class Ledger: Sendable {
        private let state: Mutex<(budget: Int, answers: [Answer])>

        init(budget: Int) { state = Mutex((budget, [])) }

        /// Whether this request gets an answer (the budget lasts); records it.
        func admit(_ answer: Answer) -> Bool {
            state.withLock { state in
                guard state.budget > 0 else { return false }
                state.budget -= 1
                state.answers.append(answer)
                return true
            }
        }

        var answers: [Answer] { state.withLock { $0.answers } }
    }

    let ledger: Ledger
    let port: Int
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel

    /// Starts the server; stop it with ``shutdown()``.
    init(budget: Int) async throws {
        let ledger = Ledger(budget: budget)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(DelayHandler(ledger: ledger))
                }
            }
        let channel = try await bootstrap.bind(host: "127.0.0.1", port: 0).get()
        self.ledger = ledger
        self.group = group
        self.channel = channel
        self.port = channel.localAddress?.port ?? 0
    }

    /// `GET /status/<status>/delay/<milliseconds>` as the load generator sends it.
    func request(status: Int, delayMilliseconds: Int) -> [UInt8] {
        Array("GET /status/\(status)/delay/\(delayMilliseconds) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nAccept: */*\r\n\r\n".utf8)
    }

    func shutdown() async throws {
        try await channel.close()
        try await group.shutdownGracefully()
    }
}

/// Answers each request after its delay, while the ledger's budget lasts.
private final class DelayHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let ledger: DelayServer.Ledger
    var uri = ""

    init(ledger: DelayServer.Ledger) { self.ledger = ledger }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            uri = head.uri
        case .body:
            break
        case .end:
            // "/status/503/delay/20" → ["status", "503", "delay", "20"]
            let parts = uri.split(separator: "/")
            guard parts.count == 4, let status = Int(parts[1]), let delay = Int(parts[3]) else { return }
            guard ledger.admit(DelayServer.Answer(status: status, delayMilliseconds: delay)) else { return }
            context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(delay))) {
                var headers = HTTPHeaders()
                headers.add(name: "Content-Length", value: "2")
                let head = HTTPResponseHead(version: .http1_1, status: HTTPResponseStatus(statusCode: status), headers: headers)
                context.write(self.wrapOutboundOut(.head(head)), promise: nil)
                context.write(self.wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: "ok")))), promise: nil)
                context.writeAndFlush(self.wrapOutboundOut(.end(nil)), promise: nil)
            }
        }
    }
}
