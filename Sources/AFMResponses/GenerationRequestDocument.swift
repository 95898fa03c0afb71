// SPDX-License-Identifier: Apache-2.0
import AFMJSON

/// Builds the generation request document a backend receives (docs/backend-abi.md, "Generation request").
public enum GenerationRequestDocument {
    /// The version of the document this host writes.
    public static let version = 1

    /// The document for a validated request.
    ///
    /// - Parameters:
    ///   - responseID: the public id of the response, for the backend's logs.
    ///   - maxOutputTokens: the resolved output cap (never absent in the document).
    public static func make(for request: ResponsesRequest, responseID: String, maxOutputTokens: Int) -> JSONValue {
        var input: [JSONValue] = []
        for item in request.items {
            switch item {
            case .message(let role, let parts):
                input.append(["type": "message", "role": .string(role), "content": .array(parts)])
            case .functionCall(let callID, let name, let arguments):
                input.append(
                    ["type": "function_call", "call_id": .string(callID), "name": .string(name), "arguments": .string(arguments), "namespace": nil])
            case .functionCallOutput(let callID, let output):
                input.append(["type": "function_call_output", "call_id": .string(callID), "output": .string(output)])
            }
        }
        let tools: [JSONValue] = request.tools.compactMap { tool in
            guard tool["type"]?.stringValue == "function", let name = tool["name"]?.stringValue else { return nil }
            return [
                "name": .string(name),
                "description": tool["description"] ?? nil,
                "parameters": tool["parameters"] ?? ["type": "object", "properties": [:]],
                "namespace": nil,
            ]
        }
        let toolChoice: JSONValue
        if let mode = request.toolChoice.stringValue {
            toolChoice = ["mode": .string(mode)]
        } else if let name = request.toolChoice["name"]?.stringValue {
            toolChoice = ["mode": "function", "name": .string(name)]
        } else {
            toolChoice = ["mode": "auto"]
        }
        return [
            "request_version": .number(JSONNumber(version)),
            "response_id": .string(responseID),
            "model": .string(request.model),
            "system": .array(request.system.map(JSONValue.string)),
            "input": .array(input),
            "tools": .array(tools),
            "tool_choice": toolChoice,
            "parallel_tool_calls": .bool(request.parallelToolCalls),
            "max_output_tokens": .number(JSONNumber(maxOutputTokens)),
            "temperature": request.temperature.map { .number(JSONNumber($0)) } ?? nil,
            "top_p": request.topP.map { .number(JSONNumber($0)) } ?? nil,
            "reasoning_effort": nil,
            "stream": .bool(request.stream),
        ]
    }
}
