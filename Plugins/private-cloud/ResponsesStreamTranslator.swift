// SPDX-License-Identifier: Apache-2.0
import AFMBackendKit
import AFMSSE
import Foundation

/// Translates a Responses API event stream (`response.*` SSE events) into ABI events.
///
/// | upstream event                                   | output                                              |
/// |--------------------------------------------------|-----------------------------------------------------|
/// | `response.output_text.delta`                     | TEXT_DELTA                                          |
/// | `response.output_item.added` (function_call)     | TOOL_CALL_BEGIN (index in order of appearance)      |
/// | `response.function_call_arguments.delta`         | TOOL_CALL_ARGUMENTS                                 |
/// | `response.output_item.done` (function_call)      | the arguments if none were streamed, TOOL_CALL_END  |
/// | `response.reasoning_text.delta`, `…summary_text.delta` | REASONING_TEXT                                |
/// | `response.output_item.done` (reasoning)          | REASONING_STATE: its `encrypted_content` and text   |
/// | `response.completed` / `response.incomplete`     | USAGE, then DONE (stop, length, tool_calls)         |
/// | `response.failed`, `error`                       | ERROR                                               |
struct ResponsesStreamTranslator: StreamTranslator {
    /// Upstream tool name → the host's name (namespaces are flattened upstream).
    let toolNames: [String: String]
    private(set) var finished = false
    private var toolIndices: [String: Int32] = [:]
    private var argumentsSeen: Set<Int32> = []
    private var endedTools: Set<Int32> = []
    private var nextTool: Int32 = 0
    private var reasoningText: [String: String] = [:]

    init(toolNames: [String: String]) {
        self.toolNames = toolNames
    }

    mutating func translate(_ event: SSEParser.Event) -> [StreamOutput] {
        guard !finished, let object = try? JSON.object(from: Data(event.data)) else { return [] }
        let type = JSON.string(object["type"]) ?? event.name
        switch type {
        case "response.output_text.delta":
            guard let delta = JSON.string(object["delta"]), !delta.isEmpty else { return [] }
            return [.text(delta)]
        case "response.output_item.added":
            guard let item = JSON.object(object["item"]), JSON.string(item["type"]) == "function_call" else { return [] }
            return begin(item, outputIndex: JSON.int(object["output_index"]))
        case "response.function_call_arguments.delta":
            guard let delta = JSON.string(object["delta"]), !delta.isEmpty,
                let index = tool(itemID: JSON.string(object["item_id"]), outputIndex: JSON.int(object["output_index"]))
            else { return [] }
            argumentsSeen.insert(index)
            return [.toolArguments(index: index, delta: delta)]
        case "response.reasoning_text.delta", "response.reasoning_summary_text.delta":
            guard let delta = JSON.string(object["delta"]), !delta.isEmpty else { return [] }
            reasoningText[JSON.string(object["item_id"]) ?? "", default: ""] += delta
            return [.reasoningText(delta)]
        case "response.output_item.done":
            guard let item = JSON.object(object["item"]) else { return [] }
            switch JSON.string(item["type"]) {
            case "function_call": return endCall(item, outputIndex: JSON.int(object["output_index"]))
            case "reasoning": return reasoning(item)
            default: return []
            }
        case "response.completed", "response.incomplete":
            finished = true
            let response = JSON.object(object["response"])
            var out: [StreamOutput] = []
            if let model = JSON.string(response?["model"]) { out.append(.upstreamModel(model)) }
            // Close calls whose output_item.done never came (older llama.cpp builds).
            for index in 0..<nextTool where !endedTools.contains(index) { out.append(.toolEnd(index: index)) }
            if let usage = EventSink.Usage.from(
                JSON.object(response?["usage"]), input: "input_tokens", output: "output_tokens",
                details: ("input_tokens_details", "output_tokens_details"))
            {
                out.append(.usage(usage))
            }
            let incomplete = JSON.string(JSON.object(response?["incomplete_details"])?["reason"])
            if type == "response.incomplete" || incomplete == "max_output_tokens" {
                out.append(.done(AFM_FINISH_LENGTH))
            } else {
                out.append(.done(nextTool > 0 ? AFM_FINISH_TOOL_CALLS : AFM_FINISH_STOP))
            }
            return out
        case "response.failed", "error":
            finished = true
            let error = JSON.object(JSON.object(object["response"])?["error"]) ?? object
            let message = JSON.string(error["message"]) ?? "the upstream reported a failure"
            return [.failed(code: AFM_ERR_MODEL_UNAVAILABLE, message: "the upstream failed: \(message)")]
        default:
            return []
        }
    }

    private mutating func begin(_ item: [String: Any], outputIndex: Int?) -> [StreamOutput] {
        let index = nextTool
        nextTool += 1
        if let id = JSON.string(item["id"]) { toolIndices["id:" + id] = index }
        if let outputIndex { toolIndices["out:\(outputIndex)"] = index }
        let name = JSON.string(item["name"]) ?? ""
        return [.toolBegin(index: index, name: toolNames[name] ?? name, callID: JSON.string(item["call_id"]) ?? "")]
    }

    private func tool(itemID: String?, outputIndex: Int?) -> Int32? {
        if let itemID, let index = toolIndices["id:" + itemID] { return index }
        if let outputIndex, let index = toolIndices["out:\(outputIndex)"] { return index }
        return nil
    }

    private mutating func endCall(_ item: [String: Any], outputIndex: Int?) -> [StreamOutput] {
        var out: [StreamOutput] = []
        let index: Int32
        if let known = tool(itemID: JSON.string(item["id"]), outputIndex: outputIndex) {
            index = known
        } else {
            out += begin(item, outputIndex: outputIndex)
            index = nextTool - 1
        }
        if !argumentsSeen.contains(index), let arguments = JSON.string(item["arguments"]), !arguments.isEmpty {
            out.append(.toolArguments(index: index, delta: arguments))
        }
        endedTools.insert(index)
        out.append(.toolEnd(index: index))
        return out
    }

    private mutating func reasoning(_ item: [String: Any]) -> [StreamOutput] {
        var out: [StreamOutput] = []
        var text = reasoningText[JSON.string(item["id"]) ?? ""] ?? ""
        if text.isEmpty {
            let parts = (JSON.array(item["content"]) ?? []) + (JSON.array(item["summary"]) ?? [])
            text = parts.compactMap { JSON.string(JSON.object($0)?["text"]) }.joined(separator: "\n")
            if !text.isEmpty { out.append(.reasoningText(text)) }
        }
        let state = ReasoningState(
            wireProtocol: .responses, encryptedContent: JSON.string(item["encrypted_content"]).flatMap { $0.isEmpty ? nil : $0 },
            text: text)
        if !state.isEmpty { out.append(.reasoningState(state.encoded)) }
        return out
    }
}
