// SPDX-License-Identifier: Apache-2.0
import AFMBackends
import AFMCore
import AFMJSON
import AFMLogging
import AFMSealing
import Dispatch
import Foundation
import Synchronization

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
    private let sealer: ReasoningSealer
    private let commonPrompt: Mutex<String>
    private let maxOutputBytes: Atomic<Int>
    /// Token counters of every request this service started, with the backends' remaining quotas.
    public let monitor: TokenMonitor

    /// - Parameters:
    ///   - commonPrompt: text prepended to the system text of every request (configuration `[Responses] CommonPrompt`).
    ///   - sealer: seals reasoning state; a new one (a new key) per daemon start, so blobs from an earlier
    ///     instance are refused.
    ///   - maxOutputBytes: the most output bytes one response may accumulate (configuration
    ///     `[Responses] MaxOutputBytes`); a generation that goes past it is cancelled and fails with
    ///     `output_limit_exceeded`.
    public init(
        registry: BackendRegistry, logger: Logger, commonPrompt: String = "", sealer: ReasoningSealer = ReasoningSealer(),
        maxOutputBytes: Int = ResponseBuilder.defaultMaximumOutputBytes
    ) {
        self.maxOutputBytes = Atomic(maxOutputBytes)
        self.registry = registry
        self.logger = logger
        self.sealer = sealer
        monitor = TokenMonitor(
            quotas: { TokenMonitor.quotas(registry.statuses()) },
            promptCaches: { TokenMonitor.promptCaches(registry.statuses()) })
        self.commonPrompt = Mutex(commonPrompt)
    }

    /// Replaces the common prompt. Requests already set up keep the prompt they snapshotted.
    public func setCommonPrompt(_ text: String) {
        commonPrompt.withLock { $0 = text }
    }

    /// Replaces the output limit (`[Responses] MaxOutputBytes`, on reload). Requests already started keep theirs.
    public func setMaxOutputBytes(_ bytes: Int) {
        maxOutputBytes.store(bytes, ordering: .relaxed)
    }

    /// The common prompt now in force.
    public var currentCommonPrompt: String { commonPrompt.withLock { $0 } }

    /// A request that passed validation and whose generation is running.
    public struct Started: Sendable {
        public let request: ResponsesRequest
        public let stream: GenerationStream
        public let builder: ResponseBuilder
        public let backendID: String
        /// Warnings for `x-afm-warning` headers (dropped hosted tools, unenforced schema keywords).
        public let warnings: [String]
        /// How many complete turns `truncation: "auto"` dropped (nil when none).
        public let truncatedTurns: Int?
        /// The input tokens counted before generation, and whether a backend tokenizer counted them.
        public let inputTokens: Int
    }

    /// A validated request holding a lease on its backend, not started yet. Pass it to ``start(_:)`` exactly once
    /// (which releases the lease when starting fails): a prepared request that is dropped keeps its lease.
    public struct Prepared: Sendable {
        public let request: ResponsesRequest
        let commonPrompt: String
        let lease: BackendLease

        /// Whether ``ResponsesService/start(_:)`` may block the calling thread: the backend runs in a runner, so
        /// `generate` (and a tokenizer count) wait for the runner's reply. In-process backends return at once.
        public var startMayBlock: Bool { lease.generation.hosting != .inProcess }
    }

    /// Validates the body and leases its model's backend.
    ///
    /// - Throws: `AFMError` for invalid requests and unknown or unavailable models; nothing is held then.
    public func prepare(body: [UInt8]) throws(AFMError) -> Prepared {
        let request = try ResponsesRequest(body: body)
        // Snapshot before any other setup: an edit made while this request runs affects later requests only.
        let prompt = currentCommonPrompt
        let lease = try registry.lease(model: request.model)
        return Prepared(request: request, commonPrompt: prompt, lease: lease)
    }

    /// Starts a prepared request's generation.
    ///
    /// - Throws: `AFMError` for capability and budget violations and backend refusals; the lease is released and
    ///   nothing has been generated when this throws.
    public func start(_ prepared: Prepared) throws(AFMError) -> Started {
        do {
            return try start(prepared.request, lease: prepared.lease, commonPrompt: prepared.commonPrompt)
        } catch {
            prepared.lease.release()
            throw error
        }
    }

    /// Validates the body and starts the generation (``prepare(body:)`` then ``start(_:)``).
    ///
    /// - Throws: `AFMError` for invalid requests, unknown or unavailable models, capability and budget
    ///   violations, and backend refusals; nothing has been generated when this throws.
    public func start(body: [UInt8]) throws(AFMError) -> Started {
        try start(prepare(body: body))
    }


    private func start(_ request: ResponsesRequest, lease: BackendLease, commonPrompt: String) throws(AFMError) -> Started {
        let model = lease.model
        try Self.checkCapabilities(request, model: model)
        let system = (commonPrompt.isEmpty ? [] : [commonPrompt]) + request.system
        let modelID = model.id
        let sealer = self.sealer
        let open: (String, Int) throws(AFMError) -> [UInt8]? = { blob, index throws(AFMError) in
            do throws(SealError) {
                return try sealer.open(blob, modelID: modelID)
            } catch {
                throw AFMError(
                    .invalidRequest, "The encrypted content of input[\(index)] could not be verified: \(error.message)",
                    param: "input[\(index)].encrypted_content", publicCode: "invalid_encrypted_content")
            }
        }

        // Budget: count the input the backend will see; drop the oldest complete turns when asked to.
        let budget = lease.model.maxOutputTokens
        let maxOutputTokens = min(request.maxOutputTokens ?? budget, budget)
        let responseID = ResponseID.make("resp")
        var items = request.items
        var dropped = 0
        var document: [UInt8]
        var inputTokens: Int
        while true {
            let input = try GenerationRequestDocument.inputItems(items, openReasoning: open)
            document = GenerationRequestDocument.encode(
                for: request, model: model.id, responseID: responseID, maxOutputTokens: maxOutputTokens, system: system, input: input)
            // The estimate overestimates on purpose: when even it fits, the backend's exact (and costlier) count
            // cannot exceed the budget, so the tokenizer is asked only for inputs near or over the limit.
            let estimate = InputEstimate.tokens(system: system, input: input)
            inputTokens = estimate <= model.maxInputTokens ? estimate : lease.countInputTokens(requestDocument: document) ?? estimate
            if inputTokens <= model.maxInputTokens { break }
            guard request.truncationAuto, let shorter = Truncation.droppingOldestTurn(items) else {
                throw AFMError(
                    .contextLengthExceeded,
                    "This model's maximum input is \(model.maxInputTokens) tokens, but the request has \(inputTokens) tokens\(dropped > 0 ? " even after dropping \(dropped) older turns" : ""). Shorten the input\(request.truncationAuto ? "" : " or send truncation: \"auto\"").",
                    param: "input", publicCode: "context_length_exceeded")
            }
            items = shorter
            dropped += 1
        }

        let stream = try lease.start(requestDocument: document)
        monitor.begin(id: responseID, model: model.id, backend: lease.generation.backendID, inputTokens: inputTokens)
        let builder = ResponseBuilder(
            responseID: responseID, request: request, model: model.id, maxOutputTokens: maxOutputTokens,
            estimatedInputTokens: inputTokens, createdAt: Self.now(), maximumOutputBytes: maxOutputBytes.load(ordering: .relaxed),
            seal: { state in sealer.seal(state, modelID: modelID) })
        return Started(
            request: request, stream: stream, builder: builder, backendID: lease.generation.backendID, warnings: request.warnings,
            truncatedTurns: dropped > 0 ? dropped : nil, inputTokens: inputTokens)
    }

    /// Refuses what the model cannot do, instead of silently emulating it.
    static func checkCapabilities(_ request: ResponsesRequest, model: BackendDescription.Model) throws(AFMError) {
        let capabilities = model.capabilities
        if request.imageCount > 0 && !capabilities.vision {
            throw AFMError(
                .unsupportedCapability, "The model '\(model.id)' does not accept images.", param: "input", publicCode: "unsupported_capability")
        }
        if !request.toolSet.tools.isEmpty && !capabilities.tools && request.toolSet.choice != .none {
            throw AFMError(
                .unsupportedCapability, "The model '\(model.id)' does not support tools.", param: "tools", publicCode: "unsupported_capability")
        }
        if let effort = request.reasoningEffort {
            guard capabilities.reasoning else {
                throw AFMError(
                    .unsupportedCapability, "The model '\(model.id)' does not reason; omit reasoning.effort.",
                    param: "reasoning.effort", publicCode: "unsupported_capability")
            }
            if effort == "none" && !capabilities.reasoningOptional {
                throw AFMError(
                    .unsupportedCapability, "The model '\(model.id)' cannot turn reasoning off (reasoning.effort: none).",
                    param: "reasoning.effort", publicCode: "unsupported_capability")
            }
            guard ["none", "low", "medium", "high"].contains(effort) else {
                throw AFMError(
                    .unsupportedCapability, "reasoning.effort '\(effort)' is not supported by '\(model.id)'; use low, medium or high.",
                    param: "reasoning.effort", publicCode: "unsupported_capability")
            }
        }
    }

    /// Runs a started generation to its end and returns the non-streaming answer: the encoded response object with
    /// 200, or the error envelope with its status when the generation failed.
    public func complete(_ started: Started) async -> (status: Int, body: [UInt8], error: AFMError?) {
        var builder = started.builder
        builder.streamsEvents = false
        let stream = started.stream
        let monitor = self.monitor
        // Nothing below calls into the backend or blocks: the answer can be built and sent on the backend thread
        // that delivers the last event, saving the hand-off to another thread.
        stream.resumeConsumerOnEmittingThread()
        // What is already buffered is taken without awaiting; a generation that ended there needs no cancellation
        // handler either.
        if Self.takeBuffered(stream, into: &builder) { return answer(builder) }
        var reporter = MonitorReporter(counts: builder.usageCounts)
        await withTaskCancellationHandler {
            for await event in stream {
                // This loop may run inside the backend's emit (the inline resumption above): the cancel that the
                // output limit asks for must not be called from there.
                _ = Self.consume(event, into: &builder, stream: stream, cancelOffThread: true)
                reporter.report(builder.usageCounts, id: builder.responseID, to: monitor)
            }
        } onCancel: {
            stream.cancel()
        }
        return answer(builder)
    }

    /// The non-streaming answer without waiting, when the generation has already ended (a backend that answered
    /// from inside `generate`: docs/backend-abi.md §5); nil when it has not, and then nothing was consumed.
    public func completeIfEnded(_ started: Started) -> (status: Int, body: [UInt8], error: AFMError?)? {
        guard started.stream.hasEnded else { return nil }
        var builder = started.builder
        builder.streamsEvents = false
        guard Self.takeBuffered(started.stream, into: &builder) else { return nil }
        return answer(builder)
    }

    /// Consumes the buffered events; returns whether the terminal one was among them.
    private static func takeBuffered(_ stream: GenerationStream, into builder: inout ResponseBuilder) -> Bool {
        let now = Self.now()
        while let buffered = stream.nextBuffered() {
            guard let event = buffered else { return true }
            _ = consume(event, into: &builder, stream: stream, now: now)
            if event.isTerminal { return true }
        }
        return false
    }

    /// Books the finished request and encodes its answer: the response object with 200, or the error envelope.
    private func answer(_ builder: ResponseBuilder) -> (status: Int, body: [UInt8], error: AFMError?) {
        finish(builder)
        if case .failed(let error)? = builder.outcome {
            return (error.httpStatus, error.envelope.encoded(), error)
        }
        var body: [UInt8] = []
        builder.encodeResponseObject(into: &body)
        return (200, body, nil)
    }

    /// Runs a started generation as Server-Sent Events, handing each chunk of bytes to `write`.
    /// When `write` throws (client gone) the generation is cancelled; its remaining events are still read so
    /// the usage the backend reports for the cancelled generation is counted.
    public func stream(_ started: Started, write: @Sendable ([UInt8]) async throws -> Void) async -> ResponseBuilder.Outcome? {
        var builder = started.builder
        let stream = started.stream
        let monitor = self.monitor
        return await withTaskCancellationHandler {
            var clientGone = false
            do {
                try await write(Self.encode(builder.start()))
            } catch {
                clientGone = true
                stream.cancel()
            }
            var reporter = MonitorReporter(counts: builder.usageCounts)
            for await event in stream {
                let events = Self.consume(event, into: &builder, stream: stream)
                reporter.report(builder.usageCounts, id: builder.responseID, to: monitor)
                guard !clientGone, !events.isEmpty else { continue }
                do {
                    try await write(Self.encode(events))
                } catch {
                    clientGone = true
                    stream.cancel()
                }
            }
            finish(builder)
            return clientGone && builder.outcome != .completed ? nil : builder.outcome
        } onCancel: {
            stream.cancel()
        }
    }

    /// Ends a started request whose client left before its answer could begin (the stream's head was never sent):
    /// cancels the generation and reads it to its end, so its token-monitor entry is finished and its usage
    /// counted, and nothing stays buffered for a reader that will never come.
    public func abandon(_ started: Started) async {
        var builder = started.builder
        let stream = started.stream
        stream.cancel()
        // The stream always ends: with the backend's terminal event, or the watchdog's after the cancel grace.
        for await event in stream { _ = builder.consume(event, now: Self.now()) }
        finish(builder)
    }

    /// Hands one event to the builder. When the builder ended the response before the backend did (its output
    /// went past `MaxOutputBytes`), the generation is cancelled; its remaining events are still read (and ignored)
    /// so the stream ends normally (their usage still counts).
    ///
    /// With `cancelOffThread` the cancel is delivered from a dispatch queue, not the calling thread: a consumer
    /// resumed inline on the backend's emitting thread (`resumeConsumerOnEmittingThread`) runs inside the
    /// backend's `emit`, and calling the backend's `cancel` from there breaks the ABI (a backend that holds a lock
    /// across `emit` would deadlock).
    private static func consume(
        _ event: BackendEvent, into builder: inout ResponseBuilder, stream: GenerationStream, now: Int = ResponsesService.now(),
        cancelOffThread: Bool = false
    ) -> [JSONValue] {
        let wasExceeded = builder.exceededOutputLimit
        let events = builder.consume(event, now: now)
        if builder.exceededOutputLimit && !wasExceeded && !event.isTerminal {
            if cancelOffThread {
                DispatchQueue.global(qos: .userInitiated).async { stream.cancel() }
            } else {
                stream.cancel()
            }
        }
        return events
    }

    private func finish(_ builder: ResponseBuilder) {
        monitor.finish(id: builder.responseID, outcome: builder.outcomeName, counts: builder.usageCounts)
        logFailure(builder)
    }

    private func logFailure(_ builder: ResponseBuilder) {
        if builder.exceededOutputLimit {
            logger.warning(
                "a generation went past the output limit and was stopped",
                ["id": builder.responseID, "model": builder.model, "max_output_bytes": String(builder.maximumOutputBytes)])
        }
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

    static func now() -> Int { Int(Date().timeIntervalSince1970) }
}
