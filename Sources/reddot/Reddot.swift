import ArgumentParser

@main
struct Reddot: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "reddot", abstract: "RedDot badge backend.")
}
