// SPDX-License-Identifier: Apache-2.0
import AFMCore
import AFMJSON
import AFMResponses

/// Writes the pipeline's answer as Chat Completions: a `chat.completion` body, or `chat.completion.chunk` events.
///
/// The stream (`reference/dialects.md` §2): a first chunk with `role`, content deltas, tool-call deltas with
/// `index` on every fragment and `id`/`type`/`name` on the first, one chunk with `finish_reason`, the usage
/// chunk with `choices: []` when `stream_options.include_usage` asked for it (every other chunk then has
/// `usage: null`), and `data: [DONE]` last. A failure mid-stream is a chunk with an `error` object, then
/// `[DONE]`. Every chunk has the same `id` and `created`; `model` is the concrete model that answered.
public struct ChatCompletionsEncoder: AnswerEncoder {
    public static let readsResponsesEvents = false
    public var dialect: APIDialect { .chatCompletions }

    private let includeUsage: Bool
    /// `data: {"id":…,"object":"chat.completion.chunk","created":…,"model":…,"choices":[`,
    /// written once per stream.
    private var chunkHead: [UInt8] = []

    public init(includeUsage: Bool) {
        self.includeUsage = includeUsage
    }

    public mutating func streamStart(_ builder: inout ResponseBuilder) -> [UInt8] {
        chunkHead.append(literal: #"data: {"id":"#)
        JSONEncoding.appendEscapedString(builder.responseID, to: &chunkHead)
        chunkHead.append(literal: #","object":"chat.completion.chunk","created":"#)
        chunkHead.append(decimal: builder.createdAt)
        chunkHead.append(literal: #","model":"#)
        JSONEncoding.appendEscapedString(builder.model, to: &chunkHead)
        chunkHead.append(literal: #","choices":["#)
        var out: [UInt8] = []
        chunk(#"{"role":"assistant","content":"","refusal":null}"#, into: &out)
        return out
    }

    public mutating func streamBytes(events: [JSONValue], steps: [ResponseBuilder.Step], builder: ResponseBuilder) -> [UInt8] {
        var out: [UInt8] = []
        for step in steps {
            switch step {
            case .text(let text):
                var delta: [UInt8] = []
                delta.append(literal: #"{"content":"#)
                JSONEncoding.appendEscapedString(text, to: &delta)
                delta.append(UInt8(ascii: "}"))
                chunk(delta, into: &out)
            case .reasoning:
                // Chat Completions has no field for visible reasoning in OpenAI's schema; it is not sent.
                continue
            case .callBegan(let call, let callID, let name):
                var delta: [UInt8] = []
                delta.append(literal: #"{"tool_calls":[{"index":"#)
                delta.append(decimal: call)
                delta.append(literal: #","id":"#)
                JSONEncoding.appendEscapedString(callID, to: &delta)
                delta.append(literal: #","type":"function","function":{"name":"#)
                JSONEncoding.appendEscapedString(name, to: &delta)
                delta.append(literal: #","arguments":""}}]}"#)
                chunk(delta, into: &out)
            case .callArguments(let call, let arguments):
                var delta: [UInt8] = []
                delta.append(literal: #"{"tool_calls":[{"index":"#)
                delta.append(decimal: call)
                delta.append(literal: #","function":{"arguments":"#)
                JSONEncoding.appendEscapedString(arguments, to: &delta)
                delta.append(literal: #"}}]}"#)
                chunk(delta, into: &out)
            case .ended:
                end(builder, into: &out)
            }
        }
        return out
    }

    /// The last chunks: `finish_reason` (and usage), or the error; then `[DONE]`.
    private func end(_ builder: ResponseBuilder, into out: inout [UInt8]) {
        if case .failed(let error)? = builder.outcome {
            // The SDK raises on a chunk with a truthy `error` (reference §2).
            out.append(literal: "data: ")
            error.envelope.encode(into: &out)
            out.append(literal: "\n\n")
        } else {
            chunk(Array("{}".utf8), finishReason: Self.finishReason(builder), into: &out)
            if includeUsage {
                out.append(contentsOf: chunkHead)
                out.append(literal: #"],"usage":"#)
                Self.appendUsage(builder, into: &out)
                out.append(literal: "}\n\n")
            }
        }
        out.append(literal: "data: [DONE]\n\n")
    }

    private func chunk(_ delta: StaticString, into out: inout [UInt8]) {
        var bytes: [UInt8] = []
        bytes.append(literal: delta)
        chunk(bytes, into: &out)
    }

    private func chunk(_ delta: [UInt8], finishReason: String? = nil, into out: inout [UInt8]) {
        out.append(contentsOf: chunkHead)
        out.append(literal: #"{"index":0,"delta":"#)
        out.append(contentsOf: delta)
        out.append(literal: #","logprobs":null,"finish_reason":"#)
        if let finishReason { JSONEncoding.appendEscapedString(finishReason, to: &out) } else { out.append(literal: "null") }
        out.append(literal: includeUsage ? #"}],"usage":null}"# : "}]}")
        out.append(literal: "\n\n")
    }

    /// `stop` (also for a stop sequence), `length` or `tool_calls`.
    static func finishReason(_ builder: ResponseBuilder) -> String {
        switch builder.stopReason {
        case .toolCalls?: "tool_calls"
        case .length?: "length"
        case .stop?, .stopSequence?, nil: "stop"
        }
    }

    static func appendUsage(_ builder: ResponseBuilder, into out: inout [UInt8]) {
        let counts = builder.usageCounts
        out.append(literal: #"{"prompt_tokens":"#)
        out.append(decimal: counts.input)
        out.append(literal: #","completion_tokens":"#)
        out.append(decimal: counts.output)
        out.append(literal: #","total_tokens":"#)
        out.append(decimal: counts.input + counts.output)
        out.append(literal: #","prompt_tokens_details":{"cached_tokens":"#)
        out.append(decimal: counts.cached)
        out.append(literal: #","audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":"#)
        out.append(decimal: counts.reasoning)
        out.append(literal: #","audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}"#)
    }

    /// The `chat.completion` object: one choice with the text (null when the answer is only tool calls) and the
    /// tool calls, `finish_reason`, and usage with details.
    public func body(_ builder: ResponseBuilder) -> [UInt8] {
        var text = ""
        var calls: [ResponseBuilder.OutputView] = []
        for item in builder.outputViews {
            switch item.kind {
            case .text: text += item.text
            case .toolCall: calls.append(item)
            case .reasoning: continue
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(512 + text.utf8.count)
        out.append(literal: #"{"id":"#)
        JSONEncoding.appendEscapedString(builder.responseID, to: &out)
        out.append(literal: #","object":"chat.completion","created":"#)
        out.append(decimal: builder.createdAt)
        out.append(literal: #","model":"#)
        JSONEncoding.appendEscapedString(builder.model, to: &out)
        out.append(literal: #","choices":[{"index":0,"message":{"role":"assistant","content":"#)
        if text.isEmpty && !calls.isEmpty { out.append(literal: "null") } else { JSONEncoding.appendEscapedString(text, to: &out) }
        out.append(literal: #","refusal":null,"annotations":[]"#)
        if !calls.isEmpty {
            out.append(literal: #","tool_calls":["#)
            for (index, call) in calls.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                out.append(literal: #"{"id":"#)
                JSONEncoding.appendEscapedString(call.callID, to: &out)
                out.append(literal: #","type":"function","function":{"name":"#)
                JSONEncoding.appendEscapedString(call.name, to: &out)
                out.append(literal: #","arguments":"#)
                JSONEncoding.appendEscapedString(call.text, to: &out)
                out.append(literal: "}}")
            }
            out.append(UInt8(ascii: "]"))
        }
        out.append(literal: #"},"logprobs":null,"finish_reason":"#)
        JSONEncoding.appendEscapedString(Self.finishReason(builder), to: &out)
        out.append(literal: #"}],"usage":"#)
        Self.appendUsage(builder, into: &out)
        out.append(literal: #","service_tier":"default"}"#)
        return out
    }
}
