import Foundation
import RdKafka
import RedDotCommandLine
import Testing

@Suite("The option groups the commands share, parsed without the binary")
struct SharedOptionsTests {
    @Test("Kafka options: flags win, a -X that is not key=value and a bad topic are refused with a sentence")
    func kafka() throws {
        let options = try KafkaOptions.parse(["--brokers", "b1:9092,b2:9092", "--topic", "t.events", "-X", "acks=all"])
        #expect(options.brokers == "b1:9092,b2:9092")
        #expect(options.topic == "t.events")
        let configuration = try options.configuration(defaults: [("client.id", "x"), ("acks", "1")])
        #expect(configuration.properties.last { $0.key == "acks" }?.value == "all")
        #expect(options.propertyKeys() == ["acks"])
        #expect(throws: (any Error).self) { try KafkaOptions.parse(["-X", "novalue"]) }
        #expect(KafkaOptions.topicProblem("a b") == "topic 'a b' has the character ' '; a Kafka topic is made of a-z, A-Z, 0-9, '.', '_' and '-'")
        #expect(KafkaOptions.topicProblem("..") != nil)
    }

    @Test("a Kafka properties file: comments, CRLF lines and spaces; a bad line is named, its value never")
    func propertiesFile() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("reddot-props-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        try Data("# a comment\r\nsasl.password = s3cret\r\n\r\nacks=all\n".utf8).write(to: file)
        let properties = try KafkaOptions.readProperties(path: file.path)
        #expect(properties.map(\.key) == ["sasl.password", "acks"])
        #expect(properties.first?.value == "s3cret")
        try Data("ok=1\nsecret-without-equals\n".utf8).write(to: file)
        do {
            _ = try KafkaOptions.readProperties(path: file.path)
            Issue.record("a line without = was accepted")
        } catch {
            #expect("\(error)".contains("line 2 is not key=value"))
            #expect(!"\(error)".contains("secret-without-equals"))
        }
    }

    @Test("every command's database sessions run without JIT, as the services' do")
    func databaseSessions() throws {
        let options = try DatabaseOptions.parse(["--database-url", "postgresql://reddot@db/reddot"])
        for configuration in [options.configuration(), options.configuration(statementTimeoutMilliseconds: 30_000)] {
            #expect(configuration.sessionSettings.contains { $0.name == "jit" && $0.value == "off" })
            #expect(configuration.connectionString == "postgresql://reddot@db/reddot")
        }
    }

    @Test("exit codes are the sysexits values the runbook lists")
    func exitCodes() {
        #expect(ExitCodes.usage == 64 && ExitCodes.dataError == 65 && ExitCodes.unavailable == 69)
        #expect(ExitCodes.temporaryFailure == 75 && ExitCodes.pending == 3 && ExitCodes.failure == 1)
    }
}
