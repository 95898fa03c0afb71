// SPDX-License-Identifier: Apache-2.0
import AFMCore
import AFMJSON
import AFMResponses

/// Writes the pipeline's answer as Anthropic Messages: a `message` body, or the event stream.
///
/// The stream (`reference/dialects.md` §4), every event as `event: <name>` + `data: <json>`: `message_start`
/// (content empty, `stop_reason` null, usage), `ping`, then per content block `content_block_start` →
/// `content_block_delta`* (`text_delta`, `input_json_delta`, `thinking_delta`) → `content_block_stop` with
/// indices 0, 1, … in order; then `message_delta` (`stop_reason`, `stop_sequence`, cumulative `usage`) and
/// `message_stop`. A failure mid-stream is an `error` event with Anthropic's error object, and ends the stream.
public struct MessagesEncoder: AnswerEncoder {
    public static let readsResponsesEvents = false
    public var dialect: APIDialect { .messages }

    private enum Block { case text, thinking, toolUse }
    /// The open content block and its index.
    private var open: (block: Block, index: Int)?
    private var blocks = 0

    public init() {}

    public mutating func streamStart(_ builder: inout ResponseBuilder) -> [UInt8] {
        var message = Self.message(builder, content: [], stopReason: nil, stopSequence: nil)
        message["usage"] = Self.usage(builder, outputTokens: 0)
        var out: [UInt8] = []
        Self.event("message_start", ["type": "message_start", "message": .object(message)], into: &out)
        Self.event("ping", ["type": "ping"], into: &out)
        return out
    }

    public mutating func streamBytes(events: [JSONValue], steps: [ResponseBuilder.Step], builder: ResponseBuilder) -> [UInt8] {
        var out: [UInt8] = []
        for step in steps {
            switch step {
            case .text(let text):
                openBlock(.text, ["type": "text", "text": ""], into: &out)
                delta(["type": "text_delta", "text": .string(text)], into: &out)
            case .reasoning(let text):
                openBlock(.thinking, ["type": "thinking", "thinking": "", "signature": ""], into: &out)
                delta(["type": "thinking_delta", "thinking": .string(text)], into: &out)
            case .callBegan(_, let callID, let name):
                closeBlock(into: &out)
                openBlock(.toolUse, ["type": "tool_use", "id": .string(callID), "name": .string(name), "input": [:]], into: &out)
            case .callArguments(_, let arguments):
                delta(["type": "input_json_delta", "partial_json": .string(arguments)], into: &out)
            case .ended:
                closeBlock(into: &out)
                if case .failed(let error)? = builder.outcome {
                    Self.event("error", error.anthropicEnvelope, into: &out)
                } else {
                    let (reason, sequence) = Self.stopReason(builder)
                    Self.event(
                        "message_delta",
                        [
                            "type": "message_delta", "delta": ["stop_reason": .string(reason), "stop_sequence": sequence.map(JSONValue.string) ?? nil],
                            "usage": Self.usage(builder, outputTokens: builder.usageCounts.output),
                        ], into: &out)
                    Self.event("message_stop", ["type": "message_stop"], into: &out)
                }
            }
        }
        return out
    }

    /// Opens a block of `kind` unless one is open (closing a block of another kind first).
    private mutating func openBlock(_ kind: Block, _ start: JSONValue, into out: inout [UInt8]) {
        if let open, open.block == kind, kind != .toolUse { return }
        closeBlock(into: &out)
        open = (kind, blocks)
        Self.event("content_block_start", ["type": "content_block_start", "index": .number(JSONNumber(blocks)), "content_block": start], into: &out)
        blocks += 1
    }

    private mutating func closeBlock(into out: inout [UInt8]) {
        guard let index = open?.index else { return }
        open = nil
        Self.event("content_block_stop", ["type": "content_block_stop", "index": .number(JSONNumber(index))], into: &out)
    }

    private func delta(_ delta: JSONValue, into out: inout [UInt8]) {
        guard let index = open?.index else { return }
        Self.event("content_block_delta", ["type": "content_block_delta", "index": .number(JSONNumber(index)), "delta": delta], into: &out)
    }

    private static func event(_ name: StaticString, _ data: JSONValue, into out: inout [UInt8]) {
        out.append(literal: "event: ")
        out.append(literal: name)
        out.append(literal: "\ndata: ")
        data.encode(into: &out)
        out.append(literal: "\n\n")
    }

    /// `end_turn`, `stop_sequence` (with the sequence), `tool_use` or `max_tokens`.
    static func stopReason(_ builder: ResponseBuilder) -> (String, String?) {
        switch builder.stopReason {
        case .toolCalls?: ("tool_use", nil)
        case .length?: ("max_tokens", nil)
        case .stopSequence(let sequence)?: ("stop_sequence", sequence)
        case .stop?, nil: ("end_turn", nil)
        }
    }

    static func usage(_ builder: ResponseBuilder, outputTokens: Int) -> JSONValue {
        let counts = builder.usageCounts
        return [
            "input_tokens": .number(JSONNumber(counts.input)), "output_tokens": .number(JSONNumber(outputTokens)),
            "cache_creation_input_tokens": 0, "cache_read_input_tokens": .number(JSONNumber(counts.cached)),
            "server_tool_use": nil, "service_tier": "standard",
        ]
    }

    static func message(_ builder: ResponseBuilder, content: [JSONValue], stopReason: String?, stopSequence: String?) -> JSONObject {
        [
            "id": .string(builder.responseID), "type": "message", "role": "assistant", "model": .string(builder.model), "content": .array(content),
            "stop_reason": stopReason.map(JSONValue.string) ?? nil, "stop_sequence": stopSequence.map(JSONValue.string) ?? nil,
        ]
    }

    /// The `message` object: text, thinking and tool_use blocks in order, `stop_reason`, usage.
    public func body(_ builder: ResponseBuilder) -> [UInt8] {
        var content: [JSONValue] = []
        for item in builder.outputViews {
            switch item.kind {
            case .text:
                content.append(["type": "text", "text": .string(item.text)])
            case .reasoning:
                if !item.text.isEmpty { content.append(["type": "thinking", "thinking": .string(item.text), "signature": ""]) }
            case .toolCall:
                // A call the cap cut has no complete arguments: its input is left empty rather than invalid.
                let input = (try? JSONParser.parse(item.text)).flatMap { $0.objectValue != nil ? $0 : nil } ?? [:]
                content.append(["type": "tool_use", "id": .string(item.callID), "name": .string(item.name), "input": input])
            }
        }
        let (reason, sequence) = Self.stopReason(builder)
        var message = Self.message(builder, content: content, stopReason: reason, stopSequence: sequence)
        message["usage"] = Self.usage(builder, outputTokens: builder.usageCounts.output)
        return JSONValue.object(message).encoded()
    }
}
