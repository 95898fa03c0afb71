// SPDX-License-Identifier: Apache-2.0
import AFMJSON

extension ResponseBuilder {
    /// Appends the encoding of ``responseObject()`` to `out`, byte for byte the same, without building the
    /// object first.
    ///
    /// Why: a non-streaming answer needs only the bytes. Building the ~32-member object as a `JSONValue` tree,
    /// encoding it and freeing it was the largest user-space item of a small request's CPU (PERFORMANCE.md).
    /// Members are written in `responseObject()`'s order; nested values that come from the request (tools,
    /// `text`, `metadata`, …) are encoded from their `JSONValue`s as before; `reasoning`, `text`, `truncation` and
    /// `metadata` sent as `null` get their defaults, as in `responseObject()`.
    public func encodeResponseObject(into out: inout [UInt8]) {
        let body = request.body
        let finished = outcome != nil
        out.reserveCapacity(out.count + 1024)
        out.append(contentsOf: #"{"id":"#.utf8)
        JSONEncoding.appendEscapedString(responseID, to: &out)
        out.append(contentsOf: #","object":"response","created_at":"#.utf8)
        out.append(contentsOf: String(createdAt).utf8)
        out.append(contentsOf: #","completed_at":"#.utf8)
        if finished, let completedAt { out.append(contentsOf: String(completedAt).utf8) } else { out.append(contentsOf: "null".utf8) }
        out.append(contentsOf: #","status":"#.utf8)
        switch outcome {
        case nil:
            out.append(contentsOf: #""in_progress","error":null,"incomplete_details":null"#.utf8)
        case .completed?:
            out.append(contentsOf: #""completed","error":null,"incomplete_details":null"#.utf8)
        case .incomplete(let reason)?:
            out.append(contentsOf: #""incomplete","error":null,"incomplete_details":{"reason":"#.utf8)
            JSONEncoding.appendEscapedString(reason, to: &out)
            out.append(UInt8(ascii: "}"))
        case .failed(let failure)?:
            out.append(contentsOf: #""failed","error":{"code":"#.utf8)
            JSONEncoding.appendEscapedString(failure.publicCode, to: &out)
            out.append(contentsOf: #","message":"#.utf8)
            JSONEncoding.appendEscapedString(failure.message, to: &out)
            out.append(contentsOf: #"},"incomplete_details":null"#.utf8)
        }
        out.append(contentsOf: #","instructions":"#.utf8)
        if let instructions = request.instructions { JSONEncoding.appendEscapedString(instructions, to: &out) } else { out.append(contentsOf: "null".utf8) }
        out.append(contentsOf: #","max_output_tokens":"#.utf8)
        out.append(contentsOf: String(maxOutputTokens).utf8)
        out.append(contentsOf: #","max_tool_calls":"#.utf8)
        Self.put(body["max_tool_calls"], into: &out)
        out.append(contentsOf: #","model":"#.utf8)
        JSONEncoding.appendEscapedString(model, to: &out)
        out.append(contentsOf: #","output":["#.utf8)
        for index in itemIndices {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            encodeItem(index, into: &out)
        }
        out.append(contentsOf: #"],"parallel_tool_calls":"#.utf8)
        out.append(contentsOf: (request.parallelToolCalls ? "true" : "false").utf8)
        out.append(contentsOf: #","previous_response_id":null,"prompt_cache_key":"#.utf8)
        Self.put(body["prompt_cache_key"], into: &out)
        out.append(contentsOf: #","reasoning":"#.utf8)
        if let reasoning = body["reasoning"]?.nonNull {
            Self.put(reasoning, into: &out)
        } else {
            out.append(contentsOf: #"{"effort":null,"summary":null}"#.utf8)
        }
        out.append(contentsOf: #","safety_identifier":"#.utf8)
        Self.put(body["safety_identifier"], into: &out)
        out.append(contentsOf: #","service_tier":"#.utf8)
        if let tier = body["service_tier"] { Self.put(tier, into: &out) } else { out.append(contentsOf: #""default""#.utf8) }
        out.append(contentsOf: #","store":false,"background":false,"temperature":"#.utf8)
        Self.put(request.temperature.map { .number(JSONNumber($0)) } ?? Self.one, into: &out)
        out.append(contentsOf: #","text":"#.utf8)
        if let text = body["text"]?.nonNull {
            Self.put(text, into: &out)
        } else {
            out.append(contentsOf: #"{"format":{"type":"text"},"verbosity":"medium"}"#.utf8)
        }
        out.append(contentsOf: #","tool_choice":"#.utf8)
        Self.put(request.toolChoice, into: &out)
        out.append(contentsOf: #","tools":"#.utf8)
        if request.tools.isEmpty { out.append(contentsOf: "[]".utf8) } else { JSONValue.array(request.tools).encode(into: &out) }
        out.append(contentsOf: #","top_logprobs":0,"top_p":"#.utf8)
        Self.put(request.topP.map { .number(JSONNumber($0)) } ?? Self.one, into: &out)
        out.append(contentsOf: #","truncation":"#.utf8)
        if let truncation = body["truncation"]?.nonNull { Self.put(truncation, into: &out) } else { out.append(contentsOf: #""disabled""#.utf8) }
        out.append(contentsOf: #","presence_penalty":"#.utf8)
        Self.put(Self.zero, into: &out)
        out.append(contentsOf: #","frequency_penalty":"#.utf8)
        Self.put(Self.zero, into: &out)
        out.append(contentsOf: #","usage":"#.utf8)
        if finished {
            let counts = usageCounts
            out.append(contentsOf: #"{"input_tokens":"#.utf8)
            out.append(contentsOf: String(counts.input).utf8)
            out.append(contentsOf: #","input_tokens_details":{"cached_tokens":"#.utf8)
            out.append(contentsOf: String(counts.cached).utf8)
            out.append(contentsOf: #"},"output_tokens":"#.utf8)
            out.append(contentsOf: String(counts.output).utf8)
            out.append(contentsOf: #","output_tokens_details":{"reasoning_tokens":"#.utf8)
            out.append(contentsOf: String(counts.reasoning).utf8)
            out.append(contentsOf: #"},"total_tokens":"#.utf8)
            out.append(contentsOf: String(counts.input + counts.output).utf8)
            out.append(UInt8(ascii: "}"))
        } else {
            out.append(contentsOf: "null".utf8)
        }
        out.append(contentsOf: #","user":"#.utf8)
        Self.put(body["user"], into: &out)
        out.append(contentsOf: #","metadata":"#.utf8)
        if let metadata = body["metadata"]?.nonNull { Self.put(metadata, into: &out) } else { out.append(contentsOf: "{}".utf8) }
        out.append(UInt8(ascii: "}"))
    }

    /// Appends ``itemJSON(_:)``'s encoding: a finished message (nearly every answer) written directly, other
    /// items through their `JSONValue`.
    private func encodeItem(_ index: Int, into out: inout [UInt8]) {
        guard let message = finishedMessage(index) else {
            itemJSON(index).encode(into: &out)
            return
        }
        out.append(contentsOf: #"{"id":"#.utf8)
        JSONEncoding.appendEscapedString(message.id, to: &out)
        out.append(contentsOf: #","type":"message","status":"#.utf8)
        out.append(contentsOf: (message.incomplete ? #""incomplete""# : #""completed""#).utf8)
        out.append(contentsOf: #","role":"assistant","content":[{"type":"output_text","text":"#.utf8)
        JSONEncoding.appendEscapedString(message.text, to: &out)
        out.append(contentsOf: #","annotations":[],"logprobs":[]}]}"#.utf8)
    }

    /// Appends a value, with the common scalars written directly (the generic encoder sets up a buffer per call).
    private static func put(_ value: JSONValue?, into out: inout [UInt8]) {
        switch value {
        case nil, .null?: out.append(contentsOf: "null".utf8)
        case .bool(let flag)?: out.append(contentsOf: (flag ? "true" : "false").utf8)
        case .number(let number)?: out.append(contentsOf: number.literal.utf8)
        case .string(let string)?: JSONEncoding.appendEscapedString(string, to: &out)
        case let other?: other.encode(into: &out)
        }
    }
}
