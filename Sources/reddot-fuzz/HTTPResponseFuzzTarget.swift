import RedDotClient

/// HTTP/1.1 responses as RedDotClient's own transport reads them: the same bytes give the same
/// head, body and end (or the same refusal) in one chunk and in chunks of the size the input's
/// first byte picks; the body is never longer than the input; a refusal is one sentence.
enum HTTPResponseFuzzTarget {
    static let target = FuzzTarget.response

    /// What a parse gave: the outputs, with the body joined, and the refusal if any.
    struct Reading: Equatable {
        var head: HTTPResponseParser.Output?
        var body: [UInt8] = []
        var ended = false
        var refusal: String?
    }

    static func read(_ chunks: [ArraySlice<UInt8>]) -> Reading {
        var parser = HTTPResponseParser(maximumHeadBytes: 4_096)
        var reading = Reading()
        func take(_ outputs: [HTTPResponseParser.Output]) {
            for output in outputs {
                switch output {
                case .head: if reading.head == nil { reading.head = output }
                case .body(let bytes): reading.body += bytes
                case .end: reading.ended = true
                }
            }
        }
        do {
            for chunk in chunks { take(try parser.feed(chunk)) }
            take(try parser.finish())
        } catch {
            reading.refusal = error.description
        }
        return reading
    }

    static func run(_ bytes: [UInt8]) {
        guard let first = bytes.first else { return }
        let body = Array(bytes.dropFirst())
        let whole = read([body[...]])
        let step = Int(first % 32) + 1
        let split = read(stride(from: 0, to: body.count, by: step).map { body[$0..<min($0 + step, body.count)] })
        FuzzFailure.check(whole == split, target, "chunks of \(step) bytes read otherwise than one chunk: \(split), not \(whole)")
        FuzzFailure.check(whole.body.count <= body.count, target, "the body is longer than the input")
        FuzzFailure.check(whole.refusal != nil || whole.ended, target, "a response read to its end neither ended nor was refused")
        if let refusal = whole.refusal { FuzzFailure.checkMessage(refusal, target) }
        if case .head(let status, _)? = whole.head {
            FuzzFailure.check((200...999).contains(status) || (0...99).contains(status), target, "an interim status was reported as the head")
        }
    }
}
