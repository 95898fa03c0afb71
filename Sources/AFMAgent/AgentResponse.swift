// SPDX-License-Identifier: Apache-2.0
import AFMClient
import AFMJSON

/// A completed turn: the answer, the tool calls made on the way, usage and the number of model steps.
public struct AgentResponse: Sendable, Hashable {
    /// The answer's text (for a schema turn, the JSON text as the model wrote it).
    public var text: String
    /// A schema turn's answer, parsed and re-serialized with its keys in the schema's order; nil otherwise.
    public var json: JSONValue?
    public var toolCalls: [ToolCallRecord]
    /// Tokens the turn spent, summed over its model steps.
    public var usage: ResponseUsage
    /// How many model requests the turn took.
    public var steps: Int
    /// The model that answered (the gateway's `response.model`).
    public var model: String?
    /// How many of the oldest complete turns the last step left out to fit the model's input budget.
    public var trimmedTurns: Int

    public init(
        text: String, json: JSONValue? = nil, toolCalls: [ToolCallRecord] = [], usage: ResponseUsage = ResponseUsage(),
        steps: Int, model: String? = nil, trimmedTurns: Int = 0
    ) {
        self.text = text
        self.json = json
        self.toolCalls = toolCalls
        self.usage = usage
        self.steps = steps
        self.model = model
        self.trimmedTurns = trimmedTurns
    }

    public var jsonValue: JSONValue {
        [
            "text": .string(text), "json": json ?? .null, "tool_calls": .array(toolCalls.map(\.json)), "usage": Self.json(usage),
            "steps": .number(JSONNumber(steps)), "model": model.map(JSONValue.string) ?? .null,
            "trimmed_turns": .number(JSONNumber(trimmedTurns)),
        ]
    }

    /// `usage` as the agent surfaces write it: the four counts flat (the Responses API nests the last two).
    static func json(_ usage: ResponseUsage) -> JSONValue {
        [
            "input_tokens": .number(JSONNumber(usage.inputTokens)), "output_tokens": .number(JSONNumber(usage.outputTokens)),
            "reasoning_tokens": .number(JSONNumber(usage.reasoningTokens)), "cached_tokens": .number(JSONNumber(usage.cachedTokens)),
        ]
    }
}
