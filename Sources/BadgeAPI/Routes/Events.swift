import BadgeCore
import Foundation
import Hummingbird
import NIOCore

/// `POST /v1/events`: checked events into the event log, for ingest to consume.
struct EventsController {
    let api: BadgeAPI

    var routes: [APIRoute<APIRequestContext>] {
        [APIRoute(.post, "/v1/events", access: .publisher) { request, _ in try await self.publishEvents(request) }]
    }

    private func publishEvents(_ request: Request) async throws -> Response {
        guard let publisher = api.publisher else {
            throw APIError(.serviceUnavailable, code: "publishing_disabled", message: "this server has no Kafka producer (start reddot serve with --publish-brokers, or set REDDOT_KAFKA_BROKERS)")
        }
        let body = Array(buffer: try await api.collectBody(request, limit: api.configuration.maximumEventsBodySize))
        let contentType = request.headers[.contentType]?.lowercased() ?? ""
        let lines: [ArraySlice<UInt8>]
        if contentType.hasPrefix("application/x-ndjson") || contentType.hasPrefix("application/jsonl") {
            lines = body.split(separator: UInt8(ascii: "\n")).filter { !$0.allSatisfy { $0 == 32 || $0 == 13 || $0 == 9 } }
        } else {
            lines = [body[...]]
        }
        guard !lines.isEmpty else { throw APIError.badRequest("malformed_json", "the body holds no event") }
        let intake = EventIntake(rules: nil)
        var records: [(key: String, payload: [UInt8])] = []
        var ids: [String] = []
        for (index, line) in lines.enumerated() {
            switch intake.check(line) {
            case .failure(let refused):
                let prefix = lines.count > 1 ? "event \(index + 1): " : ""
                throw APIError.badRequest(refused.rejection.reason.rawValue, prefix + refused.rejection.message)
            case .success(let event):
                records.append((event.recordKey, Array(line)))
                ids.append(event.id.rawValue)
            }
        }
        let delivered: [PublishedRecord]
        do {
            delivered = try await publisher.publish(records)
        } catch {
            api.logger.info("publishing events failed", metadata: [RedDotLogKey.error: "\(error)"])
            throw APIError.unavailable("the event log (Kafka) did not take the events; retry (event ids make it safe)")
        }
        let items = zip(ids, delivered).map { PublishedEvent(id: $0, partition: $1.partition, offset: $1.offset) }
        return BadgeAPI.json(status: .accepted, String(decoding: try BadgeAPI.encode(PublishAnswer(published: items.count, events: items)).readableBytesView, as: UTF8.self))
    }
}

struct PublishedEvent: Encodable {
    var id: String
    var partition: Int32
    var offset: Int64
}

struct PublishAnswer: Encodable {
    var published: Int
    var events: [PublishedEvent]
}
