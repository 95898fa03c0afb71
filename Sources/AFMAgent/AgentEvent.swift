// SPDX-License-Identifier: Apache-2.0
import AFMJSON

/// What a turn reports while it runs, in order. The last event is `completed` or `failed`, exactly once.
///
/// Every event serializes to one JSON object (``json``) with a `type` (`afm agent --json` prints one per line;
/// the bridge sends the same objects).
public enum AgentEvent: Sendable, Hashable {
    /// Answer text: the new `delta` and the step's `text` so far. `isReset` is true on the first delta of a step
    /// after an earlier step wrote text (that text was a preamble to tool calls; show the new text instead).
    case text(delta: String, text: String, isReset: Bool)
    /// A schema turn's answer so far, as a complete JSON value (open strings, arrays and objects closed).
    case partial(JSONValue)
    /// A local tool call starts.
    case toolCallStarted(AgentToolCall)
    /// An external tool call waits for the host: answer it with ``AgentRun/submit(_:for:)``.
    case toolCallRequested(AgentToolCall)
    /// A tool call has its output (every started or requested call, and calls refused over budget).
    case toolCallCompleted(ToolCallRecord)
    /// The turn ended with an answer; it is now part of the agent's history.
    case completed(AgentResponse)
    /// The turn failed or was cancelled; the history is as it was before the turn.
    case failed(AgentError)

    /// The event as one JSON object: `{"type":"text","delta","text","is_reset"}`, `{"type":"partial","json"}`,
    /// `{"type":"tool_call_started"|"tool_call_requested", call fields}`, `{"type":"tool_call_completed", call
    /// fields, "output", "is_external", "duration_ms"}`, `{"type":"completed","response"}`,
    /// `{"type":"failed","error"}`.
    public var json: JSONValue {
        switch self {
        case .text(let delta, let text, let isReset):
            return ["type": "text", "delta": .string(delta), "text": .string(text), "is_reset": .bool(isReset)]
        case .partial(let value):
            return ["type": "partial", "json": value]
        case .toolCallStarted(let call):
            return Self.tagged("tool_call_started", call.json)
        case .toolCallRequested(let call):
            return Self.tagged("tool_call_requested", call.json)
        case .toolCallCompleted(let record):
            return Self.tagged("tool_call_completed", record.json)
        case .completed(let response):
            return ["type": "completed", "response": response.jsonValue]
        case .failed(let error):
            return ["type": "failed", "error": error.json]
        }
    }

    private static func tagged(_ type: String, _ fields: JSONValue) -> JSONValue {
        var object: JSONObject = ["type": .string(type)]
        for (key, value) in fields.objectValue ?? JSONObject() { object[key] = value }
        return .object(object)
    }
}
