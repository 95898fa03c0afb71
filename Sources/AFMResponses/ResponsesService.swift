// SPDX-License-Identifier: Apache-2.0
import AFMBackends
import AFMCore
import AFMJSON
import AFMLogging
import AFMSealing
import Dispatch
import Foundation
import Synchronization

/// The one generation pipeline, for every API dialect, without knowing about HTTP: validate → lease → generate →
/// build the answer.
///
/// ```
///  body ─► dialect decoder ─► PipelineRequest ─► registry.lease(model) ─► generation request document ─► generate
///                                                                                      │ events
///  JSON body or SSE bytes ◄─ dialect's AnswerEncoder ◄─ ResponseBuilder ◄──────────────┘
/// ```
/// A dialect only decodes its body into a ``PipelineRequest`` and encodes the builder's events or steps
/// (``AnswerEncoder``); budgets, truncation, capabilities, the common prompt, stop sequences, output caps and the
/// token monitor are here. The caller's task being cancelled (client gone) cancels the generation.
public final class ResponsesService: Sendable {
    private let registry: BackendRegistry
    private let logger: Logger
    private let sealer: ReasoningSealer
    private let commonPrompt: Mutex<String>
    private let maxOutputBytes: Atomic<Int>
    /// Token counters of every request this service started, with the backends' remaining quotas.
    public let monitor: TokenMonitor
    /// Latency histograms and counters of every request, for `GET /metrics` and the access log.
    public let metrics = ServingMetrics()
    /// Per-backend `MaxConcurrent`/`MaxQueued`.
    public let admission = AdmissionControl()

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
        public let stream: GenerationStream
        /// The answer so far; ``ResponsesService/completeIfEnded(_:encoder:)`` advances it in place.
        public internal(set) var builder: ResponseBuilder
        public let backendID: String
        /// How many complete turns `truncation: "auto"` dropped (nil when none).
        public let truncatedTurns: Int?
        /// The input tokens counted before generation, and whether a backend tokenizer counted them.
        public let inputTokens: Int

        /// The request being answered (the builder's: one copy, not two).
        public var request: PipelineRequest { builder.request }
        /// Warnings for `x-afm-warning` headers (dropped hosted tools, unenforced schema keywords).
        public var warnings: [String] { builder.request.warnings }
    }

    /// A validated request holding a lease on its backend, not started yet. Pass it to ``start(_:)`` exactly once
    /// (which releases the lease when starting fails): a prepared request that is dropped keeps its lease.
    public struct Prepared: Sendable {
        public let request: PipelineRequest
        let echo: ResponseBuilder.Echo
        let commonPrompt: String
        let lease: BackendLease
        /// Who sent it, when; the caller adds the admission wait (`queueSeconds`) before ``ResponsesService/start(_:)``.
        public var context: RequestContext
        /// The backend that will serve it (admission is per backend).
        public var backendID: String { lease.generation.backendID }

        /// Whether ``ResponsesService/start(_:)`` may block the calling thread: the backend runs in a runner, so
        /// `generate` (and a tokenizer count) wait for the runner's reply. In-process backends return at once.
        public var startMayBlock: Bool { lease.generation.hosting != .inProcess }
    }

    /// Validates the body and leases its model's backend.
    ///
    /// - Throws: `AFMError` for invalid requests and unknown or unavailable models; nothing is held then.
    public func prepare(body: [UInt8], context: RequestContext = RequestContext()) throws(AFMError) -> Prepared {
        let request = try ResponsesRequest(body: body)
        return try prepare(request.pipeline, echo: request.echo, context: context)
    }

    /// Leases the model's backend for a request a dialect decoded.
    ///
    /// The request and echo are taken (`consuming`): a decoded request moves into ``Prepared`` instead of being
    /// copied, each copy retaining and releasing every reference in it (docs/PERFORMANCE.md, session 9).
    ///
    /// - Parameter echo: what a Responses response object echoes (nothing for the other dialects).
    /// - Throws: `AFMError` for unknown or unavailable models; nothing is held then.
    public func prepare(
        _ request: consuming PipelineRequest, echo: consuming ResponseBuilder.Echo = .init(), context: RequestContext = RequestContext()
    ) throws(AFMError) -> Prepared {
        // Snapshot before any other setup: an edit made while this request runs affects later requests only.
        let prompt = currentCommonPrompt
        let lease = try registry.lease(model: request.model)
        var context = context
        context.dialect = request.dialect.rawValue
        return Prepared(request: request, echo: echo, commonPrompt: prompt, lease: lease, context: context)
    }

    /// Starts a prepared request's generation.
    ///
    /// - Throws: `AFMError` for capability and budget violations and backend refusals; the lease is released and
    ///   nothing has been generated when this throws.
    public func start(_ prepared: Prepared) throws(AFMError) -> Started {
        do {
            return try start(
                prepared.request, echo: prepared.echo, lease: prepared.lease, commonPrompt: prepared.commonPrompt, context: prepared.context)
        } catch {
            prepared.lease.release()
            throw error
        }
    }

    /// Gives back a prepared request's lease without starting it (admission refused it, or its client left while
    /// it waited for a slot).
    public func release(_ prepared: Prepared) {
        prepared.lease.release()
    }

    /// Validates the body and starts the generation (``prepare(body:)`` then ``start(_:)``).
    ///
    /// - Throws: `AFMError` for invalid requests, unknown or unavailable models, capability and budget
    ///   violations, and backend refusals; nothing has been generated when this throws.
    public func start(body: [UInt8]) throws(AFMError) -> Started {
        try start(prepare(body: body))
    }


    /// The generation request document of a request, and the input tokens it counts.
    private struct Fitted {
        var document: [UInt8]
        var inputTokens: Int
        var droppedTurns: Int
    }

    /// Builds the document and checks the input budget: counts the input the backend will see, and drops the
    /// oldest complete turns when the request asks for truncation.
    ///
    /// Every item is converted and priced once, and the turns' running totals give the fewest dropped turns whose
    /// estimate fits in one pass. The backend's tokenizer (costly: a runner tokenizes the whole document) is asked
    /// for the whole input when the estimate exceeds the budget, then searches the fewest dropped turns its count
    /// fits: first the cut its ratio to the estimate predicts, then that cut's neighbour, then bisection up to the
    /// estimate's cut (about log2(turns) calls at worst, each encoding one document). Dropping turns one at a time
    /// used to rebuild, re-encode and re-count the whole input per dropped turn: quadratic, minutes for 20,000
    /// turns; jumping from a failed prediction straight to the estimate's cut dropped turns that fit.
    ///
    /// - Parameter exact: count with the backend's tokenizer even when the estimate fits (count_tokens).
    private func fit(
        _ request: PipelineRequest, lease: BackendLease, system: [String], responseID: String, maxOutputTokens: Int, exact: Bool = false
    ) throws(AFMError) -> Fitted {
        let model = lease.model
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
        let items = request.items
        // The document's input items, each with the item it came from (reasoning without state adds none); the
        // sources are only needed to drop turns. The common request (its estimate fits) allocates neither the
        // sources nor the running totals below (docs/PERFORMANCE.md, session 9).
        var inputItems: [JSONValue] = []
        var source: [Int] = []
        inputItems.reserveCapacity(items.count)
        if request.truncationAuto { source.reserveCapacity(items.count) }
        var whole = InputEstimate.cost(system: system)
        for (index, item) in items.enumerated() {
            guard let value = try GenerationRequestDocument.inputItem(item, index: index, openReasoning: open) else { continue }
            whole = whole + InputEstimate.cost(of: value)
            inputItems.append(value)
            if request.truncationAuto { source.append(index) }
        }
        let input = inputItems
        let limit = model.maxInputTokens
        let encode = { (first: Int) -> [UInt8] in
            GenerationRequestDocument.encode(
                for: request, model: model.id, responseID: responseID, maxOutputTokens: maxOutputTokens, system: system,
                input: first == 0 ? input : Array(input[first...]))
        }
        // The estimate overestimates on purpose: when even it fits, the backend's exact (and costlier) count
        // cannot exceed the budget, so the tokenizer is asked only for inputs near or over the limit.
        let estimate = whole.estimate
        if estimate <= limit && !exact { return Fitted(document: encode(0), inputTokens: estimate, droppedTurns: 0) }
        let wholeDocument = encode(0)
        let counted = try lease.countInputTokens(requestDocument: wholeDocument)
        let inputTokens = counted ?? estimate
        if inputTokens <= limit || exact { return Fitted(document: wholeDocument, inputTokens: inputTokens, droppedTurns: 0) }

        let tooLong = { (tokens: Int, dropped: Int) -> AFMError in
            AFMError(
                .contextLengthExceeded,
                "This model's maximum input is \(limit) tokens, but the request has \(tokens) tokens\(dropped > 0 ? " even after dropping \(dropped) older turns" : ""). Shorten the input\(request.truncationAuto ? "" : " or send truncation: \"auto\"").",
                param: request.dialect.conversationField, publicCode: "context_length_exceeded")
        }
        guard request.truncationAuto else { throw tooLong(inputTokens, 0) }
        // remaining[i]: the estimate's cost of the system text and input[i...].
        var remaining = [InputEstimate.Cost](repeating: InputEstimate.cost(system: system), count: input.count + 1)
        for index in input.indices.reversed() { remaining[index] = remaining[index + 1] + InputEstimate.cost(of: input[index]) }

        // Turn k (k >= 1 turns dropped) keeps input[starts[k]...]; user messages always have an input item.
        let userItems = Truncation.turnStarts(items)
        var starts: [Int] = []
        starts.reserveCapacity(userItems.count)
        var cursor = 0
        for item in userItems {
            while source[cursor] != item { cursor += 1 }
            starts.append(cursor)
        }
        guard starts.count >= 2 else { throw tooLong(inputTokens, 0) }
        let last = starts.count - 1
        // The fewest dropped turns whose estimate fits (its exact count then fits too), found in one pass.
        let byEstimate = (1...last).first { remaining[starts[$0]].estimate <= limit }
        // Without a tokenizer the estimate is the count: its cut is the answer.
        guard let counted else {
            guard let byEstimate else { throw tooLong(remaining[starts[last]].estimate, last) }
            return Fitted(document: encode(starts[byEstimate]), inputTokens: remaining[starts[byEstimate]].estimate, droppedTurns: byEstimate)
        }
        // The count falls as turns drop, so the fewest dropped turns that fit lie in (fails, fits]: `fails` is known
        // not to fit (no turn dropped: counted above), `fits` is known to fit (the estimate's cut; last + 1 when
        // none is known). The tokenizer usually counts less than the estimate, so the first probe is the cut the
        // whole input's ratio predicts; then its neighbour (the prediction is most often off by one), then
        // bisection: about log2(turns) tokenizer calls at worst, each one document encoded and counted once.
        let guess = Truncation.predictedCut(
            estimates: { remaining[starts[$0]].estimate }, last: last, counted: counted, estimate: estimate, limit: limit)
        var fits = byEstimate ?? last + 1
        // A prediction at or past the estimate's cut (the tokenizer counts more than the estimate) trusts that cut:
        // fewer dropped turns are not worth log2(turns) calls that would almost surely not fit.
        var fails = guess < fits ? 0 : fits - 1
        var best: Fitted?
        var lastCount = inputTokens
        var lastDropped = 0
        var probe = guess
        var probes = 0
        while fits - fails > 1 {
            if !(fails < probe && probe < fits) { probe = fails + (fits - fails) / 2 }
            // A request whose client left (its task cancelled) stops here instead of tokenizing again.
            if Task.isCancelled { throw AFMError(.cancelled, "The request was cancelled while its input was being fitted.") }
            let document = encode(starts[probe])
            let tokens = try lease.countInputTokens(requestDocument: document) ?? remaining[starts[probe]].estimate
            probes += 1
            if tokens <= limit {
                (fits, best) = (probe, Fitted(document: document, inputTokens: tokens, droppedTurns: probe))
                probe = probes == 1 ? probe - 1 : 0
            } else {
                (fails, lastCount, lastDropped) = (probe, tokens, probe)
                probe = probes == 1 ? probe + 1 : 0
            }
        }
        if let best, best.droppedTurns == fits { return best }
        guard fits <= last else { throw tooLong(lastCount, lastDropped) }
        return Fitted(document: encode(starts[fits]), inputTokens: remaining[starts[fits]].estimate, droppedTurns: fits)
    }

    private func start(
        _ request: consuming PipelineRequest, echo: consuming ResponseBuilder.Echo, lease: BackendLease, commonPrompt: String,
        context: RequestContext
    ) throws(AFMError) -> Started {
        let model = lease.model
        try Self.checkCapabilities(request, model: model)
        let system = (commonPrompt.isEmpty ? [] : [commonPrompt]) + request.system
        let modelID = model.id
        let sealer = self.sealer
        let budget = model.maxOutputTokens
        let maxOutputTokens = min(request.maxOutputTokens ?? budget, budget)
        let responseID = ResponseID.make(request.dialect.idPrefix, separator: request.dialect.idSeparator)
        let fitted = try fit(request, lease: lease, system: system, responseID: responseID, maxOutputTokens: maxOutputTokens)

        let stream: GenerationStream
        do {
            stream = try lease.start(requestDocument: fitted.document)
        } catch {
            throw request.toolSet.locating(request.outputFormat.locating(error))
        }
        monitor.begin(
            id: responseID, model: model.id, backend: lease.generation.backendID, dialect: request.dialect, inputTokens: fitted.inputTokens,
            key: context.keyName)
        var builder = ResponseBuilder(
            responseID: responseID, request: request, echo: echo, model: model.id, maxOutputTokens: maxOutputTokens,
            estimatedInputTokens: fitted.inputTokens, createdAt: Self.now(), maximumOutputBytes: maxOutputBytes.load(ordering: .relaxed),
            seal: { state in sealer.seal(state, modelID: modelID) })
        builder.context = context
        return Started(
            stream: stream, builder: builder, backendID: lease.generation.backendID,
            truncatedTurns: fitted.droppedTurns > 0 ? fitted.droppedTurns : nil, inputTokens: fitted.inputTokens)
    }

    /// Counts a prepared request's input tokens as the backend would see them, without generating (Anthropic's
    /// `count_tokens`): the backend's tokenizer when it has one, else the host's estimate. Releases the lease.
    ///
    /// - Throws: `AFMError` for capability violations; the lease is released either way.
    public func countInputTokens(_ prepared: Prepared) throws(AFMError) -> Int {
        defer { prepared.lease.release() }
        let request = prepared.request
        let model = prepared.lease.model
        try Self.checkCapabilities(request, model: model)
        let system = (prepared.commonPrompt.isEmpty ? [] : [prepared.commonPrompt]) + request.system
        return try fit(
            request, lease: prepared.lease, system: system, responseID: ResponseID.make("count"), maxOutputTokens: model.maxOutputTokens,
            exact: true
        ).inputTokens
    }

    /// Refuses what the model cannot do, instead of silently emulating it.
    static func checkCapabilities(_ request: PipelineRequest, model: BackendDescription.Model) throws(AFMError) {
        let capabilities = model.capabilities
        if request.imageCount > 0 && !capabilities.vision {
            throw AFMError(
                .unsupportedCapability, "The model '\(model.id)' does not accept images.", param: request.dialect.conversationField, publicCode: "unsupported_capability")
        }
        if !request.toolSet.tools.isEmpty && !capabilities.tools && request.toolSet.choice != .none {
            throw AFMError(
                .unsupportedCapability, "The model '\(model.id)' does not support tools.", param: "tools", publicCode: "unsupported_capability")
        }
        if request.outputFormat.isStructured && !capabilities.structuredOutput {
            throw AFMError(
                .unsupportedCapability,
                "The model '\(model.id)' does not support structured output (\(request.outputFormat.param) "
                    + "json_schema or json_object); its backend cannot constrain its answer to JSON.",
                param: request.outputFormat.param, publicCode: "unsupported_capability")
        }
        if let effort = request.reasoningEffort {
            let field = request.dialect.reasoningField
            guard capabilities.reasoning else {
                throw AFMError(
                    .unsupportedCapability, "The model '\(model.id)' does not reason; omit \(field).",
                    param: field, publicCode: "unsupported_capability")
            }
            if effort == "none" && !capabilities.reasoningOptional {
                throw AFMError(
                    .unsupportedCapability, "The model '\(model.id)' cannot turn reasoning off (\(field): none).",
                    param: field, publicCode: "unsupported_capability")
            }
            guard ["none", "low", "medium", "high"].contains(effort) else {
                throw AFMError(
                    .unsupportedCapability, "\(field) '\(effort)' is not supported by '\(model.id)'; use low, medium or high.",
                    param: field, publicCode: "unsupported_capability")
            }
        }
    }

    /// Runs a started generation to its end and returns the non-streaming answer: the encoded response object with
    /// 200, or the error envelope with its status when the generation failed.
    public func complete(_ started: Started) async -> (status: Int, body: [UInt8], error: AFMError?) {
        await complete(started, encoder: ResponsesEncoder())
    }

    /// Runs a started generation to its end and returns the non-streaming answer in `encoder`'s dialect: its body
    /// with 200, or the dialect's error envelope with its status when the generation failed.
    public func complete(_ started: Started, encoder: some AnswerEncoder) async -> (status: Int, body: [UInt8], error: AFMError?) {
        var builder = started.builder
        builder.streamsEvents = false
        let stream = started.stream
        let monitor = self.monitor
        // Nothing below calls into the backend or blocks: the answer can be built and sent on the backend thread
        // that delivers the last event, saving the hand-off to another thread.
        stream.resumeConsumerOnEmittingThread()
        // What is already buffered is taken without awaiting; a generation that ended there needs no cancellation
        // handler either.
        if Self.takeBuffered(stream, into: &builder) { return answer(builder, encoder: encoder) }
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
        return answer(builder, encoder: encoder)
    }

    /// The non-streaming answer in `encoder`'s dialect without waiting, when the generation has already ended (a
    /// backend that answered from inside `generate`: docs/backend-abi.md §5); nil when it has not, and then nothing
    /// was consumed. The events are taken into `started`'s builder in place: a copy of the builder (the request, its
    /// echo and the output so far) per answer was a measurable part of a small request's CPU (docs/PERFORMANCE.md).
    /// Only for a non-streaming request.
    public func completeIfEnded(_ started: inout Started, encoder: some AnswerEncoder) -> (status: Int, body: [UInt8], error: AFMError?)? {
        guard started.stream.hasEnded else { return nil }
        let stream = started.stream
        started.builder.streamsEvents = false
        guard Self.takeBuffered(stream, into: &started.builder) else { return nil }
        return answer(started.builder, encoder: encoder)
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

    /// Books the finished request and encodes its answer: the dialect's body with 200, or its error envelope.
    private func answer(_ builder: ResponseBuilder, encoder: some AnswerEncoder) -> (status: Int, body: [UInt8], error: AFMError?) {
        finish(builder)
        if case .failed(let error)? = builder.outcome {
            return (error.httpStatus, encoder.dialect.errorBody(error), error)
        }
        return (200, encoder.body(builder), nil)
    }

    /// Runs a started generation as Server-Sent Events, handing each chunk of bytes to `write`.
    /// When `write` throws (client gone) the generation is cancelled; its remaining events are still read so
    /// the usage the backend reports for the cancelled generation is counted.
    public func stream(_ started: Started, write: @Sendable ([UInt8]) async throws -> Void) async -> ResponseBuilder.Outcome? {
        await stream(started, encoder: ResponsesEncoder(), write: write)
    }

    /// Runs a started generation as a stream in `encoder`'s dialect (see ``stream(_:write:)``).
    ///
    /// `deadlinePassed` tells a cancellation by the server's processing deadline from a client that left: the
    /// generation is cancelled either way, but after the deadline the client is still there, and the stream ends
    /// with the dialect's failure event (code `timeout`) instead of just stopping.
    public func stream<Encoder: AnswerEncoder>(
        _ started: Started, encoder: Encoder, deadlinePassed: @escaping @Sendable () -> Bool = { false },
        write: @Sendable ([UInt8]) async throws -> Void
    ) async -> ResponseBuilder.Outcome? {
        var builder = started.builder
        builder.streamsEvents = Encoder.readsResponsesEvents
        builder.recordsSteps = !Encoder.readsResponsesEvents
        let stream = started.stream
        let monitor = self.monitor
        return await withTaskCancellationHandler {
            var encoder = encoder
            var clientGone = false
            do {
                try await write(encoder.streamStart(&builder))
            } catch {
                clientGone = true
                stream.cancel()
            }
            var reporter = MonitorReporter(counts: builder.usageCounts)
            for await event in stream {
                let events =
                    event.isCancellation && deadlinePassed()
                    ? builder.failForProcessingDeadline(now: Self.now())
                    : Self.consume(event, into: &builder, stream: stream)
                let steps = builder.recordsSteps ? builder.takeSteps() : []
                reporter.report(builder.usageCounts, id: builder.responseID, to: monitor)
                guard !clientGone, !events.isEmpty || !steps.isEmpty else { continue }
                let bytes = encoder.streamBytes(events: events, steps: steps, builder: builder)
                guard !bytes.isEmpty else { continue }
                do {
                    try await write(bytes)
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
    /// went past `MaxOutputBytes`, or the model wrote a stop sequence), the generation is cancelled; its remaining events are still read (and ignored)
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
        let wasEnded = builder.endedEarly
        let events = builder.consume(event, now: now)
        if builder.endedEarly && !wasEnded && !event.isTerminal {
            if cancelOffThread {
                DispatchQueue.global(qos: .userInitiated).async { stream.cancel() }
            } else {
                stream.cancel()
            }
        }
        return events
    }

    private func finish(_ builder: ResponseBuilder) {
        let counts = builder.usageCounts
        let backend = monitor.finish(id: builder.responseID, outcome: builder.outcomeName, counts: counts)
        metrics.record(Self.finished(builder, backend: backend ?? "-", counts: counts))
        logFailure(builder)
    }

    /// The metrics' view of a finished request: status as the client saw it, vLLM's finished reasons.
    static func finished(_ builder: ResponseBuilder, backend: String, counts: ResponseBuilder.UsageCounts) -> ServingMetrics.Finished {
        let end = ContinuousClock.now
        let context = builder.context
        let status: Int
        let reason: String
        switch builder.outcome {
        case .completed?:
            status = 200
            reason = "stop"
        case .incomplete(let why)?:
            status = 200
            reason = why == "max_output_tokens" ? "length" : why
        case nil:
            status = 499  // the client left (nginx's "client closed request")
            reason = "abort"
        case .failed(let error)? where error.code == .cancelled:
            status = 499
            reason = "abort"
        case .failed(let error)?:
            // A stream had sent its 200 head before it failed; a complete answer carries the error's status.
            status = builder.streamsEvents ? 200 : error.httpStatus
            reason = "error"
        }
        return ServingMetrics.Finished(
            model: builder.model, backend: backend, dialect: context.dialect, keyName: context.keyName, status: status,
            finishedReason: reason, promptTokens: counts.input, generationTokens: counts.output, cachedTokens: counts.cached,
            timeToFirstToken: builder.firstOutputAt.map { RequestContext.seconds($0 - context.receivedAt) },
            duration: RequestContext.seconds(end - context.receivedAt), queueSeconds: context.queueSeconds)
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
