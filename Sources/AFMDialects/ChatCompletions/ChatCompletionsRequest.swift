// SPDX-License-Identifier: Apache-2.0
import AFMCore
import AFMJSON
import AFMResponses

/// A `POST /v1/chat/completions` body decoded into the pipeline's request.
///
/// This is the whole Chat Completions dialect on the way in: the shapes of `reference/dialects.md` §2 mapped onto
/// ``PipelineRequest``. Every field's disposition is in ``policy`` (docs/chat-completions.md is checked against
/// it); the rules shared with the other dialects (model, sampling ranges, tools and their schemas, images, tool
/// outputs answering earlier calls) are the pipeline's, called from here, never restated.
public struct ChatCompletionsRequest: Sendable {
    /// The one table of what Chat Completions does with each top-level field.
    public static let policy = PolicyTable([
        .init("model", .supported, "a served model id or alias"),
        .init("messages", .supported, "developer, system, user, assistant (with tool_calls), tool"),
        .init("stream", .supported, "true: Server-Sent Events (chat.completion.chunk, data: [DONE] last)"),
        .init("stream_options", .supported, "include_usage: a last chunk with choices [] and usage"),
        .init("max_completion_tokens", .supported, "1 or more; clamped to the model's output budget"),
        .init("max_tokens", .supported, "the older name of max_completion_tokens"),
        .init("temperature", .supported, "0 to 2"),
        .init("top_p", .supported, "0 to 1"),
        .init("stop", .supported, "a string or up to 4, each 1–256 bytes; the text ends before the first one, finish_reason stop; not with a JSON response_format"),
        .init("tools", .supported, "function tools, parameters in the enforceable schema subset"),
        .init("tool_choice", .supported, "none, auto, required, or {type:function,function:{name}}"),
        .init("parallel_tool_calls", .supported, "false: at most one call per answer"),
        .init("response_format", .supported, "text, json_object, or json_schema (enforced and checked; models with structured_output)"),
        .init("reasoning_effort", .supported, "low, medium, high (models that reason); none"),
        .init("n", .supported, "1 only"),
        .init("seed", .supported, "an integer, passed to the backend (the local backend seeds its sampler with it)"),
        .init("presence_penalty", .ignored, "-2 to 2"),
        .init("frequency_penalty", .ignored, "-2 to 2"),
        .init("user", .ignored, "a string"),
        .init("safety_identifier", .ignored, "a string"),
        .init("prompt_cache_key", .ignored, "a cache-affinity hint"),
        .init("metadata", .ignored, "an object"),
        .init("store", .ignored, "absent or false; true is refused"),
        .init("service_tier", .ignored, "answered as default"),
        .init("verbosity", .ignored, ""),
        .init("modalities", .ignored, "[\"text\"] only"),
        .init(
            "logprobs", .rejected(code: "unsupported_parameter", message: "logprobs are not supported by this gateway; send false or omit it."),
            "false is accepted", accepted: false),
        .init(
            "top_logprobs", .rejected(code: "unsupported_parameter", message: "top_logprobs is not supported; send 0 or omit it."), "0 is accepted",
            accepted: 0),
        .init("logit_bias", .rejected(code: "unsupported_parameter", message: "logit_bias is not supported by this gateway."), ""),
        .init("audio", .rejected(code: "unsupported_parameter", message: "Audio output is not supported by this gateway."), ""),
        .init("prediction", .rejected(code: "unsupported_parameter", message: "Predicted outputs are not supported by this gateway."), ""),
        .init(
            "web_search_options", .rejected(code: "unsupported_parameter", message: "Web search is not available on this gateway."), ""),
        .init(
            "functions", .rejected(code: "unsupported_parameter", message: "The deprecated 'functions' parameter is not supported; send 'tools'."),
            ""),
        .init(
            "function_call",
            .rejected(code: "unsupported_parameter", message: "The deprecated 'function_call' parameter is not supported; send 'tool_choice'."), ""),
    ])

    /// The request the pipeline serves.
    public var pipeline: PipelineRequest
    /// `stream_options.include_usage`: a last chunk carries the usage (and every other chunk `usage: null`).
    public var includeUsage: Bool

    /// Decodes and validates a body.
    ///
    /// - Throws: `AFMError` (400) naming the offending field in `param` (`messages[2].tool_call_id`).
    public init(body bytes: [UInt8]) throws(AFMError) {
        let object = try RequestFields.object(bytes)
        try Self.policy.check(object)
        let model = try RequestFields.model(object)
        try RequestFields.checkStore(object)
        let stream = try RequestFields.optionalBool(object, "stream") ?? false
        includeUsage = false
        if let options = object["stream_options"], !options.isNull {
            guard let optionsObject = options.objectValue else {
                throw RequestFields.typeError("stream_options", expected: "an object", got: options)
            }
            for key in optionsObject.keys where key != "include_usage" && key != "include_obfuscation" {
                throw AFMError(.invalidRequest, "Unknown parameter: 'stream_options.\(key)'.", param: "stream_options.\(key)", publicCode: "unknown_parameter")
            }
            includeUsage = try RequestFields.optionalBool(optionsObject, "include_usage", param: "stream_options.include_usage") ?? false
        }
        let temperature = try RequestFields.optionalNumber(object, "temperature", in: 0...2)
        let topP = try RequestFields.optionalNumber(object, "top_p", in: 0...1)
        _ = try RequestFields.optionalNumber(object, "presence_penalty", in: -2...2)
        _ = try RequestFields.optionalNumber(object, "frequency_penalty", in: -2...2)
        let seed = try RequestFields.optionalInteger(object, "seed", minimum: Int.min)
        _ = try RequestFields.optionalString(object, "user")
        _ = try RequestFields.optionalString(object, "safety_identifier")
        _ = try RequestFields.optionalString(object, "prompt_cache_key")
        if let metadata = object["metadata"], !metadata.isNull, metadata.objectValue == nil {
            throw RequestFields.typeError("metadata", expected: "an object", got: metadata)
        }
        if let modalities = object["modalities"], !modalities.isNull, modalities != ["text"] {
            throw AFMError(.invalidRequest, "Only the text modality is supported; send [\"text\"] or omit 'modalities'.", param: "modalities", publicCode: "unsupported_parameter")
        }
        if let n = try RequestFields.optionalInteger(object, "n", minimum: 1), n != 1 {
            throw AFMError(.invalidRequest, "n must be 1: this gateway generates one choice per request.", param: "n", publicCode: "unsupported_parameter")
        }
        let completionCap = try RequestFields.optionalInteger(object, "max_completion_tokens", minimum: 1)
        let legacyCap = try RequestFields.optionalInteger(object, "max_tokens", minimum: 1)
        let maxOutputTokens = completionCap ?? legacyCap
        let stop = try RequestFields.stopSequences(object["stop"], param: "stop", maximum: 4, allowString: true)
        let outputFormat = try Self.outputFormat(object["response_format"])
        try RequestFields.checkStopSequences(stop, param: "stop", format: outputFormat)
        let reasoningEffort = try Self.reasoningEffort(object["reasoning_effort"])

        var system: [String] = []
        var conversation = ConversationItems()
        var images = 0
        guard let messages = object["messages"] else { throw RequestFields.missing("messages") }
        guard let list = messages.arrayValue else { throw RequestFields.typeError("messages", expected: "an array of messages", got: messages) }
        guard !list.isEmpty else {
            throw AFMError(.invalidRequest, "'messages' must not be an empty array.", param: "messages", publicCode: "empty_array")
        }
        try RequestFields.checkConversation(list, param: "messages")
        for (index, message) in list.enumerated() {
            try Self.decode(message, param: "messages[\(index)]", system: &system, conversation: &conversation, images: &images)
        }
        let items = try conversation.finished(param: "messages", what: "user message or tool message")

        var toolSet = ToolSet()
        if let tools = object["tools"], !tools.isNull {
            guard let entries = tools.arrayValue else { throw RequestFields.typeError("tools", expected: "an array", got: tools) }
            for (index, entry) in entries.enumerated() {
                let path = "tools[\(index)]"
                guard entry["type"]?.stringValue == "function" else {
                    throw AFMError(
                        .invalidRequest, "Unsupported tool type at '\(path).type': only function tools are served.", param: "\(path).type",
                        publicCode: "invalid_value")
                }
                guard let function = entry["function"]?.objectValue else { throw RequestFields.missing("\(path).function") }
                try toolSet.addFunction(function, path: "\(path).function")
            }
        }
        try toolSet.setChoice(Self.toolChoice(object["tool_choice"]), param: "tool_choice", nameParam: "tool_choice.function.name")

        pipeline = PipelineRequest(
            dialect: .chatCompletions, model: model, system: system, items: items, stream: stream, temperature: temperature, topP: topP,
            maxOutputTokens: maxOutputTokens, toolSet: toolSet,
            parallelToolCalls: try RequestFields.optionalBool(object, "parallel_tool_calls") ?? true, reasoningEffort: reasoningEffort,
            imageCount: images, stopSequences: stop, outputFormat: outputFormat)
        pipeline.seed = seed
    }

    /// One message of `messages` into system text or conversation items.
    private static func decode(
        _ message: JSONValue, param: String, system: inout [String], conversation: inout ConversationItems, images: inout Int
    ) throws(AFMError) {
        guard let object = message.objectValue else { throw RequestFields.typeError(param, expected: "an object", got: message) }
        guard let roleValue = object["role"] else { throw RequestFields.missing("\(param).role") }
        guard let role = roleValue.stringValue else { throw RequestFields.typeError("\(param).role", expected: "a string", got: roleValue) }
        _ = try RequestFields.optionalString(object, "name", param: "\(param).name")
        switch role {
        case "system", "developer":
            let text = try texts(object["content"], param: "\(param).content", required: true).joined(separator: "\n")
            if !text.isEmpty { system.append(text) }
        case "user":
            let parts = try userParts(object["content"], param: "\(param).content", images: &images)
            try conversation.append(.message(role: "user", parts: parts), outputParam: "\(param).content")
        case "assistant":
            let text = try texts(object["content"], param: "\(param).content", required: false, allowRefusal: true).joined()
            // Empty text adds nothing (ConversationItems' rule for every dialect).
            try conversation.append(.message(role: "assistant", parts: [["type": "text", "text": .string(text)]]), outputParam: param)
            var list: [JSONValue] = []
            if let calls = object["tool_calls"], !calls.isNull {
                guard let calls = calls.arrayValue else { throw RequestFields.typeError("\(param).tool_calls", expected: "an array", got: calls) }
                list = calls
                for (index, call) in list.enumerated() {
                    let callParam = "\(param).tool_calls[\(index)]"
                    guard let id = call["id"]?.stringValue, !id.isEmpty else { throw RequestFields.missing("\(callParam).id") }
                    guard call["type"] == nil || call["type"]?.stringValue == "function" else {
                        throw AFMError(.invalidRequest, "'\(callParam).type' must be \"function\".", param: "\(callParam).type", publicCode: "invalid_value")
                    }
                    guard let name = call["function"]?["name"]?.stringValue else { throw RequestFields.missing("\(callParam).function.name") }
                    guard let arguments = call["function"]?["arguments"]?.stringValue else {
                        throw RequestFields.missing("\(callParam).function.arguments")
                    }
                    try conversation.append(.functionCall(callID: id, name: name, arguments: arguments, namespace: nil), outputParam: callParam)
                }
            }
            // `tool_calls: []` is no call: with no content the message says nothing.
            if list.isEmpty, text.isEmpty, object["content"]?.isNull ?? true {
                throw AFMError(
                    .invalidRequest, "'\(param)' needs content or tool_calls.", param: "\(param).content", publicCode: "missing_required_parameter")
            }
        case "tool":
            guard let callValue = object["tool_call_id"] else { throw RequestFields.missing("\(param).tool_call_id") }
            guard let callID = callValue.stringValue else {
                throw RequestFields.typeError("\(param).tool_call_id", expected: "a string", got: callValue)
            }
            let output = try texts(object["content"], param: "\(param).content", required: true).joined(separator: "\n")
            try conversation.append(.functionCallOutput(callID: callID, output: output), outputParam: "\(param).tool_call_id")
        case "function":
            throw AFMError(
                .invalidRequest, "The deprecated 'function' role is not supported; answer tool calls with role 'tool'.", param: "\(param).role",
                publicCode: "invalid_value")
        default:
            throw AFMError(
                .invalidRequest, "Invalid value for '\(param).role': '\(role)'. Supported: developer, system, user, assistant, tool.",
                param: "\(param).role", publicCode: "invalid_value")
        }
    }

    /// Text content: a string or `text` parts (and `refusal` parts in assistant messages, dropped).
    private static func texts(_ content: JSONValue?, param: String, required: Bool, allowRefusal: Bool = false) throws(AFMError) -> [String] {
        guard let content, !content.isNull else {
            if required { throw RequestFields.missing(param) }
            return []
        }
        var none = 0
        return try parts(content, param: param, images: &none, allowImages: false, allowRefusal: allowRefusal).compactMap { $0["text"]?.stringValue }
    }

    /// User content: a string or `text` and `image_url` (data URL) parts.
    private static func userParts(_ content: JSONValue?, param: String, images: inout Int) throws(AFMError) -> [JSONValue] {
        guard let content, !content.isNull else { throw RequestFields.missing(param) }
        return try parts(content, param: param, images: &images, allowImages: true, allowRefusal: false)
    }

    /// Content as the pipeline's parts: a string, or `text` parts, `image_url` parts (data URLs) where
    /// `allowImages`, and `refusal` parts (dropped) where `allowRefusal`.
    private static func parts(
        _ content: JSONValue, param: String, images: inout Int, allowImages: Bool, allowRefusal: Bool
    ) throws(AFMError) -> [JSONValue] {
        if let text = content.stringValue { return [["type": "text", "text": .string(text)]] }
        guard let parts = content.arrayValue else { throw RequestFields.typeError(param, expected: "a string or an array of parts", got: content) }
        try RequestFields.checkContentParts(parts, param: param)
        var result: [JSONValue] = []
        for (index, part) in parts.enumerated() {
            let partParam = "\(param)[\(index)]"
            switch part["type"]?.stringValue {
            case "text":
                guard let text = part["text"]?.stringValue else {
                    throw AFMError(.invalidRequest, "'\(partParam).text' must be a string.", param: "\(partParam).text", publicCode: "invalid_value")
                }
                result.append(["type": "text", "text": .string(text)])
            case "refusal" where allowRefusal:
                continue
            case "image_url" where allowImages:
                guard let url = part["image_url"]?["url"]?.stringValue else {
                    throw AFMError(
                        .invalidRequest, "'\(partParam).image_url.url' must be a data URL string.", param: "\(partParam).image_url.url",
                        publicCode: "invalid_image_url")
                }
                try ImageParts.checkDetail(part["image_url"]?["detail"], param: "\(partParam).image_url.detail")
                images += 1
                result.append(try ImageParts.documentPart(dataURL: url, param: "\(partParam).image_url.url", index: images))
            case "input_audio", "file":
                throw AFMError(
                    .invalidRequest, "Content parts of type '\(part["type"]?.stringValue ?? "")' are not supported: send text or images.",
                    param: "\(partParam).type", publicCode: "unsupported_parameter")
            case let other:
                throw AFMError(
                    .invalidRequest, "Unsupported content part type '\(other ?? "(missing)")' at '\(partParam)'.", param: "\(partParam).type",
                    publicCode: "invalid_value")
            }
        }
        return result
    }

    /// `tool_choice`: `none`, `auto`, `required`, or `{type:function, function:{name}}`.
    private static func toolChoice(_ value: JSONValue?) throws(AFMError) -> ToolSet.Choice {
        guard let value, !value.isNull else { return .auto }
        switch value.stringValue {
        case "auto"?: return .auto
        case "none"?: return .none
        case "required"?: return .required
        case let mode?:
            throw AFMError(
                .invalidRequest, "Invalid tool_choice '\(mode)': use none, auto, required or {\"type\":\"function\",\"function\":{\"name\":…}}.",
                param: "tool_choice", publicCode: "invalid_value")
        case nil:
            guard value["type"]?.stringValue == "function" else {
                throw AFMError(.invalidRequest, "'tool_choice.type' must be \"function\".", param: "tool_choice.type", publicCode: "invalid_value")
            }
            guard let name = value["function"]?["name"]?.stringValue else { throw RequestFields.missing("tool_choice.function.name") }
            return .named(name)
        }
    }

    /// `response_format` as the pipeline's ``OutputFormat``: `text`, `json_object`, or `json_schema` with its
    /// `json_schema` object (name, schema, description, strict), whose rules are the pipeline's.
    private static func outputFormat(_ value: JSONValue?) throws(AFMError) -> OutputFormat {
        guard let value, !value.isNull else { return .text }
        guard let object = value.objectValue, let type = object["type"]?.stringValue else {
            throw RequestFields.typeError("response_format", expected: "an object with a type", got: value)
        }
        switch type {
        case "text":
            return .text
        case "json_object":
            return .jsonObject(param: "response_format")
        case "json_schema":
            guard let schema = object["json_schema"]?.objectValue else { throw RequestFields.missing("response_format.json_schema") }
            return try .jsonSchema(schema, param: "response_format.json_schema")
        default:
            throw AFMError(
                .invalidRequest, "Invalid 'response_format.type': '\(type)'. Supported: text, json_object, json_schema.", param: "response_format.type",
                publicCode: "invalid_value")
        }
    }

    /// `reasoning_effort`: the Responses efforts (the capability check is the pipeline's).
    private static func reasoningEffort(_ value: JSONValue?) throws(AFMError) -> String? {
        guard let value, !value.isNull else { return nil }
        guard let effort = value.stringValue, ["none", "minimal", "low", "medium", "high"].contains(effort) else {
            throw AFMError(
                .invalidRequest, "Invalid 'reasoning_effort': use none, minimal, low, medium or high.", param: "reasoning_effort",
                publicCode: "invalid_value")
        }
        return effort
    }
}
