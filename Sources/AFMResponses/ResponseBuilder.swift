// SPDX-License-Identifier: Apache-2.0
import AFMBackends
import AFMCore
import AFMJSON

/// Turns a generation's backend events into Responses API stream events and the final response object.
///
/// The event order is `reference/responses-api.md` §1.7–1.8: `response.created` and `response.in_progress`
/// first; each output item is `output_item.added` → (`content_part.added` → deltas → `output_text.done` →
/// `content_part.done` for messages | argument deltas → `function_call_arguments.done` for calls) →
/// `output_item.done`; then exactly one of `response.completed`, `response.incomplete` or (after an `error`
/// event) `response.failed`. Every event carries an increasing `sequence_number`. The same state produces
/// the non-streaming JSON body, so both paths always agree.
public struct ResponseBuilder: Sendable {
    /// The terminal state of a response.
    public enum Outcome: Sendable, Hashable {
        case completed
        case incomplete(reason: String)
        case failed(AFMError)
    }

    enum Item: Sendable {
        case message(id: String, text: String, open: Bool, incomplete: Bool)
        case functionCall(id: String, callID: String, name: String, arguments: String, toolIndex: Int, open: Bool, incomplete: Bool)
    }

    public let responseID: String
    public let createdAt: Int
    let request: ResponsesRequest
    let model: String
    let maxOutputTokens: Int
    let estimatedInputTokens: Int
    private var sequence = 0
    private var items: [Item] = []
    private var usage = BackendUsage()
    private var textDeltas = 0
    /// Set once the terminal event was seen.
    public private(set) var outcome: Outcome?
    public private(set) var completedAt: Int?
    /// Whether any output item was started (a failure after output must be streamed, not turned into a 4xx/5xx).
    public var hasOutput: Bool { !items.isEmpty }

    public init(
        responseID: String, request: ResponsesRequest, model: String, maxOutputTokens: Int, estimatedInputTokens: Int,
        createdAt: Int
    ) {
        self.responseID = responseID
        self.request = request
        self.model = model
        self.maxOutputTokens = maxOutputTokens
        self.estimatedInputTokens = estimatedInputTokens
        self.createdAt = createdAt
    }

    // MARK: - Events

    /// The opening events: `response.created` and `response.in_progress`.
    public mutating func start() -> [JSONValue] {
        let snapshot = responseObject()
        return [event("response.created", ["response": snapshot]), event("response.in_progress", ["response": snapshot])]
    }

    /// The stream events one backend event produces (possibly none).
    public mutating func consume(_ backendEvent: BackendEvent, now: Int) -> [JSONValue] {
        guard outcome == nil else { return [] }
        var out: [JSONValue] = []
        switch backendEvent {
        case .textDelta(let text):
            guard !text.isEmpty else { return [] }
            textDeltas += 1
            let index = openMessage(into: &out)
            guard case .message(let id, let existing, _, _) = items[index] else { return out }
            items[index] = .message(id: id, text: existing + text, open: true, incomplete: false)
            out.append(
                event(
                    "response.output_text.delta",
                    ["item_id": .string(id), "output_index": .number(JSONNumber(index)), "content_index": 0, "delta": .string(text), "logprobs": []]))
        case .toolCallBegin(let toolIndex, let name, let callID):
            closeOpenItems(into: &out, incomplete: false)
            let id = ResponseID.make("fc")
            let call = callID.isEmpty ? ResponseID.make("call") : callID
            items.append(.functionCall(id: id, callID: call, name: name, arguments: "", toolIndex: toolIndex, open: true, incomplete: false))
            out.append(event("response.output_item.added", ["output_index": .number(JSONNumber(items.count - 1)), "item": itemJSON(items.count - 1)]))
        case .toolCallArguments(let toolIndex, let delta):
            guard let index = openCall(toolIndex), case .functionCall(let id, let callID, let name, let arguments, _, _, _) = items[index] else {
                return []
            }
            items[index] = .functionCall(id: id, callID: callID, name: name, arguments: arguments + delta, toolIndex: toolIndex, open: true, incomplete: false)
            out.append(event("response.function_call_arguments.delta", ["item_id": .string(id), "output_index": .number(JSONNumber(index)), "delta": .string(delta)]))
        case .toolCallEnd(let toolIndex):
            if let index = openCall(toolIndex) { close(index, into: &out, incomplete: false) }
        case .reasoningText, .reasoningState:
            // Reasoning items are produced by the reasoning sealer (Responses issue); until then they are dropped.
            return []
        case .usage(let reported):
            usage = BackendUsage(
                inputTokens: reported.inputTokens ?? usage.inputTokens, outputTokens: reported.outputTokens ?? usage.outputTokens,
                reasoningTokens: reported.reasoningTokens ?? usage.reasoningTokens, cachedTokens: reported.cachedTokens ?? usage.cachedTokens)
        case .done(let reason):
            completedAt = now
            switch reason {
            case .stop, .toolCalls:
                closeOpenItems(into: &out, incomplete: false)
                outcome = .completed
                out.append(event("response.completed", ["response": responseObject()]))
            case .length:
                closeOpenItems(into: &out, incomplete: true)
                outcome = .incomplete(reason: "max_output_tokens")
                out.append(event("response.incomplete", ["response": responseObject()]))
            case .cancelled:
                out += fail(AFMError(.cancelled, "The response was cancelled before it finished."))
            }
        case .failed(let code, let message):
            completedAt = now
            backendFailure = (code, message)
            out += fail(Self.clientFacing(code, message))
        }
        return out
    }

    /// The error a client sees for a backend failure. Messages of server-side failures (5xx: internal,
    /// tool_failed, incompatible) are replaced by a generic sentence, because they can carry paths or other
    /// internals of the backend; the original is logged by the caller with the response id.
    public static func clientFacing(_ code: AFMErrorCode, _ message: String) -> AFMError {
        guard code.httpStatus >= 500, code != .timeout, code != .modelUnavailable, code != .busy else {
            return AFMError(code, message)
        }
        return AFMError(code, "The backend failed while generating this response (\(code.rawValue)). The server log has details.")
    }

    /// The failure the backend reported, unscrubbed, for the log.
    public private(set) var backendFailure: (code: AFMErrorCode, message: String)?

    private mutating func fail(_ error: AFMError) -> [JSONValue] {
        var out: [JSONValue] = []
        closeOpenItems(into: &out, incomplete: true)
        outcome = .failed(error)
        // The error event has code/message/param at top level and never an "error" key: the OpenAI SDK raises
        // on any event whose data has a truthy "error" (reference §0.6).
        out.append(event("error", ["code": .string(error.publicCode), "message": .string(error.message), "param": error.param.map(JSONValue.string) ?? nil]))
        out.append(event("response.failed", ["response": responseObject()]))
        return out
    }

    private mutating func openMessage(into out: inout [JSONValue]) -> Int {
        if let last = items.indices.last, case .message(_, _, true, _) = items[last] { return last }
        closeOpenItems(into: &out, incomplete: false)
        let id = ResponseID.make("msg")
        items.append(.message(id: id, text: "", open: true, incomplete: false))
        let index = items.count - 1
        out.append(event("response.output_item.added", ["output_index": .number(JSONNumber(index)), "item": itemJSON(index)]))
        out.append(
            event(
                "response.content_part.added",
                ["item_id": .string(id), "output_index": .number(JSONNumber(index)), "content_index": 0, "part": ["type": "output_text", "text": "", "annotations": [], "logprobs": []]]))
        return index
    }

    private func openCall(_ toolIndex: Int) -> Int? {
        items.indices.last { index in
            if case .functionCall(_, _, _, _, toolIndex, true, _) = items[index] { return true }
            return false
        }
    }

    private mutating func closeOpenItems(into out: inout [JSONValue], incomplete: Bool) {
        for index in items.indices { close(index, into: &out, incomplete: incomplete) }
    }

    private mutating func close(_ index: Int, into out: inout [JSONValue], incomplete: Bool) {
        switch items[index] {
        case .message(let id, let text, true, _):
            items[index] = .message(id: id, text: text, open: false, incomplete: incomplete)
            let part: JSONValue = ["type": "output_text", "text": .string(text), "annotations": [], "logprobs": []]
            out.append(
                event("response.output_text.done", ["item_id": .string(id), "output_index": .number(JSONNumber(index)), "content_index": 0, "text": .string(text), "logprobs": []]))
            out.append(event("response.content_part.done", ["item_id": .string(id), "output_index": .number(JSONNumber(index)), "content_index": 0, "part": part]))
            out.append(event("response.output_item.done", ["output_index": .number(JSONNumber(index)), "item": itemJSON(index)]))
        case .functionCall(let id, let callID, let name, let arguments, let toolIndex, true, _):
            items[index] = .functionCall(id: id, callID: callID, name: name, arguments: arguments, toolIndex: toolIndex, open: false, incomplete: incomplete)
            out.append(
                event("response.function_call_arguments.done", ["item_id": .string(id), "output_index": .number(JSONNumber(index)), "name": .string(name), "arguments": .string(arguments)]))
            out.append(event("response.output_item.done", ["output_index": .number(JSONNumber(index)), "item": itemJSON(index)]))
        default:
            return
        }
    }

    private mutating func event(_ type: String, _ fields: JSONObject) -> JSONValue {
        var object: JSONObject = ["type": .string(type), "sequence_number": .number(JSONNumber(sequence))]
        for (key, value) in fields { object[key] = value }
        sequence += 1
        return .object(object)
    }

    // MARK: - Objects

    func itemJSON(_ index: Int) -> JSONValue {
        switch items[index] {
        case .message(let id, let text, let open, let incomplete):
            let content: [JSONValue] = open ? [] : [["type": "output_text", "text": .string(text), "annotations": [], "logprobs": []]]
            return [
                "id": .string(id), "type": "message", "status": .string(open ? "in_progress" : incomplete ? "incomplete" : "completed"),
                "role": "assistant", "content": .array(content),
            ]
        case .functionCall(let id, let callID, let name, let arguments, _, let open, let incomplete):
            return [
                "id": .string(id), "type": "function_call", "status": .string(open ? "in_progress" : incomplete ? "incomplete" : "completed"),
                "arguments": .string(open ? "" : arguments), "call_id": .string(callID), "name": .string(name),
            ]
        }
    }

    /// The token usage with all five fields; counts the backend did not report are the host's estimates.
    public var usageJSON: JSONValue {
        let input = usage.inputTokens ?? estimatedInputTokens
        let output = usage.outputTokens ?? textDeltas
        let reasoning = usage.reasoningTokens ?? 0
        return [
            "input_tokens": .number(JSONNumber(input)),
            "input_tokens_details": ["cached_tokens": .number(JSONNumber(usage.cachedTokens ?? 0))],
            "output_tokens": .number(JSONNumber(output)),
            "output_tokens_details": ["reasoning_tokens": .number(JSONNumber(reasoning))],
            "total_tokens": .number(JSONNumber(input + output)),
        ]
    }

    /// The usage the backend reported (for the token monitor).
    public var reportedUsage: BackendUsage { usage }

    /// The full response object in its current state (status follows the outcome).
    public func responseObject() -> JSONValue {
        let body = request.body
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
        return [
            "id": .string(responseID),
            "object": "response",
            "created_at": .number(JSONNumber(createdAt)),
            "completed_at": finished ? completedAt.map { .number(JSONNumber($0)) } ?? nil : nil,
            "status": .string(status),
            "error": error,
            "incomplete_details": incompleteDetails,
            "instructions": request.instructions.map(JSONValue.string) ?? nil,
            "max_output_tokens": .number(JSONNumber(maxOutputTokens)),
            "max_tool_calls": body["max_tool_calls"] ?? nil,
            "model": .string(model),
            "output": finished || !items.isEmpty ? .array(items.indices.map(itemJSON)) : [],
            "parallel_tool_calls": .bool(request.parallelToolCalls),
            "previous_response_id": nil,
            "prompt_cache_key": body["prompt_cache_key"] ?? nil,
            "reasoning": body["reasoning"].flatMap { $0.isNull ? nil : $0 } ?? ["effort": nil, "summary": nil],
            "safety_identifier": body["safety_identifier"] ?? nil,
            "service_tier": body["service_tier"] ?? "default",
            "store": false,
            "background": false,
            "temperature": request.temperature.map { .number(JSONNumber($0)) } ?? 1.0,
            "text": body["text"].flatMap { $0.isNull ? nil : $0 } ?? ["format": ["type": "text"], "verbosity": "medium"],
            "tool_choice": request.toolChoice,
            "tools": .array(request.tools),
            "top_logprobs": 0,
            "top_p": request.topP.map { .number(JSONNumber($0)) } ?? 1.0,
            "truncation": body["truncation"].flatMap { $0.isNull ? nil : $0 } ?? "disabled",
            "presence_penalty": 0.0,
            "frequency_penalty": 0.0,
            "usage": finished ? usageJSON : nil,
            "user": body["user"] ?? nil,
            "metadata": body["metadata"].flatMap { $0.isNull ? nil : $0 } ?? [:],
        ]
    }
}
