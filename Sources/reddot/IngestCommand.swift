import ArgumentParser

/// `reddot ingest` (being written).
struct IngestCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "ingest", abstract: "Consume badge events from Kafka into PostgreSQL, exactly once.")
}
