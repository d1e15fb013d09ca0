import Dispatch
import Foundation
import RdKafka
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The real `reddot serve` process against clients that send what no well-behaved client sends:
/// malformed and oversized query parameters, headers and bodies, broken framing, thousands of
/// streams, requests that never finish.
///
/// After every probe the process must be alive and still answer `GET /healthz` with 200, and no
/// answer may be a 5xx except the documented ones (503 `too_many_streams` with `Retry-After`).
/// A probe that kills the server is reported with its name and the server's last log lines, and
/// the server is started again so that the remaining probes still run.
///
/// Everything goes through raw sockets to 127.0.0.1 (URLSession refuses to send most of this).
@Suite("reddot serve against hostile clients", .serialized)
struct HostileClientTests {
    let cli = CLITests()
    static let user = "hostile"

    // MARK: - the known crash

    @Test("regression: GET …/badges?wait=1e300&since=0 (and wait=99999999999999999999) with a valid token answers 400 and the server lives")
    func waitOverflowRegression() async throws {
        try await withServer { server in
            let answer = await server.send(RawHTTP.get("/v1/users/\(Self.user)/badges?wait=1e300&since=0", token: server.userToken))
            #expect(answer.status == 400, "\(answer)")
            try await server.expectHealthy(after: "wait=1e300&since=0")
            // The same overflow in digits only (a Double past Int64 milliseconds): these killed
            // the server at 58bb9a5 with "Double value cannot be converted to Int64".
            for wait in ["99999999999999999999", "9223372036854775807", "1" + String(repeating: "0", count: 300), "9223372036854776s", "153722867280913m"] {
                let overflow = await server.send(RawHTTP.get("/v1/users/\(Self.user)/badges?wait=\(wait)&since=0", token: server.userToken))
                #expect(overflow.status == 400, "wait=\(wait.prefix(30)): \(overflow)")
                try await server.expectHealthy(after: "wait=\(wait.prefix(30))&since=0")
            }
        }
    }

    // MARK: - query parameters

    @Test("oversized and malformed values of every query parameter answer 4xx, never 5xx, never a crash")
    func queryParameters() async throws {
        try await withServer { server in
            let badges = "/v1/users/\(Self.user)/badges"
            let stream = "/v1/users/\(Self.user)/badges/stream"
            let megabyte = String(repeating: "A", count: 1 << 20)
            let numbers = [
                "1e300", "-1", "NaN", "nan", "inf", "-inf", "Infinity", "99999999999999999999s", "99999999999999999999",
                "1" + String(repeating: "0", count: 400), "9223372036854775807", "9223372036854775808", "-9223372036854775808",
                "9223372036854775.807", "9223372036854776s", "9223372036854775807ms", "18446744073709551616m", "1e308ms",
                "0.0000000000000000000001", "1.7976931348623157e308", "0x10", "1_000", "+1", " 1", "1 ", "", ".", "..", "1.2.3s",
                "%00", "%ff%fe", "%", "%zz", "30s30s", "-0", "١٢٣", "1e-400", "4.9e-324s",
            ]
            let thirtyKilobytes = String(megabyte.prefix(30_000))
            var targets: [(String, String)] = []
            for number in numbers {
                let value = Self.queryEscaped(number)
                targets.append(("wait=\(number)", "\(badges)?wait=\(value)&since=0"))
                targets.append(("wait=\(number) without since", "\(badges)?wait=\(value)"))
                targets.append(("since=\(number)", "\(badges)?since=\(value)"))
                targets.append(("since=\(number) with wait", "\(badges)?wait=1ms&since=\(value)"))
                targets.append(("depth=\(number)", "\(badges)?depth=\(value)"))
            }
            let longLabel = String(repeating: "a", count: 100_000)
            let deepPath = "root" + String(repeating: ".a", count: 5_000)
            let hostilePaths: [String] = [
                "", "root..a", "root.", ".root", "ROOT", "root.\(longLabel)", deepPath, "root.a%00", "root.%C3%BC", "root.a;DROP TABLE x",
                "root.*", "root.a|b", "root.a{1}", "%ff%fe%fd", "root.a%0d%0aX-Injected:%201", megabyte,
            ]
            for path in hostilePaths {
                targets.append(("path=\(path.prefix(30))…(\(path.count))", "\(badges)?path=\(Self.queryEscaped(path))"))
                targets.append(("stream path=\(path.prefix(30))…(\(path.count))", "\(stream)?path=\(Self.queryEscaped(path))"))
            }
            let hundred = (0..<100).map { "root.p\($0)" }.joined(separator: ",")
            let lists: [(String, String)] = [
                ("100 paths", hundred), ("101 paths", hundred + ",root.x"), ("100,000 empty items", String(repeating: ",", count: 99_999)),
                ("100 very long paths", (0..<100).map { _ in "root." + String(repeating: "b", count: 64) }.joined(separator: ",")),
                ("1 MB of paths", String(repeating: "root.a,", count: 150_000)), ("garbage", "%ff,%00,,"),
            ]
            for (name, list) in lists {
                targets.append(("paths: \(name)", "\(badges)?paths=\(Self.queryEscaped(list))"))
                targets.append(("paths with path: \(name)", "\(badges)?path=root&paths=\(Self.queryEscaped(list))"))
            }
            targets += [
                ("1 MB query string", "\(badges)?x=\(megabyte)"),
                ("60 KB query string", "\(badges)?x=\(megabyte.prefix(60_000))"),
                ("30 KB query string", "\(badges)?x=\(thirtyKilobytes)"),
                ("10,000 parameters", "\(badges)?" + (0..<10_000).map { "p\($0)=\($0)" }.joined(separator: "&")),
                ("one parameter 10,000 times", "\(badges)?" + String(repeating: "depth=1&", count: 10_000)),
                ("percent garbage", "\(badges)?%%%=%%%&%zz=%zz&=&&&=="),
                ("bare ?", "\(badges)?"),
                ("bare &", "\(badges)?&&&&"),
                ("stream since=-1", "\(stream)?since=-1"),
                ("stream since=99999999999999999999", "\(stream)?since=99999999999999999999"),
                ("stream since=1e300", "\(stream)?since=1e300"),
                ("stream since=NaN", "\(stream)?since=NaN"),
            ]
            var probes = targets.map { Probe($0.0, RawHTTP.get($0.1, token: server.userToken)) }
            // The user in the path, and the token in the query (streams).
            let users: [String] = ["%ff%fe", "%", "%zz", "%00", "a%2Fb", String(repeating: "u", count: 200), String(repeating: "%41", count: 50_000), "..", "%2e%2e"]
            for user in users {
                probes.append(Probe("user \(user.prefix(20))…(\(user.count))", RawHTTP.get("/v1/users/\(user)/badges", token: server.userToken)))
            }
            let queryTokens: [String] = [megabyte, String(megabyte.prefix(30_000)), "", "%ff", "a.b.c", Self.noneToken(subject: Self.user)]
            for token in queryTokens {
                probes.append(Probe("access_token \(token.prefix(12))…(\(token.count))", RawHTTP.get("\(stream)?access_token=\(Self.queryEscaped(token))", token: nil)))
            }
            // Invalid UTF-8 and control bytes in the request target itself.
            for bytes: [UInt8] in [[0xFF, 0xFE], [0xC3, 0x28], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0x7F], [0x01]] {
                let label = bytes.map { String($0, radix: 16) }.joined(separator: " ")
                let places: [(String, [UInt8], [UInt8])] = [
                    ("path", Array("/v1/users/".utf8), Array("/badges".utf8)), ("query", Array("\(badges)?path=root.".utf8), []),
                    ("wait", Array("\(badges)?since=0&wait=1".utf8), Array("s".utf8)),
                ]
                for (name, prefix, suffix) in places {
                    probes.append(Probe("invalid UTF-8 \(label) in the \(name)", RawHTTP.request(target: prefix + bytes + suffix, headers: [("Authorization", "Bearer \(server.userToken)")])))
                }
            }
            // The answers to valid long-polls must not make the suite wait: every wait here is 1 ms.
            try await server.run(probes)
        }
    }

    // MARK: - headers

    @Test("hostile headers (huge or garbage tokens, alg none, If-None-Match, Last-Event-ID, header floods) answer 4xx")
    func headers() async throws {
        try await withServer { server in
            let badges = "/v1/users/\(Self.user)/badges"
            let stream = "/v1/users/\(Self.user)/badges/stream"
            let megabyte = String(repeating: "A", count: 1 << 20)
            var probes: [Probe] = []
            let thirtyKB = String(megabyte.prefix(30_000))
            let authorizations: [(String, String)] = [
                ("1 MB token", "Bearer " + megabyte), ("30 KB token", "Bearer " + thirtyKB),
                ("10 KB dotted token", "Bearer " + String(repeating: "a.", count: 5_000)), ("Bearer alone", "Bearer"), ("Bearer and spaces", "Bearer    "),
                ("lowercase bearer", "bearer \(server.userToken)"), ("Basic", "Basic dXNlcjpwYXNz"), ("two tokens", "Bearer \(server.userToken), Bearer x"),
                ("garbage base64", "Bearer !!!.@@@.###"), ("bad base64 padding", "Bearer eyJ=.eyJ==.===="),
                ("three empty parts", "Bearer .."), ("one hundred parts", "Bearer " + String(repeating: "a.", count: 100)),
                ("alg none", "Bearer " + Self.noneToken(subject: Self.user)),
                ("alg none admin", "Bearer " + Self.noneToken(subject: Self.user, scope: "reddot:admin")),
                ("alg HS256 unsigned with exp 1e999", "Bearer " + Self.unsignedToken(header: #"{"alg":"HS256","typ":"JWT"}"#, payload: #"{"sub":"hostile","exp":1e999}"#)),
                ("exp 99999999999999999999999", "Bearer " + Self.unsignedToken(header: #"{"alg":"HS256"}"#, payload: #"{"sub":"hostile","exp":99999999999999999999999}"#)),
                ("exp -1e308", "Bearer " + Self.unsignedToken(header: #"{"alg":"HS256"}"#, payload: #"{"sub":"hostile","exp":-1e308}"#)),
                ("payload 20k nested arrays", "Bearer " + Self.unsignedToken(header: #"{"alg":"HS256"}"#, payload: String(repeating: "[", count: 20_000))),
                ("header 20k nested objects", "Bearer " + Self.unsignedToken(header: String(repeating: #"{"a":"#, count: 4_000), payload: "{}")),
                ("kid of 10 KB", "Bearer " + Self.unsignedToken(header: #"{"alg":"RS256","kid":"\#(String(repeating: "k", count: 10_000))"}"#, payload: "{}")),
                ("alg 10 KB", "Bearer " + Self.unsignedToken(header: #"{"alg":"\#(String(repeating: "X", count: 10_000))"}"#, payload: "{}")),
                ("invalid UTF-8 payload", "Bearer " + Self.base64URL([0xFF, 0xFE]) + "." + Self.base64URL([0xC3, 0x28]) + ".sig"),
            ]
            for (name, value) in authorizations {
                probes.append(Probe("Authorization: \(name)", RawHTTP.request(target: Array(badges.utf8), headers: [("Authorization", value)])))
                probes.append(Probe("Authorization on a stream: \(name)", RawHTTP.request(target: Array(stream.utf8), headers: [("Authorization", value)]), headOnly: true))
            }
            let user = ("Authorization", "Bearer \(server.userToken)")
            let tags: [(String, String)] = [
                ("5,000 entries", (0..<5_000).map { "\"\($0)\"" }.joined(separator: ", ")), ("garbage", "W/W/\", \"\", \"\"\", ,,,, W/"),
                ("huge number", "\"99999999999999999999\""), ("negative", "\"-1\""), ("star", "*"), ("20,000 commas", String(repeating: ",", count: 20_000)),
                ("30 KB tag", "\"" + String(repeating: "9", count: 30_000) + "\""),
            ]
            for (name, value) in tags {
                probes.append(Probe("If-None-Match: \(name)", RawHTTP.request(target: Array(badges.utf8), headers: [user, ("If-None-Match", value)])))
                probes.append(Probe("If-None-Match with wait: \(name)", RawHTTP.request(target: Array("\(badges)?wait=1ms".utf8), headers: [user, ("If-None-Match", value)])))
            }
            let eventIDs: [String] = ["99999999999999999999", "-1", "abc", "1e5", "   ", "", String(repeating: "9", count: 30_000), "9223372036854775807", "0x10", "%00"]
            for value in eventIDs {
                probes.append(Probe("Last-Event-ID: \(value.prefix(24))…(\(value.count))", RawHTTP.request(target: Array(stream.utf8), headers: [user, ("Last-Event-ID", value)]), headOnly: true))
            }
            probes += [
                Probe("2,000 headers", RawHTTP.request(target: Array(badges.utf8), headers: [user] + (0..<2_000).map { ("X-H\($0)", "v") })),
                Probe("95 headers", RawHTTP.request(target: Array(badges.utf8), headers: [user] + (0..<92).map { ("X-H\($0)", "v") })),
                Probe("a 1 MB header line", RawHTTP.request(target: Array(badges.utf8), headers: [user, ("X-Junk", megabyte)])),
                Probe("a 1 MB header name", RawHTTP.request(target: Array(badges.utf8), headers: [user, (megabyte, "v")])),
                Probe("200 KB of headers in 20 KB lines", RawHTTP.request(target: Array(badges.utf8), headers: [user] + (0..<10).map { ("X-Big\($0)", String(thirtyKB.prefix(20_000))) })),
                Probe("header without colon", Array("GET \(badges) HTTP/1.1\r\nHost: x\r\nno colon here\r\nConnection: close\r\n\r\n".utf8)),
                Probe("header folding", Array("GET \(badges) HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer\r\n \(server.userToken)\r\nConnection: close\r\n\r\n".utf8)),
                Probe("NUL in a header value", RawHTTP.request(target: Array(badges.utf8), headers: [("Authorization", "Bearer \u{0}\(server.userToken)")])),
                Probe("invalid UTF-8 header value", Array("GET \(badges) HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ".utf8) + [0xFF, 0xFE] + Array("\r\nConnection: close\r\n\r\n".utf8)),
                Probe("HTTP/9.9", Array("GET /healthz HTTP/9.9\r\nHost: x\r\nConnection: close\r\n\r\n".utf8)),
                Probe("no HTTP version", Array("GET /healthz\r\n\r\n".utf8)),
                Probe("binary garbage", (0..<4_096).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }),
                Probe("method of 10 KB", Array("\(String(repeating: "X", count: 10_000)) /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8)),
                Probe("unknown method", Array("BREW /v1/users/\(Self.user)/badges HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8)),
            ]
            try await server.run(probes)
        }
    }

    // MARK: - bodies

    @Test("hostile bodies for POST clear and POST /v1/events (deep nesting, 10 MB, bad framing, invalid UTF-8, huge numbers) answer 4xx")
    func bodies() async throws {
        var logger = TestServer.logger
        logger.logLevel = .error
        let cluster = try KafkaMockCluster(logger: logger)
        defer { cluster.close() }
        let topic = "hostile-\(UInt32.random(in: 0...UInt32.max))"
        try cluster.createTopic(topic, partitions: 1)
        try await withServer(["--publish-brokers", cluster.bootstrapServers, "--publish-topic", topic]) { server in
            let clear = "/v1/users/\(Self.user)/badges/clear"
            var probes: [Probe] = []
            let deep = String(repeating: "[", count: 100_000)
            let jsonBodies: [(String, [UInt8])] = [
                ("100k levels of [", Array(deep.utf8)),
                ("15k levels of [", Array(deep.prefix(15_000).utf8)),
                ("15k levels of {\"a\":", Array(String(repeating: #"{"a":"#, count: 3_000).utf8)),
                ("path of 15k levels", Array((#"{"path":"# + deep.prefix(15_000)).utf8)),
                ("invalid UTF-8", Array(#"{"path":"root."#.utf8) + [0xFF, 0xFE, 0xC3, 0x28] + Array(#""}"#.utf8)),
                ("lone surrogate escape", Array(#"{"path":"root.\uD800"}"#.utf8)),
                ("NUL", Array("{\"path\":\"root.a\u{0}\"}".utf8)),
                ("force 1e999", Array(#"{"path":"root.a","force":1e999}"#.utf8)),
                ("force 99999999999999999999999", Array(#"{"path":"root.a","force":99999999999999999999999}"#.utf8)),
                ("path a number", Array(#"{"path":1e999}"#.utf8)),
                ("empty", []),
                ("null", Array("null".utf8)),
                ("a 14 KB string", Array((#"{"path":""# + String(repeating: "x", count: 14_000) + #""}"#).utf8)),
                ("duplicate keys", Array(#"{"path":"root.a","path":"root.b","force":true,"force":false}"#.utf8)),
                ("trailing garbage", Array(#"{"path":"root.a"} xyz"#.utf8)),
                ("10 MB", [UInt8](repeating: 0x20, count: 10 << 20)),
            ]
            for (name, body) in jsonBodies {
                // A 10 MB body is cut off by the server after its 413 (the connection closes unread).
                let timeout: Duration = body.count > 1 << 20 ? .seconds(3) : .seconds(10)
                probes.append(Probe("clear: \(name)", RawHTTP.request(method: "POST", target: Array(clear.utf8), headers: [("Authorization", "Bearer \(server.userToken)"), ("Content-Type", "application/json")], body: body), timeout: timeout))
                probes.append(Probe("events: \(name)", RawHTTP.request(method: "POST", target: Array("/v1/events".utf8), headers: [("Authorization", "Bearer \(server.adminToken)"), ("Content-Type", "application/json")], body: body), timeout: timeout))
            }
            let eventBodies: [(String, String)] = [
                ("by 1e999", #"{"id":"h1","op":"incr","user":"hostile","path":"root.a","by":1e999}"#),
                ("by 99999999999999999999999", #"{"id":"h2","op":"incr","user":"hostile","path":"root.a","by":99999999999999999999999}"#),
                ("count -1e308", #"{"id":"h3","op":"set","user":"hostile","path":"root.a","count":-1e308}"#),
                ("count 1.5", #"{"id":"h4","op":"set","user":"hostile","path":"root.a","count":1.5}"#),
                ("by NaN", #"{"id":"h5","op":"incr","user":"hostile","path":"root.a","by":NaN}"#),
                ("occurred_at garbage", #"{"id":"h6","op":"incr","user":"hostile","path":"root.a","by":1,"occurred_at":"99999-99-99T99:99:99Z"}"#),
                ("expires_at year 9999999", #"{"id":"h7","op":"incr","user":"hostile","path":"root.a","by":1,"expires_at":"9999999-01-01T00:00:00Z"}"#),
                ("10,000 users", #"{"id":"h8","type":"chat.message","users":[\#((0..<10_000).map { "\"u\($0)\"" }.joined(separator: ","))],"attrs":{}}"#),
                ("id of 100 KB", #"{"id":"\#(String(repeating: "i", count: 100_000))","op":"incr","user":"hostile","path":"root.a","by":1}"#),
            ]
            for (name, body) in eventBodies {
                probes.append(Probe("events: \(name)", RawHTTP.request(method: "POST", target: Array("/v1/events".utf8), headers: [("Authorization", "Bearer \(server.adminToken)"), ("Content-Type", "application/json")], body: Array(body.utf8))))
            }
            probes.append(Probe("events: 100,000 ndjson lines of {}", RawHTTP.request(method: "POST", target: Array("/v1/events".utf8), headers: [("Authorization", "Bearer \(server.adminToken)"), ("Content-Type", "application/x-ndjson")], body: Array(String(repeating: "{}\n", count: 100_000).utf8))))
            probes.append(Probe("events: 2 MB of newlines", RawHTTP.request(method: "POST", target: Array("/v1/events".utf8), headers: [("Authorization", "Bearer \(server.adminToken)"), ("Content-Type", "application/x-ndjson")], body: [UInt8](repeating: 0x0A, count: 2 << 20))))
            // Framing: the body and Content-Length disagree, chunked encoding is broken.
            let token = server.userToken
            let head = "POST \(clear) HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\nContent-Type: application/json\r\n"
            let good = #"{"path":"root.a"}"#
            let framing: [(String, String)] = [
                ("body bigger than Content-Length", head + "Content-Length: 5\r\n\r\n" + good + String(repeating: "x", count: 1_000)),
                ("Content-Length: -1", head + "Content-Length: -1\r\nConnection: close\r\n\r\n" + good),
                ("Content-Length: abc", head + "Content-Length: abc\r\nConnection: close\r\n\r\n" + good),
                ("Content-Length: 99999999999999999999999", head + "Content-Length: 99999999999999999999999\r\nConnection: close\r\n\r\n" + good),
                ("Content-Length: 18446744073709551615", head + "Content-Length: 18446744073709551615\r\nConnection: close\r\n\r\n" + good),
                ("two different Content-Lengths", head + "Content-Length: 17\r\nContent-Length: 3\r\nConnection: close\r\n\r\n" + good),
                ("Content-Length and chunked", head + "Content-Length: 17\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n11\r\n" + good + "\r\n0\r\n\r\n"),
                ("chunk size zz", head + "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\nzz\r\n" + good + "\r\n0\r\n\r\n"),
                ("chunk size -1", head + "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n-1\r\n" + good + "\r\n0\r\n\r\n"),
                ("chunk size FFFFFFFFFFFFFFFFFFFF", head + "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\nFFFFFFFFFFFFFFFFFFFF\r\n" + good + "\r\n0\r\n\r\n"),
                ("chunk size 7FFFFFFFFFFFFFFF, short data", head + "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n7FFFFFFFFFFFFFFF\r\n" + good),
                ("chunk longer than its size", head + "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\n" + good + "\r\n0\r\n\r\n"),
                ("chunk extension garbage", head + "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n11;;;==\u{1}\r\n" + good + "\r\n0\r\n\r\n"),
                ("Transfer-Encoding: gzip, chunked", head + "Transfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n11\r\n" + good + "\r\n0\r\n\r\n"),
                ("Transfer-Encoding: garbage", head + "Transfer-Encoding: bogus\r\nConnection: close\r\n\r\n" + good),
                ("100,000 one-byte chunks over 16 KiB", head + "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + String(repeating: "1\r\n \r\n", count: 20_000) + "0\r\n\r\n"),
            ]
            for (name, text) in framing {
                probes.append(Probe("clear framing: \(name)", Array(text.utf8), timeout: .seconds(4)))
            }
            try await server.run(probes)
        }
    }

    // MARK: - many streams

    @Test("2,000 open streams: every one is served, /healthz still answers at once, and the limits answer 429/503 with Retry-After")
    func manyStreams() async throws {
        // A stream notices that its client went away when it next writes: with heartbeats every
        // second, closed streams give their slots back within about a second.
        try await withServer(["--max-streams", "2000", "--max-streams-per-user", "1500", "--heartbeat-seconds", "1"]) { server in
            let mine = "GET /v1/users/\(Self.user)/badges/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(server.userToken)\r\n\r\n"
            let theirs = "GET /v1/users/other/badges/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(server.otherToken)\r\n\r\n"
            let held = try await RawHTTP.openStreams(port: server.port, request: Array(mine.utf8), count: 1_500)
            defer { held.close() }
            #expect(held.statuses.filter { $0 == 200 }.count == 1_500, "\(Self.histogram(held.statuses))")
            let health = await server.timedHealth()
            #expect(health.status == 200 && health.elapsed < .seconds(2), "with 1,500 open streams: \(health)")

            // The user's limit: 429 with Retry-After, while another user still gets streams.
            let refused = await server.send(Array(mine.utf8), headOnly: true)
            #expect(refused.status == 429, "\(refused)")
            #expect(refused.header("retry-after") != nil, "\(refused)")
            // A long-poll takes a slot like a stream.
            let poll = await server.send(RawHTTP.get("/v1/users/\(Self.user)/badges?wait=5s&since=0", token: server.userToken))
            #expect(poll.status == 429, "a long-poll over the user's limit: \(poll)")
            let others = try await RawHTTP.openStreams(port: server.port, request: Array(theirs.utf8), count: 500)
            defer { others.close() }
            #expect(others.statuses.filter { $0 == 200 }.count == 500, "\(Self.histogram(others.statuses))")
            // The server's limit: 503 with Retry-After.
            let full = await server.send(Array(theirs.utf8), headOnly: true)
            #expect(full.status == 503, "\(full)")
            #expect(full.header("retry-after") != nil, "\(full)")
            #expect(full.text.contains("too_many_streams"), "\(full)")
            // Someone without a token learns nothing: 401, not 429 or 503.
            let anonymous = await server.send(RawHTTP.get("/v1/users/\(Self.user)/badges/stream", token: nil), headOnly: true)
            #expect(anonymous.status == 401, "\(anonymous)")
            let read = await server.send(RawHTTP.get("/v1/users/\(Self.user)/badges", token: server.userToken))
            #expect(read.status == 200, "a plain read with 2,000 open streams: \(read)")
            let healthFull = await server.timedHealth()
            #expect(healthFull.status == 200 && healthFull.elapsed < .seconds(2), "with 2,000 open streams: \(healthFull)")

            // Closing streams gives their slots back.
            held.close()
            others.close()
            // Each stream notices at its next heartbeat (1 s here); 2,500 of them on a loaded
            // machine may take a while.
            let deadline = ContinuousClock.now + .seconds(45)
            var again = RawResponse()
            while ContinuousClock.now < deadline {
                again = await server.send(Array(mine.utf8), headOnly: true)
                if again.status == 200 { break }
                try await Task.sleep(for: .milliseconds(200))
            }
            #expect(again.status == 200, "after the streams closed: \(again)")
            try await server.expectHealthy(after: "2,000 streams")
        }
    }

    // MARK: - unfinished requests

    @Test("500 half request lines and 100 bodies that never come: /healthz answers at once, and the idle timeout closes them")
    func unfinishedRequests() async throws {
        try await withServer(["--idle-timeout-seconds", "2", "--body-timeout-seconds", "1"]) { server in
            let halfLine = Array("GET /v1/users/\(Self.user)/badges HTT".utf8)
            let noBody = Array("POST /v1/users/\(Self.user)/badges/clear HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(server.userToken)\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"pa".utf8)
            let halfHeaders = Array("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: aaaa".utf8)
            let stalled = try await RawHTTP.openStalled(port: server.port, sends: [(halfLine, 500), (noBody, 100), (halfHeaders, 100)])
            defer { stalled.close() }
            let started = ContinuousClock.now
            let health = await server.timedHealth()
            #expect(health.status == 200 && health.elapsed < .seconds(1), "with 700 unfinished requests: \(health)")
            let read = await server.send(RawHTTP.get("/v1/users/\(Self.user)/badges", token: server.userToken))
            #expect(read.status == 200, "\(read)")
            // Within a few idle timeouts the server has closed (or answered 408 to) all of them.
            // A body sent one byte every 300 ms (each byte resets the idle timeout) meets the body timeout.
            let dripped = await RawHTTP.drip(
                port: server.port, head: Array("POST /v1/users/\(Self.user)/badges/clear HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(server.userToken)\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n".utf8),
                byteEvery: .milliseconds(300), for: .seconds(3))
            #expect(dripped.status == 408, "a body dripped byte by byte: \(dripped)")
            let closed = await stalled.waitUntilClosed(timeout: .seconds(10))
            #expect(closed.open == 0, "still open after \(ContinuousClock.now - started): \(closed)")
            #expect(closed.statuses.allSatisfy { $0 < 500 }, "\(Self.histogram(closed.statuses))")
            #expect(closed.statuses.filter { $0 == 408 }.count == 100, "the bodies that never came: \(Self.histogram(closed.statuses))")
            try await server.expectHealthy(after: "700 unfinished requests")
        }
    }

    @Test("at the open-file limit (ulimit -n 256): new connections wait, nothing crashes, and the server recovers")
    func fileLimit() async throws {
        try await withServer(openFiles: 256) { server in
            // The default connection limit is the open-file limit less the pool and 128: 120 here.
            let idle = try await RawHTTP.openStalled(port: server.port, sends: [([], 300)], connectTimeout: .seconds(5))
            let waiting = await server.timedHealth(timeout: .seconds(1))
            idle.close()
            // The backlog's closed connections are accepted and dropped first: on a loaded machine
            // that takes a while.
            let recovered = await server.timedHealth(timeout: .seconds(30))
            #expect(recovered.status == 200, "after closing 300 connections: \(recovered)")
            // Documented: while every connection slot is taken, a new connection waits in the backlog.
            #expect(waiting.status == nil, "with 300 connections open at a limit of 120: \(waiting)")
            try await server.expectHealthy(after: "300 connections at a 256-file limit")
        }
    }

    @Test("the harness: a probe after which the server dies is reported by name, and the server is started again")
    func crashIsReported() async throws {
        try await withServer { server in
            let first = server.process.processIdentifier
            _ = await server.send(RawHTTP.get("/healthz", token: nil))
            kill(first, SIGKILL)
            await withKnownIssue("the server was killed on purpose") {
                try await server.expectHealthy(after: "a deliberate SIGKILL")
            }
            #expect(server.crashes.count == 1)
            #expect(server.crashes.first?.contains("after: a deliberate SIGKILL") == true, "\(server.crashes)")
            #expect(server.process.processIdentifier != first && server.process.isRunning)
            try await server.expectHealthy(after: "the restart")
        }
    }

    // MARK: - the server under test

    /// A `reddot serve` process on a migrated database with two users' badges, and tokens.
    final class Server: @unchecked Sendable {
        let arguments: [String]
        let openFiles: Int?
        let logFile: URL
        let userToken: String
        let otherToken: String
        let adminToken: String
        private(set) var process: Process
        private(set) var port: Int
        /// Probes that killed the process, with its last log lines.
        private(set) var crashes: [String] = []

        init(arguments: [String], openFiles: Int?, userToken: String, otherToken: String, adminToken: String) async throws {
            self.arguments = arguments
            self.openFiles = openFiles
            self.userToken = userToken
            self.otherToken = otherToken
            self.adminToken = adminToken
            logFile = FileManager.default.temporaryDirectory.appendingPathComponent("reddot-hostile-\(UInt32.random(in: 0...UInt32.max)).log")
            (process, port) = try await Self.start(arguments, openFiles: openFiles, log: logFile)
        }

        private static func start(_ arguments: [String], openFiles: Int?, log: URL) async throws -> (Process, Int) {
            let port = try ServeCLITests.freePort()
            let process = Process()
            let binary = try CLITests.binary.get()
            let all = arguments + ["--port", "\(port)", "--host", "127.0.0.1"]
            if let openFiles {
                process.executableURL = URL(fileURLWithPath: "/bin/sh")
                process.arguments = ["-c", "ulimit -n \(openFiles) && exec \"$0\" \"$@\"", binary.path] + all
            } else {
                process.executableURL = binary
                process.arguments = all
            }
            var environment = ProcessInfo.processInfo.environment
            environment["REDDOT_JWT_HS256_SECRET"] = ServeCLITests.secret
            environment["REDDOT_LOG_LEVEL"] = "warning"
            environment["REDDOT_KAFKA_BROKERS"] = nil
            process.environment = environment
            _ = FileManager.default.createFile(atPath: log.path, contents: nil)
            let handle = try FileHandle(forWritingTo: log)
            handle.seekToEndOfFile()
            process.standardOutput = FileHandle.nullDevice
            process.standardError = handle
            process.standardInput = FileHandle.nullDevice
            try process.run()
            try handle.close()
            do {
                try await ServeCLITests.waitForHealth(port: port)
            } catch {
                if process.isRunning { process.terminate() }
                throw error
            }
            return (process, port)
        }

        /// The server's fatal error lines, if any, then the last lines it logged.
        var logTail: String {
            let lines = ((try? String(contentsOf: logFile, encoding: .utf8)) ?? "").split(separator: "\n")
            let fatal = lines.filter { $0.contains("Fatal error") || $0.contains("fatal") || $0.contains("Crash") }.prefix(5)
            return (fatal + lines.suffix(12)).joined(separator: "\n")
        }

        func send(_ request: [UInt8], headOnly: Bool = false, timeout: Duration = .seconds(10)) async -> RawResponse {
            await RawHTTP.exchange(port: port, request, headOnly: headOnly, timeout: timeout)
        }

        func timedHealth(timeout: Duration = .seconds(5)) async -> (status: Int?, elapsed: Duration) {
            let started = ContinuousClock.now
            let answer = await RawHTTP.exchange(port: port, RawHTTP.get("/healthz", token: nil), headOnly: false, timeout: timeout)
            return (answer.status, ContinuousClock.now - started)
        }

        /// The process lives and answers `/healthz` with 200 within 2 s; else the failure names
        /// `probe`, and a dead process is started again.
        func expectHealthy(after probe: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
            let health = await timedHealth(timeout: .seconds(2))
            if health.status == 200, process.isRunning { return }
            // A crashing process may take a while to end (its backtrace is written first).
            let deadline = ContinuousClock.now + .seconds(15)
            while process.isRunning, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(100)) }
            guard !process.isRunning else {
                Issue.record("GET /healthz after \(probe): \(health)", sourceLocation: sourceLocation)
                return
            }
            let report = "the server died (status \(process.terminationStatus)) after: \(probe)\n\(logTail)"
            crashes.append(report)
            Issue.record(Comment(rawValue: report), sourceLocation: sourceLocation)
            // Start it again, so that the remaining probes still run.
            try? FileManager.default.removeItem(at: logFile)
            (process, port) = try await Self.start(arguments, openFiles: openFiles, log: logFile)
        }

        /// Sends each probe on a connection of its own; checks its answers and the server's health.
        func run(_ probes: [Probe], sourceLocation: SourceLocation = #_sourceLocation) async throws {
            var table: [String] = []
            for probe in probes {
                let answer = await send(probe.request, headOnly: probe.headOnly, timeout: probe.timeout)
                table.append("\(answer.statuses.map(String.init).joined(separator: ",").isEmpty ? (answer.error ?? "no answer") : answer.statuses.map(String.init).joined(separator: ",")) \(probe.name)")
                let bad = answer.statuses.filter { (500...599).contains($0) }
                #expect(bad.isEmpty, "\(probe.name) answered \(bad): \(answer.text.prefix(300))", sourceLocation: sourceLocation)
                try await expectHealthy(after: probe.name, sourceLocation: sourceLocation)
            }
            if ProcessInfo.processInfo.environment["REDDOT_TEST_HOSTILE_TABLE"] == "1" {
                print(table.joined(separator: "\n"))
            }
        }

        func stop() {
            if process.isRunning {
                kill(process.processIdentifier, SIGTERM)
                process.waitUntilExit()
            }
            try? FileManager.default.removeItem(at: logFile)
        }
    }

    /// Starts a server with `arguments` on a fresh database, runs `body`, checks that the server
    /// is still alive and exits 0 on SIGTERM.
    func withServer(_ arguments: [String] = [], openFiles: Int? = nil, _ body: (Server) async throws -> Void) async throws {
        try await cli.withDatabase { url in
            let migrate = try await cli.reddot(["migrate", "up", "--database-url", url, "--migrations", Repository.migrationsDirectory.path])
            try #require(migrate.exitCode == 0, "\(migrate)")
            for user in [Self.user, "other"] {
                let applied = try await cli.reddot(["badges", "apply", "--database-url", url, "--user", user, "--op", "incr", "--by", "3", "--path", "root.chat.c1"])
                try #require(applied.exitCode == 0, "\(applied)")
            }
            let token = { (arguments: [String]) async throws -> String in
                let result = try await cli.reddot(["token", "--jwt-hs256-secret", ServeCLITests.secret, "--expires-in", "3600"] + arguments)
                try #require(result.exitCode == 0, "\(result)")
                return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            }
            let server = try await Server(
                arguments: ["serve", "--database-url", url] + arguments, openFiles: openFiles,
                userToken: try await token(["--subject", Self.user]), otherToken: try await token(["--subject", "other"]),
                adminToken: try await token(["--admin"]))
            do {
                try await body(server)
            } catch {
                server.stop()
                throw error
            }
            #expect(server.process.isRunning, "the server died: \(server.logTail)")
            kill(server.process.processIdentifier, SIGTERM)
            server.process.waitUntilExit()
            #expect(server.process.terminationStatus == 0, "exit status after SIGTERM: \(server.logTail)")
            server.stop()
        }
    }

    // MARK: - helpers

    static func queryEscaped(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        // Keep deliberate percent garbage ("%zz", "%ff") as it is.
        if text.contains("%") { return text.replacingOccurrences(of: " ", with: "%20").replacingOccurrences(of: "&", with: "%26") }
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }

    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func unsignedToken(header: String, payload: String) -> String {
        base64URL(Array(header.utf8)) + "." + base64URL(Array(payload.utf8)) + ".c2lnbmF0dXJl"
    }

    /// An `alg: none` token with an empty signature.
    static func noneToken(subject: String, scope: String? = nil) -> String {
        let scopeClaim = scope.map { #","scope":"\#($0)""# } ?? ""
        let payload = #"{"sub":"\#(subject)","exp":4102444800\#(scopeClaim)}"#
        return base64URL(Array(#"{"alg":"none","typ":"JWT"}"#.utf8)) + "." + base64URL(Array(payload.utf8)) + "."
    }

    static func histogram(_ statuses: [Int]) -> [Int: Int] {
        statuses.reduce(into: [:]) { $0[$1, default: 0] += 1 }
    }
}

/// One hostile request.
struct Probe: Sendable {
    let name: String
    let request: [UInt8]
    /// Stop reading after the response head (streams).
    var headOnly = false
    var timeout: Duration = .seconds(10)

    init(_ name: String, _ request: [UInt8], headOnly: Bool = false, timeout: Duration = .seconds(10)) {
        self.name = name
        self.request = request
        self.headOnly = headOnly
        self.timeout = timeout
    }
}

/// What came back on a raw connection.
struct RawResponse: Sendable, CustomStringConvertible {
    /// The status of every response read (pipelined answers included).
    var statuses: [Int] = []
    /// Everything read, as text (invalid UTF-8 replaced), at most 64 KiB kept.
    var text = ""
    /// Why nothing (or not everything) was read: a reset, a refused connection, a timeout.
    var error: String?

    var status: Int? { statuses.first }

    func header(_ name: String) -> String? {
        guard let end = text.range(of: "\r\n\r\n") else { return nil }
        for line in text[..<end.lowerBound].split(separator: "\r\n").dropFirst() {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == name.lowercased() { return parts[1].trimmingCharacters(in: .whitespaces) }
        }
        return nil
    }

    var description: String {
        "status \(statuses.map(String.init).joined(separator: ",")) error \(error ?? "-"): \(text.prefix(400))"
    }
}

/// HTTP/1.1 over blocking sockets to 127.0.0.1, run on Dispatch threads (never the cooperative
/// pool): nothing is validated, so anything can be sent.
enum RawHTTP {
    /// `GET target` with `Connection: close`, and a bearer token if given.
    static func get(_ target: String, token: String?) -> [UInt8] {
        request(target: Array(target.utf8), headers: token.map { [("Authorization", "Bearer \($0)")] } ?? [])
    }

    /// A request with `Host` and `Connection: close`; `Content-Length` when there is a body.
    static func request(method: String = "GET", target: [UInt8], headers: [(String, String)], body: [UInt8]? = nil) -> [UInt8] {
        var bytes = Array("\(method) ".utf8) + target + Array(" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n".utf8)
        for (name, value) in headers { bytes += Array("\(name): \(value)\r\n".utf8) }
        if let body { bytes += Array("Content-Length: \(body.count)\r\n".utf8) }
        bytes += Array("\r\n".utf8)
        if let body { bytes += body }
        return bytes
    }

    struct SocketError: Error, CustomStringConvertible {
        var description: String
    }

    static func connect(port: Int, timeout: Duration = .seconds(5)) throws -> Int32 {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw SocketError(description: "socket(): \(String(cString: strerror(errno)))") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        // Send and receive time-outs, so that nothing blocks forever.
        let seconds = timeout.components.seconds
        var limit = timeval(tv_sec: Int(seconds), tv_usec: 0)
        setsockopt(socket, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            let message = String(cString: strerror(errno))
            close(socket)
            throw SocketError(description: "connect(): \(message)")
        }
        return socket
    }

    /// Sends all of `bytes`; nil, or the error that stopped it (the server may close early).
    static func sendAll(_ socket: Int32, _ bytes: [UInt8]) -> String? {
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count < 0 {
                if errno == EINTR { continue }
                return "send(): \(String(cString: strerror(errno))) after \(sent) of \(bytes.count) bytes"
            }
            sent += count
        }
        return nil
    }

    /// Reads until the peer closes, `deadline` passes, or (with `headOnly`) a response head is
    /// complete. Returns the bytes and why it stopped, if not by a close.
    static func read(_ socket: Int32, until deadline: ContinuousClock.Instant, headOnly: Bool) -> ([UInt8], String?) {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            if headOnly, received.count >= 4, received.firstRange(of: [13, 10, 13, 10]) != nil { return (received, nil) }
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else { return (received, "timed out") }
            var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            let milliseconds = Int32(min(remaining.nanoseconds / 1_000_000 + 1, 60_000))
            let ready = poll(&descriptor, 1, milliseconds)
            if ready < 0 {
                if errno == EINTR { continue }
                return (received, "poll(): \(String(cString: strerror(errno)))")
            }
            if ready == 0 { continue }
            let count = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
            if count == 0 { return (received, nil) }
            if count < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                return (received, "recv(): \(String(cString: strerror(errno)))")
            }
            // Keep at most 1 MiB: a body beyond that only matters for its status line.
            if received.count < 1 << 20 { received += buffer[0..<count] }
        }
    }

    /// The statuses of the responses in `bytes` (a response may follow another on one connection).
    static func statuses(in bytes: [UInt8]) -> [Int] {
        let text = String(decoding: bytes, as: UTF8.self)
        return text.matches(of: #/HTTP/1\.[01] (\d{3})/#).compactMap { Int($0.output.1) }
    }

    /// One exchange on a new connection; errors become part of the answer, never a throw.
    static func exchange(port: Int, _ request: [UInt8], headOnly: Bool, timeout: Duration) async -> RawResponse {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(returning: exchangeBlocking(port: port, request, headOnly: headOnly, timeout: timeout))
            }
        }
    }

    static func exchangeBlocking(port: Int, _ request: [UInt8], headOnly: Bool, timeout: Duration) -> RawResponse {
        var answer = RawResponse()
        let deadline = ContinuousClock.now + timeout
        let socket: Int32
        do {
            socket = try connect(port: port, timeout: timeout)
        } catch {
            answer.error = "\(error)"
            return answer
        }
        defer { close(socket) }
        let sendError = sendAll(socket, request)
        let (bytes, readError) = read(socket, until: deadline, headOnly: headOnly)
        answer.statuses = statuses(in: bytes)
        answer.text = String(decoding: bytes.prefix(65_536), as: UTF8.self)
        answer.error = [sendError, readError].compactMap { $0 }.joined(separator: "; ").nilIfEmpty
        return answer
    }

    /// Sends `head`, then one space every `byteEvery` until an answer comes or `duration` passes.
    static func drip(port: Int, head: [UInt8], byteEvery interval: Duration, for duration: Duration) async -> RawResponse {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                var answer = RawResponse()
                guard let socket = try? connect(port: port) else {
                    answer.error = "connect() failed"
                    continuation.resume(returning: answer)
                    return
                }
                defer { close(socket) }
                _ = sendAll(socket, head)
                let deadline = ContinuousClock.now + duration
                var bytes: [UInt8] = []
                while ContinuousClock.now < deadline {
                    let (read, _) = RawHTTP.read(socket, until: ContinuousClock.now + interval, headOnly: true)
                    bytes += read
                    if !statuses(in: bytes).isEmpty { break }
                    if let error = sendAll(socket, [0x20]) {
                        answer.error = error
                        break
                    }
                }
                answer.statuses = statuses(in: bytes)
                answer.text = String(decoding: bytes, as: UTF8.self)
                continuation.resume(returning: answer)
            }
        }
    }

    /// Connections held open by the test; `close()` closes them all (once).
    final class HeldConnections: @unchecked Sendable {
        private let lock = NSLock()
        private var sockets: [Int32]
        /// The status each answered with (streams: their response head); unanswered ones are absent.
        let statuses: [Int]

        init(sockets: [Int32], statuses: [Int]) {
            self.sockets = sockets
            self.statuses = statuses
        }

        func close() {
            let all = lock.withLock {
                defer { sockets = [] }
                return sockets
            }
            for socket in all { Glibc.close(socket) }
        }

        /// Waits until the server has closed every connection (reading what it sent), or
        /// `timeout` passes: how many are still open, and the statuses the server sent.
        func waitUntilClosed(timeout: Duration) async -> (open: Int, statuses: [Int]) {
            let sockets = lock.withLock { self.sockets }
            return await withCheckedContinuation { continuation in
                DispatchQueue.global().async {
                    let deadline = ContinuousClock.now + timeout
                    var open = Set(sockets)
                    var received: [Int32: [UInt8]] = [:]
                    var buffer = [UInt8](repeating: 0, count: 4_096)
                    while !open.isEmpty, ContinuousClock.now < deadline {
                        var descriptors = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
                        let ready = poll(&descriptors, nfds_t(descriptors.count), 200)
                        guard ready > 0 else { continue }
                        for descriptor in descriptors where descriptor.revents != 0 {
                            let count = buffer.withUnsafeMutableBytes { recv(descriptor.fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                            if count > 0 {
                                received[descriptor.fd, default: []] += buffer[0..<count]
                            } else if count == 0 || (errno != EAGAIN && errno != EINTR) {
                                open.remove(descriptor.fd)
                            }
                        }
                    }
                    let statuses = received.values.flatMap { RawHTTP.statuses(in: $0) }
                    continuation.resume(returning: (open.count, statuses))
                }
            }
        }

        deinit { close() }
    }

    /// Opens `count` connections that each send `request` and read its response head: streams
    /// held open. Fails if a connection cannot be made.
    static func openStreams(port: Int, request: [UInt8], count: Int) async throws -> HeldConnections {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                var sockets: [Int32] = []
                do {
                    for _ in 0..<count {
                        let socket = try connect(port: port, timeout: .seconds(10))
                        sockets.append(socket)
                        if let error = sendAll(socket, request) { throw SocketError(description: error) }
                    }
                } catch {
                    for socket in sockets { close(socket) }
                    continuation.resume(throwing: error)
                    return
                }
                // All requests are in flight; now collect each response head.
                let deadline = ContinuousClock.now + .seconds(30)
                let statuses = sockets.compactMap { socket in
                    RawHTTP.statuses(in: RawHTTP.read(socket, until: deadline, headOnly: true).0).first
                }
                continuation.resume(returning: HeldConnections(sockets: sockets, statuses: statuses))
            }
        }
    }

    /// Opens connections that each send their bytes (perhaps none) and then nothing more.
    static func openStalled(port: Int, sends: [([UInt8], Int)], connectTimeout: Duration = .seconds(5)) async throws -> HeldConnections {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                var sockets: [Int32] = []
                do {
                    for (bytes, count) in sends {
                        for _ in 0..<count {
                            let socket = try connect(port: port, timeout: connectTimeout)
                            sockets.append(socket)
                            if !bytes.isEmpty, let error = sendAll(socket, bytes) { throw SocketError(description: error) }
                        }
                    }
                } catch {
                    for socket in sockets { close(socket) }
                    continuation.resume(throwing: error)
                    return
                }
                continuation.resume(returning: HeldConnections(sockets: sockets, statuses: []))
            }
        }
    }
}

extension String {
    fileprivate var nilIfEmpty: String? { isEmpty ? nil : self }
}

extension Duration {
    fileprivate var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
