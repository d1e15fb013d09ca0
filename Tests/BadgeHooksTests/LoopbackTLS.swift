import Foundation
import Hummingbird
import HummingbirdHTTP2
import Logging
import NIOCore
import NIOHTTP2
import NIOSSL
import TestSupport

/// The request context of the fake providers: it keeps the channel, to tell an HTTP/2 stream
/// (what APNs and FCM speak) from an HTTP/1.1 connection.
struct ProviderContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    let channel: any Channel

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }

    /// Whether the request came on an HTTP/2 stream (only those have a stream id).
    func isHTTP2() async -> Bool {
        (try? await channel.getOption(HTTP2StreamChannelOptions.streamID).get()) != nil
    }
}

/// A fake provider's server on loopback: TLS with a certificate for localhost that openssl makes
/// in `folder`, HTTP/2 by ALPN (HTTP/1.1 otherwise).
enum LoopbackTLS {
    /// Serves `router` until the task is cancelled; returns the base URL and the certificate file to trust.
    static func serve(
        _ router: Router<ProviderContext>, name: String, in folder: URL, logger: Logger
    ) async throws -> (url: String, trust: String, task: Task<Void, any Error>) {
        let certificate = folder.appendingPathComponent("\(name).crt").path
        let key = folder.appendingPathComponent("\(name).key").path
        let made = try await ChildProcess.run(
            "/usr/bin/openssl",
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", certificate,
                "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
            ], mergingStandardError: true)
        guard made.status == 0 else { throw TestSetupError("openssl could not make a certificate: \(made.output)") }
        let tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(certificate).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem)))
        let (stream, continuation) = AsyncStream.makeStream(of: Int.self)
        let app = Application(
            router: router, server: try .http2Upgrade(tlsConfiguration: tls),
            configuration: ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in continuation.yield(channel.localAddress?.port ?? 0) }, logger: logger)
        let (port, task) = await run(app, ports: stream)
        return ("https://localhost:\(port)", certificate, task)
    }

    /// Runs `app` until the task is cancelled; returns once it listens, with the port it
    /// reported on `ports` (its `onServerRunning`).
    static func run(_ app: some ApplicationProtocol & Sendable, ports: AsyncStream<Int>) async -> (port: Int, task: Task<Void, any Error>) {
        let task = Task { try await app.runService(gracefulShutdownSignals: []) }
        for await port in ports { return (port, task) }
        return (0, task)
    }
}
