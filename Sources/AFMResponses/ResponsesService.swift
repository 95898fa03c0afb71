// SPDX-License-Identifier: Apache-2.0
import AFMBackends
import AFMCore
import AFMJSON
import AFMLogging
import Foundation

/// Serves `POST /v1/responses` without knowing about HTTP: validate → lease → generate → build the answer.
///
/// ```
///  body ─► ResponsesRequest ─► registry.lease(model) ─► generation request document ─► backend.generate
///                                                                         │ events
///  JSON body or SSE bytes ◄─ ResponseBuilder ◄────────────────────────────┘
/// ```
/// The caller's task being cancelled (client gone) cancels the generation.
public final class ResponsesService: Sendable {
    private let registry: BackendRegistry
    private let logger: Logger

    public init(registry: BackendRegistry, logger: Logger) {
        self.registry = registry
        self.logger = logger
    }

    /// A request that passed validation and whose generation is running.
    public struct Started: Sendable {
        public let request: ResponsesRequest
        public let stream: GenerationStream
        public let builder: ResponseBuilder
        public let backendID: String
    }

    /// Validates the body and starts the generation.
    ///
    /// - Throws: `AFMError` for invalid requests, unknown or unavailable models, and backend refusals; nothing has
    ///   been generated (and no tokens are counted) when this throws.
    public func start(body: [UInt8]) throws(AFMError) -> Started {
        let request = try ResponsesRequest(body: body)
        let lease = try registry.lease(model: request.model)
        let budget = lease.model.maxOutputTokens
        // The default cap is the rest of the budget, never a small constant (reference §0.4: clients such as
        // Codex never send max_output_tokens). A larger request is clamped to the budget, and echoed clamped.
        let maxOutputTokens = min(request.maxOutputTokens ?? budget, budget)
        let responseID = ResponseID.make("resp")
        let document = GenerationRequestDocument.make(for: request, responseID: responseID, maxOutputTokens: maxOutputTokens).encoded()
        let stream = try lease.start(requestDocument: document)
        let builder = ResponseBuilder(
            responseID: responseID, request: request, model: lease.model.id, maxOutputTokens: maxOutputTokens,
            estimatedInputTokens: Self.estimateInputTokens(request), createdAt: Self.now())
        return Started(request: request, stream: stream, builder: builder, backendID: lease.generation.backendID)
    }

    /// Runs a started generation to its end and returns the non-streaming answer: the response object with 200,
    /// or the error envelope with its status when the generation failed.
    public func complete(_ started: Started) async -> (status: Int, body: JSONValue, error: AFMError?) {
        var builder = started.builder
        let stream = started.stream
        await withTaskCancellationHandler {
            for await event in stream {
                _ = builder.consume(event, now: Self.now())
            }
        } onCancel: {
            stream.cancel()
        }
        logFailure(builder)
        if case .failed(let error)? = builder.outcome {
            return (error.httpStatus, error.envelope, error)
        }
        return (200, builder.responseObject(), nil)
    }

    /// Runs a started generation as Server-Sent Events, handing each chunk of bytes to `write`.
    /// When `write` throws (client gone) the generation is cancelled.
    public func stream(_ started: Started, write: @Sendable ([UInt8]) async throws -> Void) async -> ResponseBuilder.Outcome? {
        var builder = started.builder
        let stream = started.stream
        return await withTaskCancellationHandler {
            do {
                try await write(Self.encode(builder.start()))
                for await event in stream {
                    let events = builder.consume(event, now: Self.now())
                    if !events.isEmpty { try await write(Self.encode(events)) }
                }
            } catch {
                stream.cancel()
            }
            logFailure(builder)
            return builder.outcome
        } onCancel: {
            stream.cancel()
        }
    }

    private func logFailure(_ builder: ResponseBuilder) {
        guard let failure = builder.backendFailure else { return }
        logger.warning("backend failed a generation", ["id": builder.responseID, "code": failure.code.rawValue, "backend_message": failure.message])
    }

    /// Encodes stream events as SSE frames: `event: <type>\ndata: <json>\n\n`. No `[DONE]` is ever sent.
    public static func encode(_ events: [JSONValue]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(events.count * 256)
        for event in events {
            bytes += Array("event: ".utf8)
            bytes += Array((event["type"]?.stringValue ?? "message").utf8)
            bytes += Array("\ndata: ".utf8)
            event.encode(into: &bytes)
            bytes += [10, 10]
        }
        return bytes
    }

    /// A conservative input-token estimate when the backend has no tokenizer: one token per 4 UTF-8 bytes, rounded up.
    static func estimateInputTokens(_ request: ResponsesRequest) -> Int {
        var bytes = request.system.reduce(0) { $0 + $1.utf8.count }
        for item in request.items {
            switch item {
            case .message(_, let parts): bytes += parts.reduce(0) { $0 + ($1["text"]?.stringValue?.utf8.count ?? 0) }
            case .functionCall(_, let name, let arguments): bytes += name.utf8.count + arguments.utf8.count
            case .functionCallOutput(_, let output): bytes += output.utf8.count
            }
        }
        return (bytes + 3) / 4
    }

    static func now() -> Int { Int(Date().timeIntervalSince1970) }
}
