// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMSSE
import AFMSystem

/// A streaming `POST /v1/responses` in progress: poll ``descriptor``, then call ``readEvents()``.
///
/// ```
/// start ─► (poll readable) ─► readEvents() ─► [.started, .textDelta…] … ─► terminal event ─► isFinished
///       └► cancel() at any time: closes the socket; afmd cancels the generation
/// ```
///
/// What the server sends is capped (the server at the URL may not be afmd, or not well): one event may hold at most
/// ``maximumEventBytes``, one line a little more, the whole stream ``maximumStreamBytes`` and an error answer's body
/// ``maximumErrorBodyBytes``; an event's JSON may hold at most ``JSONParser/Limits/maximumDocumentValues`` values
/// (the cap afmd puts on a request body: 32 MiB of `{}` would be a tree of about a GiB). Past a cap the stream ends
/// with `.failed(code: "stream_too_large")` and the connection is closed, so a hostile server cannot make the
/// client's memory grow without bound.
public final class ResponseStream {
    /// The most data one event may carry: 32 MiB. afmd's largest event, `response.completed`, repeats the whole
    /// answer, which `[Responses] MaxOutputBytes` (default 8 MiB) bounds; an event is parsed as JSON in one piece,
    /// which can take tens of times its size, so the cap is no higher than that needs.
    public static let maximumEventBytes = 32 << 20
    /// The most bytes one stream may carry: 1 GiB. The Responses protocol sends about 50 bytes of stream per byte of
    /// answer (one `response.output_text.delta` event per token), 400 MiB for an 8 MiB answer.
    public static let maximumStreamBytes = 1 << 30
    /// The most bytes of an error answer's body (its JSON envelope is a few hundred): 1 MiB.
    public static let maximumErrorBodyBytes = 1 << 20

    private let exchange: HTTPExchange
    private var parser = SSEParser(maximumTotalBytes: ResponseStream.maximumStreamBytes, maximumEventBytes: ResponseStream.maximumEventBytes)
    private var errorBody: [UInt8] = []
    private var sawError = false
    /// Whether a terminal event (completed, incomplete, failed) was delivered or the stream was cancelled.
    public private(set) var isFinished = false

    init(exchange: HTTPExchange) {
        self.exchange = exchange
    }

    /// The socket to poll for readability.
    public var descriptor: FileDescriptor { exchange.descriptor }

    /// Stops the answer: closes the connection, which afmd turns into a cancelled generation.
    public func cancel() {
        isFinished = true
        exchange.close()
    }

    /// Consumes what has arrived, without waiting, and returns the events it completed.
    public func readEvents() -> [StreamEvent] {
        guard !isFinished else { return [] }
        let bytes: [UInt8]
        do {
            bytes = try exchange.readAvailable()
        } catch {
            return finish(.failed(code: "connection", message: "\(error)"))
        }
        if exchange.status != 200 {
            errorBody += bytes
            guard errorBody.count <= Self.maximumErrorBodyBytes else {
                return finish(
                    .failed(
                        code: "stream_too_large",
                        message: "the server answered HTTP \(exchange.status) with an error body larger than \(Self.maximumErrorBodyBytes) bytes"))
            }
            guard exchange.isComplete else { return [] }
            let value = try? JSONParser.parse(errorBody, limits: Self.eventLimits)
            let code = value?["error"]?["code"]?.stringValue ?? "http_\(exchange.status)"
            let message = value?["error"]?["message"]?.stringValue ?? "the server answered HTTP \(exchange.status)"
            return finish(.failed(code: code, message: message))
        }
        var events: [StreamEvent] = []
        for message in parser.feed(bytes) {
            for event in Self.events(for: message, sawError: &sawError) {
                events.append(event)
                switch event {
                case .completed, .incomplete, .failed:
                    isFinished = true
                    exchange.close()
                    return events
                default: break
                }
            }
        }
        if let overflow = parser.overflow {
            return events + finish(.failed(code: "stream_too_large", message: "the server sent \(overflow); afm stops reading there"))
        }
        if exchange.isComplete && !isFinished {
            events.append(.failed(code: "connection", message: "the stream ended before the answer finished"))
            isFinished = true
        }
        return events
    }

    private func finish(_ event: StreamEvent) -> [StreamEvent] {
        isFinished = true
        exchange.close()
        return [event]
    }

    /// How an event's JSON (and an error body) is parsed: the shared cap on values, the parser's default depth.
    static let eventLimits = JSONParser.Limits(maxValues: JSONParser.Limits.maximumDocumentValues)

    /// Maps one SSE message to client events (none for events the client ignores): a terminal response event
    /// gives its usage first, then the terminal event. An event of more values than the cap fails the stream.
    static func events(for message: SSEParser.Event, sawError: inout Bool) -> [StreamEvent] {
        let value: JSONValue
        do {
            value = try JSONParser.parse(message.data, limits: eventLimits)
        } catch {
            guard error.kind == .valueLimitExceeded else { return [] }
            return [
                .failed(
                    code: "stream_too_large",
                    message: "the server sent an event of more than \(JSONParser.Limits.maximumDocumentValues) JSON values; afm stops reading there")
            ]
        }
        let type = value["type"]?.stringValue ?? message.name
        guard let event = event(type: type, value: value, sawError: &sawError) else { return [] }
        switch event {
        case .completed, .incomplete, .failed:
            guard let usage = value["response"]?["usage"].flatMap(ResponseUsage.init(json:)) else { return [event] }
            return [.usage(usage), event]
        default:
            return [event]
        }
    }

    private static func event(type: String, value: JSONValue, sawError: inout Bool) -> StreamEvent? {
        switch type {
        case "response.created":
            return .started(model: value["response"]?["model"]?.stringValue ?? "")
        case "response.output_text.delta":
            return .textDelta(value["delta"]?.stringValue ?? "")
        case "response.output_item.done":
            return value["item"].map(StreamEvent.outputItem)
        case "response.completed":
            return .completed
        case "response.incomplete":
            return .incomplete(reason: value["response"]?["incomplete_details"]?["reason"]?.stringValue ?? "incomplete")
        case "error":
            sawError = true
            return .failed(code: value["code"]?.stringValue ?? "error", message: value["message"]?.stringValue ?? "the server failed")
        case "response.failed":
            if sawError { return nil }
            let error = value["response"]?["error"]
            return .failed(
                code: error?["code"]?.stringValue ?? "failed",
                message: error?["message"]?.stringValue ?? "the response failed"
            )
        default:
            return nil
        }
    }
}

// The stream is read and cancelled from the client's one thread.
@available(*, unavailable)
extension ResponseStream: Sendable {}
