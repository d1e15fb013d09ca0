import ArgumentParser

/// `reddot publish`: the producers' command-line tool (being written).
struct PublishCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "publish", abstract: "Publish badge events to Kafka.")
}
