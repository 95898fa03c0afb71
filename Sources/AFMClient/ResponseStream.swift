// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMSystem

/// A streaming `POST /v1/responses` in progress: poll ``descriptor``, then call ``readEvents()``.
///
/// ```
/// start ─► (poll readable) ─► readEvents() ─► [.started, .textDelta…] … ─► terminal event ─► isFinished
///       └► cancel() at any time: closes the socket; afmd cancels the generation
/// ```
public final class ResponseStream {
    private let exchange: HTTPExchange
    private var parser = SSEParser()
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
            guard exchange.isComplete else { return [] }
            let value = try? JSONParser.parse(errorBody)
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

    /// Maps one SSE message to client events (none for events the client ignores): a terminal response event
    /// gives its usage first, then the terminal event.
    static func events(for message: SSEParser.Message, sawError: inout Bool) -> [StreamEvent] {
        guard let value = try? JSONParser.parse(message.data) else { return [] }
        let type = value["type"]?.stringValue ?? message.event
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
