// SPDX-License-Identifier: Apache-2.0
import AFMCore
import AFMJSON
import Foundation

/// Builds the generation request document a backend receives (docs/backend-abi.md, "Generation request").
public enum GenerationRequestDocument {
    /// The version of the document this host writes.
    public static let version = 1

    /// The document for a validated request; `model` is the concrete model id (aliases already resolved).
    ///
    /// - Parameters:
    ///   - responseID: the public id of the response, for the backend's logs.
    ///   - maxOutputTokens: the resolved output cap (never absent in the document).
    public static func make(
        for request: PipelineRequest, model: String, responseID: String, maxOutputTokens: Int, system: [String], input: [JSONValue]
    ) -> JSONValue {
        var document: JSONObject = [
            "request_version": .number(JSONNumber(version)),
            "response_id": .string(responseID),
            "model": .string(model),
            "system": .array(system.map(JSONValue.string)),
            "input": .array(input),
            "tools": request.toolSet.documentTools,
            "tool_choice": request.toolSet.documentChoice,
            "parallel_tool_calls": .bool(request.parallelToolCalls),
            "max_output_tokens": .number(JSONNumber(maxOutputTokens)),
            "temperature": request.temperature.map { .number(JSONNumber($0)) } ?? nil,
            "top_p": request.topP.map { .number(JSONNumber($0)) } ?? nil,
            "reasoning_effort": request.reasoningEffort.map(JSONValue.string) ?? nil,
            "stream": .bool(request.stream),
            "output_format": request.outputFormat.documentValue,
        ]
        // Optional fields (docs/backend-abi.md §8.2): present only when the client gave them.
        if let seed = request.seed { document["seed"] = .number(JSONNumber(seed)) }
        if let topK = request.topK { document["top_k"] = .number(JSONNumber(topK)) }
        return .object(document)
    }

    /// The encoding of ``make(for:model:responseID:maxOutputTokens:system:input:)``, byte for byte, written
    /// without building the top-level object (the nested `input` items, tools and tool choice are encoded from
    /// their values). Every request needs only these bytes; building the object first and freeing it was a
    /// measurable part of a small request's CPU (docs/PERFORMANCE.md).
    public static func encode(
        for request: PipelineRequest, model: String, responseID: String, maxOutputTokens: Int, system: [String], input: [JSONValue]
    ) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(320)
        out.append(literal: #"{"request_version":"#)
        out.append(decimal: version)
        out.append(literal: #","response_id":"#)
        JSONEncoding.appendEscapedString(responseID, to: &out)
        out.append(literal: #","model":"#)
        JSONEncoding.appendEscapedString(model, to: &out)
        out.append(literal: #","system":["#)
        for (index, text) in system.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            JSONEncoding.appendEscapedString(text, to: &out)
        }
        out.append(literal: #"],"input":["#)
        for (index, item) in input.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            item.encode(into: &out)
        }
        out.append(literal: #"],"tools":"#)
        request.toolSet.documentTools.encode(into: &out)
        out.append(literal: #","tool_choice":"#)
        request.toolSet.documentChoice.encode(into: &out)
        out.append(literal: #","parallel_tool_calls":"#)
        out.append(literal: request.parallelToolCalls ? "true" : "false")
        out.append(literal: #","max_output_tokens":"#)
        out.append(decimal: maxOutputTokens)
        out.append(literal: #","temperature":"#)
        out.append(contentsOf: (request.temperature.map { JSONNumber($0).literal } ?? "null").utf8)
        out.append(literal: #","top_p":"#)
        out.append(contentsOf: (request.topP.map { JSONNumber($0).literal } ?? "null").utf8)
        out.append(literal: #","reasoning_effort":"#)
        if let effort = request.reasoningEffort { JSONEncoding.appendEscapedString(effort, to: &out) } else { out.append(literal: "null") }
        out.append(literal: #","stream":"#)
        out.append(literal: request.stream ? "true" : "false")
        out.append(literal: #","output_format":"#)
        switch request.outputFormat.kind {
        case .text: out.append(literal: #"{"type":"text"}"#)
        case .jsonObject: out.append(literal: #"{"type":"json_object"}"#)
        case .jsonSchema: request.outputFormat.documentValue.encode(into: &out)
        }
        if let seed = request.seed {
            out.append(literal: #","seed":"#)
            out.append(decimal: seed)
        }
        if let topK = request.topK {
            out.append(literal: #","top_k":"#)
            out.append(decimal: topK)
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// ``make(for:model:responseID:maxOutputTokens:system:input:)`` for a Responses request.
    public static func make(
        for request: ResponsesRequest, model: String, responseID: String, maxOutputTokens: Int, system: [String], input: [JSONValue]
    ) -> JSONValue {
        make(for: request.pipeline, model: model, responseID: responseID, maxOutputTokens: maxOutputTokens, system: system, input: input)
    }

    /// ``encode(for:model:responseID:maxOutputTokens:system:input:)`` for a Responses request.
    public static func encode(
        for request: ResponsesRequest, model: String, responseID: String, maxOutputTokens: Int, system: [String], input: [JSONValue]
    ) -> [UInt8] {
        encode(for: request.pipeline, model: model, responseID: responseID, maxOutputTokens: maxOutputTokens, system: system, input: input)
    }

    /// The document's `input` items for the request's items. Reasoning items are opened by `openReasoning`
    /// (nil drops the item: the client sent no state).
    static func inputItems(
        _ items: [ResponsesRequest.Item], openReasoning: (String, Int) throws(AFMError) -> [UInt8]?
    ) throws(AFMError) -> [JSONValue] {
        var input: [JSONValue] = []
        for (index, item) in items.enumerated() {
            if let value = try inputItem(item, index: index, openReasoning: openReasoning) { input.append(value) }
        }
        return input
    }

    /// The document's `input` item for `items[index]`, or nil for reasoning without state.
    static func inputItem(
        _ item: ResponsesRequest.Item, index: Int, openReasoning: (String, Int) throws(AFMError) -> [UInt8]?
    ) throws(AFMError) -> JSONValue? {
        switch item {
        case .message(let role, let parts):
            return ["type": "message", "role": .string(role), "content": .array(parts)]
        case .functionCall(let callID, let name, let arguments, let namespace):
            return [
                "type": "function_call", "call_id": .string(callID), "name": .string(name), "arguments": .string(arguments),
                "namespace": namespace.map(JSONValue.string) ?? nil,
            ]
        case .functionCallOutput(let callID, let output), .customToolCallOutput(let callID, let output):
            return ["type": "function_call_output", "call_id": .string(callID), "output": .string(output)]
        case .customToolCall(let callID, let name, let customInput):
            let arguments: JSONValue = ["input": .string(customInput)]
            return ["type": "function_call", "call_id": .string(callID), "name": .string(name), "arguments": .string(arguments.jsonString), "namespace": nil]
        case .reasoning(let encrypted):
            guard let encrypted, let state = try openReasoning(encrypted, index) else { return nil }
            return ["type": "reasoning", "state_base64": .string(Data(state).base64EncodedString())]
        }
    }
}
