// SPDX-License-Identifier: Apache-2.0
import AFMClient
import AFMJSON

/// One turn's loop of model steps (agents.md §1.3): ask the model with the whole transcript, run the tool calls
/// it made, append calls and outputs, repeat until it answers without a call or a limit ends the turn.
///
/// The gateway is stateless (`store: false`): every step sends `[instructions, …history, prompt, calls,
/// outputs]`, each output's `call_id` answering its call.
struct TurnExecutor: Sendable {
    let client: ResponsesClient
    let model: String
    let instructions: String?
    let tools: [AgentTool]
    let policy: TurnPolicy
    /// The agent's complete turns before this one.
    let history: [[JSONValue]]
    /// The model's input budget in tokens, when the gateway said.
    let inputBudget: Int?
    /// Whether the model accepts images (its `vision` capability), so tools' images are sent as images.
    let acceptsImages: Bool
    let control: TurnControl
    let emit: @Sendable (AgentEvent) -> Void

    /// Runs the turn; returns the response and the turn's transcript items (to append to the history).
    func run(prompt: String) async throws(AgentError) -> (AgentResponse, [JSONValue]) {
        if case .named(let name) = policy.toolMode, !tools.contains(where: { $0.name == name }) {
            throw AgentError(.invalidRequest, "the tool policy names \"\(name)\", which is not one of the agent's tools")
        }
        guard policy.maxSteps > 0 else { throw AgentError(.invalidRequest, "maxSteps must be at least 1") }
        var items: [JSONValue] = [Self.userMessage(prompt)]
        var controller = StepController(policy: policy, tools: tools)
        let runtime = ToolRuntime(tools: tools, policy: policy, control: control, emit: emit)
        var usage = ResponseUsage()
        var records: [ToolCallRecord] = []
        var earlierText = false
        var answeringModel: String?
        for _ in 0..<policy.maxSteps {
            try checkCancelled()
            let plan = controller.plan()
            let outcome = try await step(plan: plan, index: controller.step, items: items, earlierText: earlierText)
            usage = usage + outcome.usage
            answeringModel = outcome.model ?? answeringModel
            if !outcome.text.isEmpty { earlierText = true }
            items += outcome.items
            guard !outcome.calls.isEmpty else {
                controller.finishStep(calls: 0)
                let response = try finalResponse(
                    text: outcome.text, records: records, usage: usage, steps: controller.step, model: answeringModel,
                    trimmedTurns: outcome.trimmedTurns)
                return (response, items)
            }
            let done = await runtime.run(outcome.calls, remainingBudget: controller.remainingCalls, offered: Set(plan.tools.map(\.name)))
            controller.finishStep(calls: outcome.calls.count)
            items += ToolOutputItems.make(done, model: model, acceptsImages: acceptsImages)
            records += done
        }
        try checkCancelled()
        throw AgentError(
            .generationFailed,
            "the turn reached its limit of \(policy.maxSteps) model steps without an answer (the model kept calling tools)")
    }

    /// What one model step produced.
    private struct StepOutcome {
        var text = ""
        var calls: [AgentToolCall] = []
        /// The output items to replay (messages, calls, reasoning).
        var items: [JSONValue] = []
        var usage = ResponseUsage()
        var model: String?
        var trimmedTurns = 0
    }

    /// One request and its stream.
    private func step(plan: StepController.Plan, index: Int, items: [JSONValue], earlierText: Bool) async throws(AgentError)
        -> StepOutcome
    {
        let definitions = plan.tools.map(\.definition)
        var fixed = instructions.map { ContextTrimmer.tokens(of: $0) + 4 } ?? 0
        fixed += definitions.reduce(0) { $0 + ContextTrimmer.tokens(of: $1.jsonString) }
        // Images are limited before trimming: one that will not be sent is priced as its placeholder, not as an
        // image (which would leave out earlier turns for nothing).
        let limited = ToolOutputItems.limitingImages(history + [items])
        let fitted = ContextTrimmer.fit(
            history: Array(limited.dropLast()), current: limited.last ?? [], fixedTokens: fixed,
            budget: policy.trimsContext ? inputBudget : nil)
        var body: JSONObject = ["model": .string(model)]
        if let instructions, !instructions.isEmpty { body["instructions"] = .string(instructions) }
        body["input"] = .array(fitted.input)
        if !definitions.isEmpty {
            body["tools"] = .array(definitions)
            body["tool_choice"] = plan.toolChoice
            body["parallel_tool_calls"] = .bool(policy.parallelToolCalls)
        }
        if let schema = policy.schema { body["text"] = schema.textFormat }
        if let maxOutputTokens = policy.maxOutputTokens { body["max_output_tokens"] = .number(JSONNumber(maxOutputTokens)) }
        if let temperature = policy.temperature { body["temperature"] = .number(JSONNumber(temperature)) }
        body["stream"] = true
        body["store"] = false

        var outcome = StepOutcome(trimmedTurns: fitted.droppedTurns)
        var messageText = ""
        var firstDelta = true
        var lastPartial: JSONValue?
        var finished = false
        for await event in client.events(body: JSONValue.object(body).encoded()) {
            switch event {
            case .started(let model):
                outcome.model = model
            case .textDelta(let delta):
                outcome.text += delta
                if policy.schema != nil {
                    if let snapshot = PartialJSON.snapshot(outcome.text), snapshot != lastPartial {
                        lastPartial = snapshot
                        emit(.partial(snapshot))
                    }
                } else {
                    emit(.text(delta: delta, text: outcome.text, isReset: firstDelta && earlierText))
                    firstDelta = false
                }
            case .outputItem(let item):
                switch item["type"]?.stringValue {
                case "function_call":
                    let call = AgentToolCall(
                        callID: item["call_id"]?.stringValue ?? "", name: item["name"]?.stringValue ?? "",
                        arguments: item["arguments"]?.stringValue ?? "", step: index)
                    outcome.calls.append(call)
                    outcome.items.append([
                        "type": "function_call", "call_id": .string(call.callID), "name": .string(call.name),
                        "arguments": .string(call.arguments),
                    ])
                case "message":
                    let parts = (item["content"]?.arrayValue ?? []).compactMap { $0["text"]?.stringValue }
                    messageText += parts.joined()
                    outcome.items.append([
                        "type": "message", "role": "assistant",
                        "content": .array(parts.map { ["type": "output_text", "text": .string($0)] }),
                    ])
                case "reasoning":
                    if let sealed = item["encrypted_content"]?.stringValue {
                        outcome.items.append(["type": "reasoning", "summary": [], "encrypted_content": .string(sealed)])
                    }
                default:
                    break
                }
            case .usage(let usage):
                outcome.usage = usage
            case .completed, .incomplete:
                finished = true
            case .failed(let code, let message):
                try checkCancelled()
                throw AgentError(gatewayCode: code, message: message)
            }
        }
        try checkCancelled()
        guard finished else { throw AgentError(.generationFailed, "the gateway's stream ended before the response did") }
        if !messageText.isEmpty { outcome.text = messageText }
        return outcome
    }

    private func finalResponse(
        text: String, records: [ToolCallRecord], usage: ResponseUsage, steps: Int, model: String?, trimmedTurns: Int
    ) throws(AgentError) -> AgentResponse {
        var json: JSONValue?
        if let schema = policy.schema {
            guard let parsed = try? JSONParser.parse(text) else {
                throw AgentError(.invalidSchema, "the structured answer is not valid JSON: \(text.prefix(200))")
            }
            json = SchemaOrder.reorder(parsed, schema: schema.schema)
        }
        return AgentResponse(
            text: text, json: json, toolCalls: records, usage: usage, steps: steps, model: model, trimmedTurns: trimmedTurns)
    }

    private func checkCancelled() throws(AgentError) {
        if control.isCancelled || Task.isCancelled { throw AgentError.cancelled }
    }

    static func userMessage(_ text: String) -> JSONValue {
        ["type": "message", "role": "user", "content": [["type": "input_text", "text": .string(text)]]]
    }
}
