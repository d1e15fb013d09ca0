import BadgeStore
import Dispatch
import Foundation
import LibPQ
import Logging
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

    @Test("a stream whose client went away gives its slot back at once, not at the next heartbeat (15 s by default)")
    func closedStreamFreesItsSlot() async throws {
        try await withServer(["--max-streams-per-user", "2"]) { server in
            let mine = "GET /v1/users/\(Self.user)/badges/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(server.userToken)\r\n\r\n"
            let held = try await RawHTTP.openStreams(port: server.port, request: Array(mine.utf8), count: 2)
            #expect(held.statuses == [200, 200], "\(held.statuses)")
            let refused = await server.send(Array(mine.utf8), headOnly: true)
            #expect(refused.status == 429, "\(refused)")
            held.close()
            let closed = ContinuousClock.now
            var again = RawResponse()
            while ContinuousClock.now - closed < .seconds(30) {
                again = await server.send(Array(mine.utf8), headOnly: true)
                if again.status == 200 { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            let took = ContinuousClock.now - closed
            #expect(again.status == 200, "after the streams closed: \(again)")
            #expect(took < .seconds(5), "the slots came back after \(took); a heartbeat is 15 s")
            try await server.expectHealthy(after: "closed streams")
        }
    }

    @Test("2,000 open streams and one broadcast: every stream gets it, and the server reads it once, not once per stream")
    func broadcastToManyStreams() async throws {
        try await withServer(["--max-streams", "2000", "--max-streams-per-user", "2000", "--heartbeat-seconds", "5"]) { server in
            let request = "GET /v1/users/\(Self.user)/badges/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(server.userToken)\r\n\r\n"
            let streams = try await RawHTTP.openStreams(port: server.port, request: Array(request.utf8), count: 2_000)
            defer { streams.close() }
            #expect(streams.statuses.filter { $0 == 200 }.count == 2_000, "\(Self.histogram(streams.statuses))")
            let before = try await Self.metrics(server)

            // A broadcast, stored as ingest stores one (lock, row stamped with its version, bump).
            let url = try #require(server.arguments.firstIndex(of: "--database-url").map { server.arguments[$0 + 1] })
            let pool = PGPool(configuration: PGConfiguration(connectionString: url), maximumConnections: 1, logger: Logger(label: "test"))
            defer { pool.close() }
            try await pool.withTransaction { connection in
                try BadgeStore.lockBroadcastsExclusive(on: connection)
                _ = try connection.query(
                    PGStatement(
                        "test.broadcast",
                        "INSERT INTO broadcast (event_id, path, count, shown_in) SELECT 'news', 'root.news', 1, version + 1 FROM broadcast_version",
                        prepared: false))
                try BadgeStore.bumpBroadcastVersion(on: connection)
            }
            let reached = await streams.countReceiving(#""path":"root.news""#, timeout: .seconds(60))
            #expect(reached == 2_000, "streams that got the broadcast")

            let after = try await Self.metrics(server)
            let treeReads = (after["reddot_api_store_reads_total"] ?? 0) - (before["reddot_api_store_reads_total"] ?? 0)
            let broadcastReads = (after["reddot_api_broadcast_reads_total"] ?? 0) - (before["reddot_api_broadcast_reads_total"] ?? 0)
            #expect(treeReads == 0, "tree reads for one broadcast with 2,000 streams")
            #expect((1...2).contains(broadcastReads), "reads of the broadcast log: \(broadcastReads)")
            try await server.expectHealthy(after: "a broadcast to 2,000 streams")
        }
    }

    /// The server's `/metrics`, as sums by metric name (labels summed over).
    static func metrics(_ server: Server) async throws -> [String: Double] {
        let page = await server.send(RawHTTP.get("/metrics", token: nil))
        try #require(page.status == 200, "\(page)")
        var sums: [String: Double] = [:]
        for line in page.text.split(separator: "\n") where !line.hasPrefix("#") {
            let parts = line.split(separator: " ")
            guard parts.count >= 2, let value = Double(parts[parts.count - 1]) else { continue }
            let name = String(parts[0].prefix { $0 != "{" })
            sums[name, default: 0] += value
        }
        return sums
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
            // A body declared over the limit (16 KiB) is refused at once, before its bytes come.
            let declaredAt = ContinuousClock.now
            let declared = await server.send(Array("POST /v1/users/\(Self.user)/badges/clear HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(server.userToken)\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"pa".utf8), headOnly: true)
            #expect(declared.status == 413 && ContinuousClock.now - declaredAt < .seconds(1), "\(declared)")
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
            var recovered = await server.timedHealth(timeout: .seconds(30))
            if recovered.status != 200 {
                // Slow, not yet wrong: say what the server holds (the CI log keeps it), then ask
                // once more.
                let report = server.openFilesReport
                recovered = await server.timedHealth(timeout: .seconds(30))
                print("[fileLimit] no answer within 30 s after closing 300 connections (\(recovered)): \(report)")
            }
            #expect(recovered.status == 200, "after closing 300 connections: \(recovered); \(server.openFilesReport)")
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
