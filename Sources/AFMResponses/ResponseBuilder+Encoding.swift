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
        let body = echo.body
        let finished = outcome != nil
        out.reserveCapacity(out.count + 1024)
        out.append(literal: #"{"id":"#)
        JSONEncoding.appendEscapedString(responseID, to: &out)
        out.append(literal: #","object":"response","created_at":"#)
        out.append(decimal: createdAt)
        out.append(literal: #","completed_at":"#)
        if finished, let completedAt { out.append(decimal: completedAt) } else { out.append(literal: "null") }
        out.append(literal: #","status":"#)
        switch outcome {
        case nil:
            out.append(literal: #""in_progress","error":null,"incomplete_details":null"#)
        case .completed?:
            out.append(literal: #""completed","error":null,"incomplete_details":null"#)
        case .incomplete(let reason)?:
            out.append(literal: #""incomplete","error":null,"incomplete_details":{"reason":"#)
            JSONEncoding.appendEscapedString(reason, to: &out)
            out.append(UInt8(ascii: "}"))
        case .failed(let failure)?:
            out.append(literal: #""failed","error":{"code":"#)
            JSONEncoding.appendEscapedString(failure.publicCode, to: &out)
            out.append(literal: #","message":"#)
            JSONEncoding.appendEscapedString(failure.message, to: &out)
            out.append(literal: #"},"incomplete_details":null"#)
        }
        out.append(literal: #","instructions":"#)
        if let instructions = echo.instructions { JSONEncoding.appendEscapedString(instructions, to: &out) } else { out.append(literal: "null") }
        out.append(literal: #","max_output_tokens":"#)
        out.append(decimal: maxOutputTokens)
        out.append(literal: #","max_tool_calls":"#)
        Self.put(body["max_tool_calls"], into: &out)
        out.append(literal: #","model":"#)
        JSONEncoding.appendEscapedString(model, to: &out)
        out.append(literal: #","output":["#)
        for index in itemIndices {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            encodeItem(index, into: &out)
        }
        out.append(literal: #"],"parallel_tool_calls":"#)
        out.append(literal: request.parallelToolCalls ? "true" : "false")
        out.append(literal: #","previous_response_id":null,"prompt_cache_key":"#)
        Self.put(body["prompt_cache_key"], into: &out)
        out.append(literal: #","reasoning":"#)
        if let reasoning = body["reasoning"]?.nonNull {
            Self.put(reasoning, into: &out)
        } else {
            out.append(literal: #"{"effort":null,"summary":null}"#)
        }
        out.append(literal: #","safety_identifier":"#)
        Self.put(body["safety_identifier"], into: &out)
        out.append(literal: #","service_tier":"#)
        if let tier = body["service_tier"] { Self.put(tier, into: &out) } else { out.append(literal: #""default""#) }
        out.append(literal: #","store":false,"background":false,"temperature":"#)
        Self.put(request.temperature.map { .number(JSONNumber($0)) } ?? Self.one, into: &out)
        out.append(literal: #","text":"#)
        if let text = body["text"]?.nonNull {
            Self.put(text, into: &out)
        } else {
            out.append(literal: #"{"format":{"type":"text"},"verbosity":"medium"}"#)
        }
        out.append(literal: #","tool_choice":"#)
        Self.put(echo.toolChoice, into: &out)
        out.append(literal: #","tools":"#)
        if echo.tools.isEmpty { out.append(literal: "[]") } else { JSONValue.array(echo.tools).encode(into: &out) }
        out.append(literal: #","top_logprobs":0,"top_p":"#)
        Self.put(request.topP.map { .number(JSONNumber($0)) } ?? Self.one, into: &out)
        out.append(literal: #","truncation":"#)
        if let truncation = body["truncation"]?.nonNull { Self.put(truncation, into: &out) } else { out.append(literal: #""disabled""#) }
        out.append(literal: #","presence_penalty":"#)
        Self.put(Self.zero, into: &out)
        out.append(literal: #","frequency_penalty":"#)
        Self.put(Self.zero, into: &out)
        // Usage is always an object (the counts so far while running): OpenAI's schema has it optional and not
        // nullable, the Open Responses one required, so only an object satisfies both.
        out.append(literal: #","usage":"#)
        do {
            let counts = usageCounts
            out.append(literal: #"{"input_tokens":"#)
            out.append(decimal: counts.input)
            out.append(literal: #","input_tokens_details":{"cached_tokens":"#)
            out.append(decimal: counts.cached)
            out.append(literal: #","cache_write_tokens":0},"output_tokens":"#)
            out.append(decimal: counts.output)
            out.append(literal: #","output_tokens_details":{"reasoning_tokens":"#)
            out.append(decimal: counts.reasoning)
            out.append(literal: #"},"total_tokens":"#)
            out.append(decimal: counts.input + counts.output)
            out.append(UInt8(ascii: "}"))
        }
        if let user = body["user"]?.nonNull {
            out.append(literal: #","user":"#)
            Self.put(user, into: &out)
        }
        out.append(literal: #","metadata":"#)
        if let metadata = body["metadata"]?.nonNull { Self.put(metadata, into: &out) } else { out.append(literal: "{}") }
        out.append(UInt8(ascii: "}"))
    }

    /// Appends ``itemJSON(_:)``'s encoding: a finished message (nearly every answer) written directly, other
    /// items through their `JSONValue`.
    private func encodeItem(_ index: Int, into out: inout [UInt8]) {
        guard let message = finishedMessage(index) else {
            itemJSON(index).encode(into: &out)
            return
        }
        out.append(literal: #"{"id":"#)
        JSONEncoding.appendEscapedString(message.id, to: &out)
        out.append(literal: #","type":"message","status":"#)
        out.append(literal: message.incomplete ? #""incomplete""# : #""completed""#)
        out.append(literal: #","role":"assistant","content":[{"type":"output_text","text":"#)
        JSONEncoding.appendEscapedString(message.text, to: &out)
        out.append(literal: #","annotations":[],"logprobs":[]}]}"#)
    }

    /// Appends a value, with the common scalars written directly (the generic encoder sets up a buffer per call).
    private static func put(_ value: JSONValue?, into out: inout [UInt8]) {
        switch value {
        case nil, .null?: out.append(literal: "null")
        case .bool(let flag)?: out.append(literal: flag ? "true" : "false")
        case .number(let number)?: out.append(contentsOf: number.literal.utf8)
        case .string(let string)?: JSONEncoding.appendEscapedString(string, to: &out)
        case let other?: other.encode(into: &out)
        }
    }
}
