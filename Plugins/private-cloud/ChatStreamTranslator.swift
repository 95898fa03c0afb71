// SPDX-License-Identifier: Apache-2.0
import AFMBackendKit
import AFMSSE
import Foundation

/// Translates a Chat Completions stream (`chat.completion.chunk` SSE data, ended by `[DONE]`) into ABI events.
///
/// - `delta.content` → TEXT_DELTA.
/// - `delta.reasoning_content` (or `delta.reasoning`) → REASONING_TEXT; when the reasoning ends (the first content
///   or tool call, or the end of the stream) the whole text goes out once more as REASONING_STATE, so a later
///   request can replay it as `reasoning_content`.
/// - `delta.tool_calls[i]` → TOOL_CALL_BEGIN on the first sight of index i (id and name), TOOL_CALL_ARGUMENTS for
///   each `function.arguments` piece, TOOL_CALL_END for every call when the stream ends.
/// - The `usage` chunk (`stream_options.include_usage`) → USAGE; `finish_reason` → DONE's reason.
struct ChatStreamTranslator: StreamTranslator {
    let toolNames: [String: String]
    private(set) var finished = false
    private var tools: [Int: Int32] = [:]
    private var nextTool: Int32 = 0
    private var reasoning = ""
    private var reasoningFlushed = false
    private var finishReason: String?
    private var usage: EventSink.Usage?
    private var model: String?

    init(toolNames: [String: String]) {
        self.toolNames = toolNames
    }

    mutating func translate(_ event: SSEParser.Event) -> [StreamOutput] {
        guard !finished else { return [] }
        if Self.isDone(event.data) { return finish() }
        guard let object = try? JSON.object(from: Data(event.data)) else { return [] }
        if let error = JSON.object(object["error"]) {
            finished = true
            let message = JSON.string(error["message"]) ?? "the upstream reported a failure"
            return [.failed(code: AFM_ERR_MODEL_UNAVAILABLE, message: "the upstream failed: \(message)")]
        }
        if model == nil { model = JSON.string(object["model"]) }
        if let counts = EventSink.Usage.from(
            JSON.object(object["usage"]), input: "prompt_tokens", output: "completion_tokens",
            details: ("prompt_tokens_details", "completion_tokens_details"))
        {
            usage = counts
        }
        var out: [StreamOutput] = []
        guard let choice = JSON.array(object["choices"])?.first.flatMap(JSON.object) else { return out }
        if let reason = JSON.string(choice["finish_reason"]) { finishReason = reason }
        guard let delta = JSON.object(choice["delta"]) else { return out }
        if let text = JSON.string(delta["reasoning_content"]) ?? JSON.string(delta["reasoning"]), !text.isEmpty {
            reasoning += text
            out.append(.reasoningText(text))
        }
        if let text = JSON.string(delta["content"]), !text.isEmpty {
            out += flushReasoning()
            out.append(.text(text))
        }
        for raw in JSON.array(delta["tool_calls"]) ?? [] {
            guard let call = JSON.object(raw) else { continue }
            out += flushReasoning()
            let position = JSON.int(call["index"]) ?? 0
            let function = JSON.object(call["function"])
            let index: Int32
            if let known = tools[position] {
                index = known
            } else {
                index = nextTool
                nextTool += 1
                tools[position] = index
                let name = JSON.string(function?["name"]) ?? ""
                out.append(.toolBegin(index: index, name: toolNames[name] ?? name, callID: JSON.string(call["id"]) ?? ""))
            }
            if let arguments = JSON.string(function?["arguments"]), !arguments.isEmpty {
                out.append(.toolArguments(index: index, delta: arguments))
            }
        }
        return out
    }

    /// Whether an event's data is the `[DONE]` sentinel (blanks around it allowed).
    private static func isDone(_ data: [UInt8]) -> Bool {
        data.count <= 64 && String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespaces) == "[DONE]"
    }

    /// The end of the stream: the reasoning state, the open calls' ends, usage and DONE.
    private mutating func finish() -> [StreamOutput] {
        finished = true
        var out = flushReasoning()
        if let model { out.append(.upstreamModel(model)) }
        for index in 0..<nextTool { out.append(.toolEnd(index: index)) }
        if let usage { out.append(.usage(usage)) }
        switch finishReason {
        case "length": out.append(.done(AFM_FINISH_LENGTH))
        case _ where nextTool > 0: out.append(.done(AFM_FINISH_TOOL_CALLS))
        default: out.append(.done(AFM_FINISH_STOP))
        }
        return out
    }

    private mutating func flushReasoning() -> [StreamOutput] {
        guard !reasoning.isEmpty, !reasoningFlushed else { return [] }
        reasoningFlushed = true
        return [.reasoningState(ReasoningState(wireProtocol: .chatCompletions, encryptedContent: nil, text: reasoning).encoded)]
    }
}
