// SPDX-License-Identifier: Apache-2.0
import AFMBackends
import AFMCore
import AFMJSON

/// Turns a generation's backend events into Responses API stream events and the final response object.
///
/// The event order is `reference/responses-api.md` §1.7–1.10: `response.created` and `response.in_progress`
/// first; a reasoning item (if the backend reasons) before the others; each item is `output_item.added` →
/// its own events → `output_item.done`:
///
/// | item              | events between added and done                                                         |
/// |-------------------|----------------------------------------------------------------------------------------|
/// | reasoning         | `content_part.added` → `reasoning_text.delta`* → `reasoning_text.done` → `content_part.done` (only with visible text) |
/// | message           | `content_part.added` → `output_text.delta`* → `output_text.done` → `content_part.done` |
/// | function_call     | `function_call_arguments.delta`* → `function_call_arguments.done`                      |
/// | custom_tool_call  | `custom_tool_call_input.delta` → `custom_tool_call_input.done`                         |
///
/// then exactly one of `response.completed`, `response.incomplete` or (after an `error` event)
/// `response.failed`. Every event carries an increasing `sequence_number`. The same state produces the
/// non-streaming JSON body, so both paths always agree.
///
/// A tool call's closing events (`…arguments.done`, `output_item.done`) wait for the backend's next event after
/// `TOOL_CALL_END` (usage aside): backends end every open call when they stop, so a call cut by
/// `max_output_tokens` arrives as `TOOL_CALL_END` then `DONE`/`length`, and only the event after the end tells a
/// finished call (`completed`) from a cut one (`incomplete`, as the OpenAI Responses API marks it).
public struct ResponseBuilder: Sendable {
    /// The terminal state of a response.
    public enum Outcome: Sendable, Hashable {
        case completed
        case incomplete(reason: String)
        case failed(AFMError)
    }

    struct OutputItem: Sendable {
        enum Kind: Sendable { case message, functionCall, customToolCall, reasoning }
        var kind: Kind
        var id: String
        var text = ""  // message text, call arguments, reasoning text
        var callID = ""
        var name = ""
        var namespace: String?
        var toolIndex = -1
        var state: [UInt8] = []  // reasoning state, sealed when the item closes
        var sealed: String?
        var open = true
        /// A tool call whose `TOOL_CALL_END` arrived: its arguments are final, but it closes (and gets its status)
        /// with the next event, since `DONE`/`length` right after the end means the call was cut off.
        var ended = false
        var incomplete = false
        var hasTextPart = false
    }

    /// `[Responses] MaxOutputBytes`'s default: 8 MiB, far above any answer within a model's output budget.
    public static let defaultMaximumOutputBytes = 8 << 20
    /// What each output item costs against `maximumOutputBytes` besides its text: an item (and the events that
    /// open and close it) takes memory and stream bytes even when empty, so tool calls with an empty name and
    /// call id, or text and reasoning alternating a byte at a time, cannot pile up items past the limit.
    public static let outputItemCost = 256
    /// The `code` of the error that ends a response whose output grew past `maximumOutputBytes`.
    public static let outputLimitCode = "output_limit_exceeded"

    /// What the Responses dialect's response object echoes of its request (empty for the other dialects).
    public struct Echo: Sendable {
        public var body: JSONObject
        public var instructions: String?
        public var tools: [JSONValue]
        public var toolChoice: JSONValue

        public init(body: JSONObject = [:], instructions: String? = nil, tools: [JSONValue] = [], toolChoice: JSONValue = "auto") {
            self.body = body
            self.instructions = instructions
            self.tools = tools
            self.toolChoice = toolChoice
        }
    }

    /// What the pipeline accepted from one backend event, in dialect-neutral terms: the other dialects' encoders
    /// write their wire format from these (``recordsSteps``), the Responses dialect from the events ``consume``
    /// returns.
    public enum Step: Sendable, Hashable {
        /// Text appended to the answer (never empty; text that may begin a stop sequence is held back first).
        case text(String)
        /// Visible reasoning text.
        case reasoning(String)
        /// Tool call number `call` (0, 1, … among the calls kept) began.
        case callBegan(call: Int, callID: String, name: String)
        /// More of call number `call`'s arguments (JSON text).
        case callArguments(call: Int, delta: String)
        /// The answer ended: ``outcome`` is set.
        case ended
    }

    /// Why a completed answer ended, as the dialects that report it need it.
    public enum StopReason: Sendable, Hashable {
        /// The model stopped by itself.
        case stop
        /// The model wrote one of the request's stop sequences (the text ends before it).
        case stopSequence(String)
        /// The model called tools.
        case toolCalls
        /// The output cap (`max_output_tokens`) cut the answer.
        case length
    }

    /// One finished output item in dialect-neutral terms (for the non-streaming encoders of other dialects).
    public struct OutputView: Sendable {
        public enum Kind: Sendable { case text, reasoning, toolCall }
        public var kind: Kind
        /// The text, the reasoning text, or the call's arguments (JSON text).
        public var text: String
        public var callID: String
        public var name: String
        /// Cut by the output cap or a failure.
        public var incomplete: Bool
    }

    public let responseID: String
    public let createdAt: Int
    let request: PipelineRequest
    let echo: Echo
    public let model: String
    let maxOutputTokens: Int
    let estimatedInputTokens: Int
    let seal: @Sendable ([UInt8]) -> String
    /// The most bytes of output (text, tool-call names and arguments, reasoning text and state) the response may
    /// accumulate. A backend that streams past it (a runaway upstream) fails the response with
    /// `output_limit_exceeded`, so a generation can never grow the host's memory without bound; the caller then
    /// cancels the generation.
    public let maximumOutputBytes: Int
    /// Whether `start()` and `consume(_:now:)` build Responses stream events (false for non-streaming requests and
    /// the other dialects).
    public var streamsEvents = true
    /// Whether ``consume(_:now:)`` records ``Step``s for ``takeSteps()`` (streams of the other dialects).
    public var recordsSteps = false
    private var steps: [Step] = []
    /// Text held back because it may be the start of a stop sequence, as Unicode scalars.
    private var heldScalars: [Unicode.Scalar] = []
    /// The request's stop sequences as Unicode scalars, computed once (matching is by scalar).
    private let stopScalars: [[Unicode.Scalar]]
    /// Why the answer ended, once it completed or was cut by the cap.
    public private(set) var stopReason: StopReason?
    /// Set when the builder ended the answer before the backend did (a stop sequence, the output limit): the
    /// caller cancels the generation.
    public private(set) var endedEarly = false
    private var sequence = 0
    private var items: [OutputItem] = []
    private var usage = BackendUsage()
    private var textDeltas = 0
    /// The output bytes accumulated so far, counted against `maximumOutputBytes`.
    private var outputBytes = 0
    /// Set when the output went past `maximumOutputBytes` (the response then failed).
    public private(set) var exceededOutputLimit = false
    private var callsStarted = 0
    /// Tool-call indices the host dropped because `parallel_tool_calls` is false.
    private var droppedToolIndices = Set<Int>()
    /// Set once the terminal event was seen.
    public private(set) var outcome: Outcome?
    public private(set) var completedAt: Int?
    /// The failure the backend reported, unscrubbed, for the log.
    public private(set) var backendFailure: (code: AFMErrorCode, message: String)?
    /// Whether any output item was started.
    public var hasOutput: Bool { !items.isEmpty }
    /// Who sent the request and when it arrived (for the metrics and the access log).
    public var context = RequestContext()
    /// When the first output (text, reasoning or a tool call) arrived: the end of the time to first token.
    public private(set) var firstOutputAt: ContinuousClock.Instant?

    /// - Parameter seal: turns a backend's opaque reasoning state into `encrypted_content` (the host's sealer,
    ///   bound to the model id).
    public init(
        responseID: String, request: PipelineRequest, echo: Echo = Echo(), model: String, maxOutputTokens: Int, estimatedInputTokens: Int,
        createdAt: Int, maximumOutputBytes: Int = Self.defaultMaximumOutputBytes,
        seal: @escaping @Sendable ([UInt8]) -> String = { _ in "" }
    ) {
        self.responseID = responseID
        self.request = request
        self.echo = echo
        self.model = model
        self.maxOutputTokens = maxOutputTokens
        self.estimatedInputTokens = estimatedInputTokens
        self.createdAt = createdAt
        self.maximumOutputBytes = maximumOutputBytes
        self.seal = seal
        stopScalars = request.stopSequences.map { Array($0.unicodeScalars) }
    }

    /// A builder for a Responses request, echoing it.
    public init(
        responseID: String, request: ResponsesRequest, model: String, maxOutputTokens: Int, estimatedInputTokens: Int,
        createdAt: Int, maximumOutputBytes: Int = Self.defaultMaximumOutputBytes,
        seal: @escaping @Sendable ([UInt8]) -> String = { _ in "" }
    ) {
        self.init(
            responseID: responseID, request: request.pipeline, echo: request.echo, model: model, maxOutputTokens: maxOutputTokens,
            estimatedInputTokens: estimatedInputTokens, createdAt: createdAt, maximumOutputBytes: maximumOutputBytes, seal: seal)
    }

    /// The steps recorded since the last call (with ``recordsSteps``).
    public mutating func takeSteps() -> [Step] {
        defer { steps.removeAll(keepingCapacity: true) }
        return steps
    }

    // MARK: - Events

    /// The opening events: `response.created` and `response.in_progress`.
    public mutating func start() -> [JSONValue] {
        let snapshot = responseObject()
        return [Self.event(streamsEvents, nextSequence(), "response.created", ["response": snapshot]), Self.event(streamsEvents, nextSequence(), "response.in_progress", ["response": snapshot])]
    }

    /// The stream events one backend event produces (possibly none).
    public mutating func consume(_ backendEvent: BackendEvent, now: Int) -> [JSONValue] {
        guard outcome == nil else {
            // Usage reported after the response ended (a backend stopped by the output limit, or cancelled,
            // reports it while stopping) still counts, so the token monitor sees what the generation cost.
            if case .usage(let reported) = backendEvent { record(reported) }
            return []
        }
        if let limitFailure = checkOutputLimit(backendEvent, now: now) { return limitFailure }
        if firstOutputAt == nil {
            switch backendEvent {
            case .textDelta, .reasoningText, .toolCallBegin: firstOutputAt = .now
            default: break
            }
        }
        var out: [JSONValue] = []
        switch backendEvent {
        case .textDelta(let text):
            guard !text.isEmpty else { return [] }
            textDeltas += 1
            if request.stopSequences.isEmpty {
                appendText(text, into: &out)
            } else {
                scanForStop(text, now: now, into: &out)
            }
        case .reasoningText(let text):
            guard !text.isEmpty else { return [] }
            flushHeldText(into: &out)
            if recordsSteps { steps.append(.reasoning(text)) }
            let index = openItem(.reasoning, into: &out)
            if !items[index].hasTextPart {
                items[index].hasTextPart = true
                out.append(
                    Self.event(
                        streamsEvents, nextSequence(), "response.content_part.added",
                        ["item_id": .string(items[index].id), "output_index": number(index), "content_index": 0, "part": ["type": "reasoning_text", "text": ""]]))
            }
            items[index].text += text
            out.append(
                Self.event(streamsEvents, nextSequence(), "response.reasoning_text.delta", ["item_id": .string(items[index].id), "output_index": number(index), "content_index": 0, "delta": .string(text)]))
        case .reasoningState(let bytes):
            let index = openItem(.reasoning, into: &out)
            items[index].state += bytes
        case .toolCallBegin(let toolIndex, let name, let callID):
            flushHeldText(into: &out)
            // parallel_tool_calls: false → at most one call per response; later calls are dropped.
            if !request.parallelToolCalls && callsStarted >= 1 {
                droppedToolIndices.insert(toolIndex)
                // The model went on past the kept call, so a cap hit from here on did not cut that call.
                closeOpenItems(into: &out, incomplete: false)
                return out
            }
            callsStarted += 1
            closeOpenItems(into: &out, incomplete: false)
            let tool = request.toolSet.tool(named: name)
            let custom = tool?.kind == .custom
            var item = OutputItem(kind: custom ? .customToolCall : .functionCall, id: ResponseID.make(custom ? "ctc" : "fc"))
            item.callID = callID.isEmpty ? ResponseID.make("call") : callID
            item.name = name
            item.namespace = tool?.namespace
            item.toolIndex = toolIndex
            items.append(item)
            if recordsSteps { steps.append(.callBegan(call: callsStarted - 1, callID: item.callID, name: name)) }
            out.append(Self.event(streamsEvents, nextSequence(), "response.output_item.added", ["output_index": number(items.count - 1), "item": itemSnapshot(items.count - 1)]))
        case .toolCallArguments(let toolIndex, let delta):
            guard !droppedToolIndices.contains(toolIndex), let index = openCall(toolIndex) else { return [] }
            items[index].text += delta
            if recordsSteps, !delta.isEmpty { steps.append(.callArguments(call: callOrdinal(index), delta: delta)) }
            if items[index].kind == .functionCall {
                out.append(
                    Self.event(streamsEvents, nextSequence(), "response.function_call_arguments.delta", ["item_id": .string(items[index].id), "output_index": number(index), "delta": .string(delta)]))
            }
        case .toolCallEnd(let toolIndex):
            if !droppedToolIndices.contains(toolIndex), let index = openCall(toolIndex) { items[index].ended = true }
        case .usage(let reported):
            record(reported)
        case .done(let reason):
            flushHeldText(into: &out)
            completedAt = now
            switch reason {
            case .stop, .toolCalls:
                complete(reason == .toolCalls || callsStarted > 0 ? .toolCalls : .stop, into: &out)
            case .length:
                closeOpenItems(into: &out, incomplete: true)
                outcome = .incomplete(reason: "max_output_tokens")
                stopReason = .length
                out.append(Self.event(streamsEvents, nextSequence(), "response.incomplete", ["response": responseSnapshot()]))
            case .cancelled:
                out += fail(AFMError(.cancelled, "The response was cancelled before it finished."))
            }
        case .failed(let code, let message):
            flushHeldText(into: &out)
            completedAt = now
            backendFailure = (code, message)
            out += fail(Self.clientFacing(code, message))
        }
        if recordsSteps, outcome != nil, steps.last != .ended { steps.append(.ended) }
        return out
    }

    /// The message of the failure a stream ends with when the server's processing deadline cut it.
    public static let processingDeadlineMessage =
        "The response took longer than this server's processing deadline ([Server] ProcessingDeadlineSeconds) and was stopped."

    /// Ends the response as failed with `timeout` because the server's processing deadline cut the generation: its
    /// cancellation was the server's doing, not the client's, and the client is still there to be told. Nothing
    /// when the response already ended.
    public mutating func failForProcessingDeadline(now: Int) -> [JSONValue] {
        guard outcome == nil else { return [] }
        var out: [JSONValue] = []
        flushHeldText(into: &out)
        completedAt = now
        out += fail(AFMError(.timeout, Self.processingDeadlineMessage))
        return out
    }

    /// What is wrong with a finished structured answer (`text.format` json_schema or json_object), or nil when it
    /// is valid or none was asked for. The answer is the text of the message items; a turn that only calls tools
    /// has no answer to check.
    private func structuredOutputProblem() -> String? {
        guard request.outputFormat.isStructured else { return nil }
        let messages = items.filter { $0.kind == .message }
        if messages.isEmpty && items.contains(where: { $0.kind == .functionCall || $0.kind == .customToolCall }) {
            return nil
        }
        return request.outputFormat.check(messages.map(\.text).joined())
    }

    /// The first tool call whose arguments do not satisfy its tool's parameters (``ToolSet/checkArguments(ofCall:_:)``),
    /// as the error that fails the response.
    private func toolArgumentsProblem() -> AFMError? {
        // Custom tools' input is free-form text (the model called a function with `{"input": …}`, but backends may
        // deliver the raw text), so only function calls are checked.
        for item in items where item.kind == .functionCall {
            if let error = request.toolSet.checkArguments(ofCall: item.name, item.text) { return error }
        }
        return nil
    }

    /// Ends the answer as completed.
    private mutating func complete(_ reason: StopReason, into out: inout [JSONValue]) {
        closeOpenItems(into: &out, incomplete: false)
        if let error = toolArgumentsProblem() {
            // A call the client's code would choke on is never `completed` either: the tool's parameters are checked
            // like an output schema (number bounds too, which the local backend's grammar does not enforce).
            backendFailure = (.invalidStructuredOutput, error.message)
            out += fail(error)
            return
        }
        if let problem = structuredOutputProblem() {
            // Never `completed` with an answer the client's parser would choke on (docs/responses-api.md,
            // "Structured outputs"). The answer was the backend's to get right, so it is logged like a backend
            // failure.
            backendFailure = (.invalidStructuredOutput, problem)
            out += fail(
                AFMError(
                    .invalidStructuredOutput, "The model's answer does not satisfy \(request.outputFormat.param): \(problem).",
                    param: request.outputFormat.param))
            return
        }
        outcome = .completed
        stopReason = reason
        out.append(Self.event(streamsEvents, nextSequence(), "response.completed", ["response": responseSnapshot()]))
    }

    /// Appends text to the open message (opening one).
    private mutating func appendText(_ text: String, into out: inout [JSONValue]) {
        let index = openItem(.message, into: &out)
        items[index].text += text
        if recordsSteps { steps.append(.text(text)) }
        out.append(
            Self.event(
                streamsEvents, nextSequence(), "response.output_text.delta",
                ["item_id": .string(items[index].id), "output_index": number(index), "content_index": 0, "delta": .string(text), "logprobs": []]))
    }

    /// Stop sequences: passes on the text up to the first stop sequence and ends the answer there (the caller
    /// cancels the generation), or passes on all but the end that may be the start of one (held back until the
    /// next text shows whether it is).
    ///
    /// Matching is by Unicode scalar, as llama.cpp and OpenAI match (by bytes): a Swift `Character` is a
    /// grapheme, so "\r\n" would be one character that a stop "\n" never matches, and "e\u{301}" one that a stop
    /// "e" never matches. The answer is cut, and text held back, at scalar boundaries. One pass over the buffer
    /// finds both the earliest whole match and the earliest end that is the start of a sequence; the sequences'
    /// scalars are computed once per request (``stopScalars``).
    private mutating func scanForStop(_ text: String, now: Int, into out: inout [JSONValue]) {
        var buffer = heldScalars
        buffer.append(contentsOf: text.unicodeScalars)
        heldScalars = []
        var keep = buffer.count
        var match: (start: Int, sequence: Int)?
        scan: for start in buffer.indices {
            for (number, sequence) in stopScalars.enumerated() {
                var matched = 0
                while matched < sequence.count, start + matched < buffer.count, buffer[start + matched] == sequence[matched] { matched += 1 }
                if matched == sequence.count {
                    match = (start, number)
                    break scan
                }
                // The buffer ended inside the sequence: from here on the text may be its start.
                if start + matched == buffer.count, start < keep { keep = start }
            }
        }
        if let match {
            if match.start > 0 { appendText(Self.string(buffer[..<match.start]), into: &out) }
            completedAt = now
            endedEarly = true
            // consume(_:now:) records the end of the steps once (complete may already have, by failing).
            complete(.stopSequence(request.stopSequences[match.sequence]), into: &out)
            return
        }
        heldScalars = Array(buffer[keep...])
        if keep > 0 { appendText(Self.string(buffer[..<keep]), into: &out) }
    }

    /// A string of scalars.
    private static func string(_ scalars: ArraySlice<Unicode.Scalar>) -> String {
        var view = String.UnicodeScalarView()
        view.append(contentsOf: scalars)
        return String(view)
    }

    /// Passes on text held back for a stop sequence that did not come.
    private mutating func flushHeldText(into out: inout [JSONValue]) {
        guard !heldScalars.isEmpty else { return }
        let text = Self.string(heldScalars[...])
        heldScalars = []
        appendText(text, into: &out)
    }

    /// The number of the tool call at output index `index` among the calls kept.
    private func callOrdinal(_ index: Int) -> Int {
        items[..<index].count { $0.kind == .functionCall || $0.kind == .customToolCall }
    }

    /// The error a client sees for a backend failure. Messages of server-side failures (5xx: internal,
    /// tool_failed, incompatible) are replaced by a generic sentence, because they can carry paths or other
    /// internals of the backend; the original is logged with the response id.
    public static func clientFacing(_ code: AFMErrorCode, _ message: String) -> AFMError {
        guard code.httpStatus >= 500, code != .timeout, code != .modelUnavailable, code != .busy, code != .backendCrashed else {
            return AFMError(code, message)
        }
        return AFMError(code, "The backend failed while generating this response (\(code.rawValue)). The server log has details.")
    }

    /// Counts the output an event adds; when it would take the response past `maximumOutputBytes`, fails the
    /// response (the event is not accumulated) and returns the closing events.
    private mutating func checkOutputLimit(_ backendEvent: BackendEvent, now: Int) -> [JSONValue]? {
        let added: Int
        switch backendEvent {
        case .textDelta(let text): added = text.isEmpty ? 0 : text.utf8.count + itemCost(opening: .message)
        case .reasoningText(let text): added = text.isEmpty ? 0 : text.utf8.count + itemCost(opening: .reasoning)
        case .reasoningState(let bytes): added = bytes.count + itemCost(opening: .reasoning)
        case .toolCallBegin(let toolIndex, let name, let callID):
            // Every begin costs an item, a dropped one (parallel_tool_calls: false) too: its index is remembered.
            added = droppedToolIndices.contains(toolIndex) ? 0 : name.utf8.count + callID.utf8.count + Self.outputItemCost
        case .toolCallArguments(let toolIndex, let delta): added = droppedToolIndices.contains(toolIndex) ? 0 : delta.utf8.count
        case .toolCallEnd, .usage, .done, .failed: added = 0
        }
        guard added > 0 else { return nil }
        guard outputBytes + added > maximumOutputBytes else {
            outputBytes += added
            return nil
        }
        completedAt = now
        exceededOutputLimit = true
        endedEarly = true
        return fail(
            AFMError(
                .internal,
                "The model's output went past this server's limit of \(maximumOutputBytes) bytes per response "
                    + "([Responses] MaxOutputBytes); the generation was stopped.",
                publicCode: Self.outputLimitCode))
    }

    /// Merges reported token counts into `usage` (a count the backend leaves out keeps its earlier value).
    private mutating func record(_ reported: BackendUsage) {
        usage = BackendUsage(
            inputTokens: reported.inputTokens ?? usage.inputTokens, outputTokens: reported.outputTokens ?? usage.outputTokens,
            reasoningTokens: reported.reasoningTokens ?? usage.reasoningTokens, cachedTokens: reported.cachedTokens ?? usage.cachedTokens)
    }

    /// What an event that goes into an item of `kind` costs for the item: nothing when it continues the open item
    /// at the end of the output, `outputItemCost` when it opens a new one.
    private func itemCost(opening kind: OutputItem.Kind) -> Int {
        if let last = items.indices.last, items[last].open, items[last].kind == kind { return 0 }
        return Self.outputItemCost
    }

    private mutating func fail(_ error: AFMError) -> [JSONValue] {
        var out: [JSONValue] = []
        // An item the failure interrupted is incomplete; a call that had already ended is whole.
        for index in items.indices where items[index].open { close(index, into: &out, incomplete: !items[index].ended) }
        outcome = .failed(error)
        // The error event has code/message/param at top level and never an "error" key: the OpenAI SDK raises
        // on any event whose data has a truthy "error" (reference §0.6).
        out.append(Self.event(streamsEvents, nextSequence(), "error", ["code": .string(error.publicCode), "message": .string(error.message), "param": error.param.map(JSONValue.string) ?? nil]))
        out.append(Self.event(streamsEvents, nextSequence(), "response.failed", ["response": responseSnapshot()]))
        if recordsSteps { steps.append(.ended) }
        return out
    }

    /// The open item of `kind` at the end of the output, or a new one (closing whatever else is open).
    private mutating func openItem(_ kind: OutputItem.Kind, into out: inout [JSONValue]) -> Int {
        if let last = items.indices.last, items[last].open, items[last].kind == kind { return last }
        closeOpenItems(into: &out, incomplete: false)
        items.append(OutputItem(kind: kind, id: ResponseID.make(kind == .message ? "msg" : "rs")))
        let index = items.count - 1
        out.append(Self.event(streamsEvents, nextSequence(), "response.output_item.added", ["output_index": number(index), "item": itemSnapshot(index)]))
        if kind == .message {
            items[index].hasTextPart = true
            out.append(
                Self.event(
                    streamsEvents, nextSequence(), "response.content_part.added",
                    ["item_id": .string(items[index].id), "output_index": number(index), "content_index": 0, "part": ["type": "output_text", "text": "", "annotations": [], "logprobs": []]]))
        }
        return index
    }

    /// The open tool call with this index that has not ended yet.
    private func openCall(_ toolIndex: Int) -> Int? {
        items.indices.last {
            items[$0].open && !items[$0].ended && items[$0].toolIndex == toolIndex && (items[$0].kind == .functionCall || items[$0].kind == .customToolCall)
        }
    }

    /// Closes every open item, an ended tool call included; with `incomplete` (the output cap cut the generation)
    /// they are marked `incomplete`.
    private mutating func closeOpenItems(into out: inout [JSONValue], incomplete: Bool) {
        for index in items.indices where items[index].open { close(index, into: &out, incomplete: incomplete) }
    }

    private mutating func close(_ index: Int, into out: inout [JSONValue], incomplete: Bool) {
        guard items[index].open else { return }
        items[index].open = false
        items[index].incomplete = incomplete
        let item = items[index]
        let id = JSONValue.string(item.id)
        switch item.kind {
        case .message:
            out.append(Self.event(streamsEvents, nextSequence(), "response.output_text.done", ["item_id": id, "output_index": number(index), "content_index": 0, "text": .string(item.text), "logprobs": []]))
            out.append(
                Self.event(
                    streamsEvents, nextSequence(), "response.content_part.done",
                    ["item_id": id, "output_index": number(index), "content_index": 0, "part": ["type": "output_text", "text": .string(item.text), "annotations": [], "logprobs": []]]))
        case .reasoning:
            if !item.state.isEmpty { items[index].sealed = seal(item.state) }
            if item.hasTextPart {
                out.append(Self.event(streamsEvents, nextSequence(), "response.reasoning_text.done", ["item_id": id, "output_index": number(index), "content_index": 0, "text": .string(item.text)]))
                out.append(
                    Self.event(streamsEvents, nextSequence(), "response.content_part.done", ["item_id": id, "output_index": number(index), "content_index": 0, "part": ["type": "reasoning_text", "text": .string(item.text)]]))
            }
        case .functionCall:
            out.append(
                Self.event(streamsEvents, nextSequence(), "response.function_call_arguments.done", ["item_id": id, "output_index": number(index), "name": .string(item.name), "arguments": .string(item.text)]))
        case .customToolCall:
            let input = Self.customInput(item.text)
            out.append(Self.event(streamsEvents, nextSequence(), "response.custom_tool_call_input.delta", ["item_id": id, "output_index": number(index), "delta": .string(input)]))
            out.append(Self.event(streamsEvents, nextSequence(), "response.custom_tool_call_input.done", ["item_id": id, "output_index": number(index), "input": .string(input)]))
        }
        out.append(Self.event(streamsEvents, nextSequence(), "response.output_item.done", ["output_index": number(index), "item": itemSnapshot(index)]))
    }

    /// A custom tool's input: the model called it as a function with `{"input": …}`.
    static func customInput(_ arguments: String) -> String {
        (try? JSONParser.parse(arguments))?["input"]?.stringValue ?? arguments
    }

    /// One stream event. Without `streamsEvents` (a non-streaming request only needs the final object) nothing
    /// is built: `fields` is not even evaluated.
    ///
    /// `sequence` comes from `nextSequence()` at the call site, and `build` is `streamsEvents`, so `fields` may read
    /// the builder. Static on purpose: an instance method borrowing the builder while `fields` captures it made
    /// Swift copy the whole builder (the request, its echo, the output) for every call, built or not — eight
    /// copies per small answer (docs/PERFORMANCE.md, "Session 7: the regression since the production features").
    private static func event(_ build: Bool, _ sequence: Int, _ type: String, _ fields: @autoclosure () -> JSONObject) -> JSONValue {
        guard build else { return .null }
        var object: JSONObject = ["type": .string(type), "sequence_number": .number(JSONNumber(sequence))]
        for (key, value) in fields() { object[key] = value }
        return .object(object)
    }

    /// The `sequence_number` of the next event (counted whether or not events are built).
    private mutating func nextSequence() -> Int {
        defer { sequence += 1 }
        return sequence
    }

    /// The response object for an event, or null when events are not built.
    private func responseSnapshot() -> JSONValue { streamsEvents ? responseObject() : .null }

    /// An item for an event, or null when events are not built.
    private func itemSnapshot(_ index: Int) -> JSONValue { streamsEvents ? itemJSON(index) : .null }

    private func number(_ value: Int) -> JSONValue { .number(JSONNumber(value)) }

    // MARK: - Objects

    /// The id, text and incompleteness of output item `index` when it is a message that is no longer open.
    func finishedMessage(_ index: Int) -> (id: String, text: String, incomplete: Bool)? {
        let item = items[index]
        guard case .message = item.kind, !item.open else { return nil }
        return (item.id, item.text, item.incomplete)
    }

    func itemJSON(_ index: Int) -> JSONValue {
        let item = items[index]
        let status: JSONValue = .string(item.open ? "in_progress" : item.incomplete ? "incomplete" : "completed")
        switch item.kind {
        case .message:
            let content: [JSONValue] = item.open ? [] : [["type": "output_text", "text": .string(item.text), "annotations": [], "logprobs": []]]
            return ["id": .string(item.id), "type": "message", "status": status, "role": "assistant", "content": .array(content)]
        case .functionCall:
            var object: JSONObject = [
                "id": .string(item.id), "type": "function_call", "status": status, "arguments": .string(item.open ? "" : item.text),
                "call_id": .string(item.callID), "name": .string(item.name),
            ]
            if let namespace = item.namespace { object["namespace"] = .string(namespace) }
            return .object(object)
        case .customToolCall:
            return [
                "id": .string(item.id), "type": "custom_tool_call", "status": status, "call_id": .string(item.callID),
                "name": .string(item.name), "input": .string(item.open ? "" : Self.customInput(item.text)),
            ]
        case .reasoning:
            var object: JSONObject = ["id": .string(item.id), "type": "reasoning", "summary": [], "status": status]
            if !item.open && item.hasTextPart { object["content"] = [["type": "reasoning_text", "text": .string(item.text)]] }
            if let sealed = item.sealed { object["encrypted_content"] = .string(sealed) }
            return .object(object)
        }
    }

    /// The token usage with all five fields; counts the backend did not report are the host's estimates.
    public var usageJSON: JSONValue {
        let counts = usageCounts
        return [
            "input_tokens": number(counts.input),
            "input_tokens_details": ["cached_tokens": number(counts.cached), "cache_write_tokens": 0],
            "output_tokens": number(counts.output),
            "output_tokens_details": ["reasoning_tokens": number(counts.reasoning)],
            "total_tokens": number(counts.input + counts.output),
        ]
    }

    /// The usage the backend reported (for the token monitor).
    public var reportedUsage: BackendUsage { usage }

    /// Token counts as `usage` reports them (backend figures, else the host's estimates).
    public struct UsageCounts: Sendable, Hashable {
        public var input: Int
        public var output: Int
        public var reasoning: Int
        public var cached: Int
    }

    public var usageCounts: UsageCounts {
        UsageCounts(
            input: usage.inputTokens ?? estimatedInputTokens, output: usage.outputTokens ?? textDeltas,
            reasoning: usage.reasoningTokens ?? 0, cached: usage.cachedTokens ?? 0)
    }

    /// The outcome as the token monitor names it.
    public var outcomeName: String {
        switch outcome {
        case .completed?: "completed"
        case .incomplete?: "incomplete"
        case .failed(let error)? where error.code == .cancelled: "cancelled"
        case .failed?: "failed"
        case nil: "cancelled"
        }
    }

    /// The full response object in its current state (status follows the outcome).
    /// `1.0` and `0.0`, formatted once: a float literal formats its `Double` every time it is evaluated.
    static let one: JSONValue = 1.0
    static let zero: JSONValue = 0.0

    /// The indices of the output items.
    var itemIndices: Range<Int> { items.indices }

    /// The output items in dialect-neutral terms.
    public var outputViews: [OutputView] {
        items.map { item in
            let kind: OutputView.Kind =
                switch item.kind {
                case .message: .text
                case .reasoning: .reasoning
                case .functionCall, .customToolCall: .toolCall
                }
            return OutputView(kind: kind, text: item.text, callID: item.callID, name: item.name, incomplete: item.incomplete)
        }
    }

    public func responseObject() -> JSONValue {
        let body = echo.body
        let status: String
        var incompleteDetails: JSONValue = nil
        var error: JSONValue = nil
        switch outcome {
        case nil: status = "in_progress"
        case .completed?: status = "completed"
        case .incomplete(let reason)?:
            status = "incomplete"
            incompleteDetails = ["reason": .string(reason)]
        case .failed(let failure)?:
            status = "failed"
            error = ["code": .string(failure.publicCode), "message": .string(failure.message)]
        }
        let finished = outcome != nil
        var object: JSONObject = [
            "id": .string(responseID),
            "object": "response",
            "created_at": number(createdAt),
            "completed_at": finished ? completedAt.map(number) ?? nil : nil,
            "status": .string(status),
            "error": error,
            "incomplete_details": incompleteDetails,
            "instructions": echo.instructions.map(JSONValue.string) ?? nil,
            "max_output_tokens": number(maxOutputTokens),
            "max_tool_calls": body["max_tool_calls"] ?? nil,
            "model": .string(model),
            "output": .array(items.indices.map(itemJSON)),
            "parallel_tool_calls": .bool(request.parallelToolCalls),
            "previous_response_id": nil,
            "prompt_cache_key": body["prompt_cache_key"] ?? nil,
            "reasoning": body["reasoning"]?.nonNull ?? ["effort": nil, "summary": nil],
            "safety_identifier": body["safety_identifier"] ?? nil,
            "service_tier": body["service_tier"] ?? "default",
            "store": false,
            "background": false,
            "temperature": request.temperature.map { .number(JSONNumber($0)) } ?? Self.one,
            "text": body["text"]?.nonNull ?? ["format": ["type": "text"], "verbosity": "medium"],
            "tool_choice": echo.toolChoice,
            "tools": .array(echo.tools),
            "top_logprobs": 0,
            "top_p": request.topP.map { .number(JSONNumber($0)) } ?? Self.one,
            "truncation": body["truncation"]?.nonNull ?? "disabled",
            "presence_penalty": Self.zero,
            "frequency_penalty": Self.zero,
            "usage": usageJSON,
            "user": body["user"] ?? nil,
            "metadata": body["metadata"]?.nonNull ?? [:],
        ]
        // `user` is an optional string in the published schemas, never null: absent unless the client sent one.
        if body["user"]?.nonNull == nil { _ = object.removeValue(forKey: "user") }
        return .object(object)
    }
}
