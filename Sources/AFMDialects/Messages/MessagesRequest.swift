// SPDX-License-Identifier: Apache-2.0
import AFMCore
import AFMJSON
import AFMResponses

/// A `POST /v1/messages` (or `/v1/messages/count_tokens`) body decoded into the pipeline's request.
///
/// This is the whole Anthropic Messages dialect on the way in (`reference/dialects.md` §4). Every field's
/// disposition is in ``policy`` (docs/anthropic-messages.md is checked against it); the shared rules (model,
/// sampling ranges, tools and their schemas, images, tool results answering earlier calls) are the pipeline's.
public struct MessagesRequest: Sendable {
    /// The one table of what Messages does with each top-level field.
    public static let policy = PolicyTable([
        .init("model", .supported, "a served model id or alias"),
        .init("messages", .supported, "user and assistant turns: text, image (base64), tool_use, tool_result blocks"),
        .init("max_tokens", .supported, "required (not for count_tokens); clamped to the model's output budget"),
        .init("system", .supported, "a string or text blocks; Claude Code's billing line is removed"),
        .init("stream", .supported, "true: the event stream (message_start … message_stop)"),
        .init("stop_sequences", .supported, "up to 16, each 1–256 bytes; the text ends before the first one, stop_reason stop_sequence; not with output_config.format"),
        .init("temperature", .supported, "0 to 1"),
        .init("top_p", .supported, "0 to 1"),
        .init("tools", .supported, "custom tools with input_schema in the enforceable subset; server tools dropped"),
        .init("tool_choice", .supported, "auto, any, tool (by name), none; disable_parallel_tool_use"),
        .init("thinking", .supported, "enabled/adaptive: reasoning on models that have it, else 400; disabled"),
        .init("top_k", .supported, "an integer of at least 1, passed to the backend (the local backend samples among the top k)"),
        .init("metadata", .ignored, "user_id"),
        .init("service_tier", .ignored, "answered as standard"),
        .init("cache_control", .ignored, "prompt caching is the backend's own"),
        .init("context_management", .ignored, ""),
        .init("container", .rejected(code: "unsupported_parameter", message: "Containers are not available on this gateway."), ""),
        .init("mcp_servers", .rejected(code: "unsupported_parameter", message: "Remote MCP servers are not available on this gateway."), ""),
        .init(
            "output_config", .supported,
            "format json_schema: enforced and checked (models with structured_output); effort accepted, no effect"),
        .init("output_format", .supported, "the older spelling of output_config.format"),
    ])

    /// What Claude Code puts at the start of its first system block on every request (`x-anthropic-billing-header:
    /// … cch=…;`); it changes every time, so it would defeat the backend's prefix cache (reference §4).
    static let billingLinePrefix = "x-anthropic-billing-header:"

    /// The request the pipeline serves.
    public var pipeline: PipelineRequest

    /// Decodes and validates a body.
    ///
    /// - Parameter counting: the body of `count_tokens` (no `max_tokens`).
    /// - Throws: `AFMError` (400) naming the offending field in `param`.
    public init(body bytes: [UInt8], counting: Bool = false) throws(AFMError) {
        let object = try RequestFields.object(bytes)
        try Self.policy.check(object)
        let model = try RequestFields.model(object)
        let maxTokens = try RequestFields.optionalInteger(object, "max_tokens", minimum: 1)
        if maxTokens == nil && !counting { throw RequestFields.missing("max_tokens") }
        let stream = try RequestFields.optionalBool(object, "stream") ?? false
        let temperature = try RequestFields.optionalNumber(object, "temperature", in: 0...1)
        let topP = try RequestFields.optionalNumber(object, "top_p", in: 0...1)
        let topK = try RequestFields.optionalInteger(object, "top_k", minimum: 1)
        if let metadata = object["metadata"], !metadata.isNull {
            guard let fields = metadata.objectValue else { throw RequestFields.typeError("metadata", expected: "an object", got: metadata) }
            _ = try RequestFields.optionalString(fields, "user_id", param: "metadata.user_id")
        }
        let stop = try RequestFields.stopSequences(object["stop_sequences"], param: "stop_sequences", maximum: 16, allowString: false)
        let reasoningEffort = try Self.reasoningEffort(object["thinking"])
        let outputFormat = try Self.outputFormat(object)
        try RequestFields.checkStopSequences(stop, param: "stop_sequences", format: outputFormat)

        var system: [String] = []
        if let value = object["system"], !value.isNull {
            let text = try Self.systemText(value).joined(separator: "\n")
            if !text.isEmpty { system.append(text) }
        }
        guard let messages = object["messages"] else { throw RequestFields.missing("messages") }
        guard let list = messages.arrayValue else { throw RequestFields.typeError("messages", expected: "an array of messages", got: messages) }
        guard !list.isEmpty else {
            throw AFMError(.invalidRequest, "'messages' must not be an empty array.", param: "messages", publicCode: "empty_array")
        }
        try RequestFields.checkConversation(list, param: "messages")
        var conversation = ConversationItems()
        var images = 0
        for (index, message) in list.enumerated() {
            try Self.decode(message, param: "messages[\(index)]", conversation: &conversation, images: &images)
        }
        let items = try conversation.finished(param: "messages", what: "user message")

        var toolSet = ToolSet()
        if let tools = object["tools"], !tools.isNull {
            guard let entries = tools.arrayValue else { throw RequestFields.typeError("tools", expected: "an array", got: tools) }
            for (index, entry) in entries.enumerated() {
                let path = "tools[\(index)]"
                guard let tool = entry.objectValue else { throw RequestFields.typeError(path, expected: "an object", got: entry) }
                switch tool["type"]?.stringValue {
                case nil, "custom"?:
                    guard tool["input_schema"] != nil else { throw RequestFields.missing("\(path).input_schema") }
                    try toolSet.addFunction(tool, path: path, parametersKey: "input_schema")
                case let server?:
                    // Server tools (web search, code execution, …) run on Anthropic's side.
                    toolSet.drop(hosted: server, path: path)
                }
            }
        }
        var parallelToolCalls = true
        var choice = ToolSet.Choice.auto
        if let value = object["tool_choice"], !value.isNull {
            guard let choiceObject = value.objectValue, let type = choiceObject["type"]?.stringValue else {
                throw RequestFields.typeError("tool_choice", expected: "an object with a type", got: value)
            }
            switch type {
            case "auto": choice = .auto
            case "any": choice = .required
            case "none": choice = .none
            case "tool":
                guard let name = choiceObject["name"]?.stringValue else { throw RequestFields.missing("tool_choice.name") }
                choice = .named(name)
            default:
                throw AFMError(
                    .invalidRequest, "Invalid 'tool_choice.type': '\(type)'. Supported: auto, any, tool, none.", param: "tool_choice.type",
                    publicCode: "invalid_value")
            }
            if try RequestFields.optionalBool(choiceObject, "disable_parallel_tool_use", param: "tool_choice.disable_parallel_tool_use") == true {
                parallelToolCalls = false
            }
        }
        try toolSet.setChoice(choice, param: "tool_choice", nameParam: "tool_choice.name")

        pipeline = PipelineRequest(
            dialect: .messages, model: model, system: system, items: items, stream: stream && !counting, temperature: temperature, topP: topP,
            maxOutputTokens: maxTokens, toolSet: toolSet, parallelToolCalls: parallelToolCalls, reasoningEffort: reasoningEffort,
            imageCount: images, stopSequences: stop, outputFormat: outputFormat)
        pipeline.topK = topK
    }

    /// `output_config.format` (or the older top-level `output_format`): `{"type": "json_schema", "schema": …}`
    /// through the pipeline's structured-output rules; Anthropic's format has no name, so the answer's is `output`.
    private static func outputFormat(_ object: JSONObject) throws(AFMError) -> OutputFormat {
        var format: (value: JSONValue, param: String)?
        if let config = object["output_config"], !config.isNull {
            guard let fields = config.objectValue else {
                throw RequestFields.typeError("output_config", expected: "an object", got: config)
            }
            for (key, _) in fields where key != "format" && key != "effort" {
                throw AFMError(
                    .invalidRequest, "Unknown parameter: 'output_config.\(key)'.", param: "output_config.\(key)",
                    publicCode: "unknown_parameter")
            }
            if let effort = fields["effort"], !effort.isNull {
                guard let level = effort.stringValue, ["low", "medium", "high", "xhigh", "max"].contains(level) else {
                    throw AFMError(
                        .invalidRequest, "Invalid 'output_config.effort': use low, medium, high, xhigh or max.",
                        param: "output_config.effort", publicCode: "invalid_value")
                }
            }
            if let value = fields["format"], !value.isNull { format = (value, "output_config.format") }
        }
        if let value = object["output_format"], !value.isNull {
            guard format == nil else {
                throw AFMError(
                    .invalidRequest, "Give the format once: output_config.format or output_format, not both.",
                    param: "output_format", publicCode: "invalid_value")
            }
            format = (value, "output_format")
        }
        guard let format else { return .text }
        guard var fields = format.value.objectValue, let type = fields["type"]?.stringValue else {
            throw RequestFields.typeError(format.param, expected: "an object with a type", got: format.value)
        }
        guard type == "json_schema" else {
            throw AFMError(
                .invalidRequest, "Invalid '\(format.param).type': '\(type)'. Supported: json_schema.",
                param: "\(format.param).type", publicCode: "invalid_value")
        }
        if fields["name"] == nil { fields["name"] = "output" }
        return try .jsonSchema(fields, param: format.param)
    }

    /// `system`: a string or text blocks, without Claude Code's billing line.
    private static func systemText(_ value: JSONValue) throws(AFMError) -> [String] {
        if let text = value.stringValue { return [withoutBillingLine(text)] }
        guard let blocks = value.arrayValue else { throw RequestFields.typeError("system", expected: "a string or an array of text blocks", got: value) }
        try RequestFields.checkContentParts(blocks, param: "system")
        var texts: [String] = []
        for (index, block) in blocks.enumerated() {
            guard block["type"]?.stringValue == "text", let text = block["text"]?.stringValue else {
                throw AFMError(.invalidRequest, "'system[\(index)]' must be a text block.", param: "system[\(index)]", publicCode: "invalid_value")
            }
            let kept = withoutBillingLine(text)
            if !kept.isEmpty { texts.append(kept) }
        }
        return texts
    }

    /// The text without lines that start with the billing header.
    static func withoutBillingLine(_ text: String) -> String {
        guard text.contains(billingLinePrefix) else { return text }
        return text.split(separator: "\n", omittingEmptySubsequences: false)
            .filter { !$0.trimmingPrefix(while: \.isWhitespace).hasPrefix(billingLinePrefix) }
            .joined(separator: "\n")
    }

    /// `thinking`: `enabled` (with `budget_tokens`) and `adaptive` ask for reasoning, `disabled` for none.
    private static func reasoningEffort(_ value: JSONValue?) throws(AFMError) -> String? {
        guard let value, !value.isNull else { return nil }
        guard let thinking = value.objectValue, let type = thinking["type"]?.stringValue else {
            throw RequestFields.typeError("thinking", expected: "an object with a type", got: value)
        }
        switch type {
        case "disabled":
            return nil
        case "adaptive":
            return "medium"
        case "enabled":
            guard let budget = try RequestFields.optionalInteger(thinking, "budget_tokens", minimum: 1, param: "thinking.budget_tokens") else {
                throw RequestFields.missing("thinking.budget_tokens")
            }
            return budget < 4096 ? "low" : budget < 16384 ? "medium" : "high"
        default:
            throw AFMError(
                .invalidRequest, "Invalid 'thinking.type': '\(type)'. Supported: enabled, adaptive, disabled.", param: "thinking.type",
                publicCode: "invalid_value")
        }
    }

    /// One message: its blocks in order, consecutive text and images as one message item, tool uses as calls and
    /// tool results as outputs.
    private static func decode(_ message: JSONValue, param: String, conversation: inout ConversationItems, images: inout Int) throws(AFMError) {
        guard let object = message.objectValue else { throw RequestFields.typeError(param, expected: "an object", got: message) }
        guard let roleValue = object["role"] else { throw RequestFields.missing("\(param).role") }
        guard let role = roleValue.stringValue, role == "user" || role == "assistant" else {
            throw AFMError(
                .invalidRequest, "Invalid value for '\(param).role': use user or assistant (system text goes in 'system').", param: "\(param).role",
                publicCode: "invalid_value")
        }
        guard let content = object["content"] else { throw RequestFields.missing("\(param).content") }
        if let text = content.stringValue {
            try conversation.append(.message(role: role, parts: [["type": "text", "text": .string(text)]]), outputParam: param)
            return
        }
        guard let blocks = content.arrayValue else { throw RequestFields.typeError("\(param).content", expected: "a string or an array of blocks", got: content) }
        try RequestFields.checkContentParts(blocks, param: "\(param).content")
        // An empty list is an empty message: ConversationItems refuses it for a user message and drops it for an
        // assistant message, like every dialect.
        if blocks.isEmpty { try conversation.append(.message(role: role, parts: []), outputParam: "\(param).content") }
        var parts: [JSONValue] = []
        func flush(_ conversation: inout ConversationItems) throws(AFMError) {
            guard !parts.isEmpty else { return }
            try conversation.append(.message(role: role, parts: parts), outputParam: param)
            parts = []
        }
        for (index, block) in blocks.enumerated() {
            let blockParam = "\(param).content[\(index)]"
            guard let type = block["type"]?.stringValue else { throw RequestFields.missing("\(blockParam).type") }
            switch (type, role) {
            case ("text", _):
                guard let text = block["text"]?.stringValue else { throw RequestFields.missing("\(blockParam).text") }
                parts.append(["type": "text", "text": .string(text)])
            case ("image", "user"):
                images += 1
                parts.append(try image(block, param: blockParam, index: images))
            case ("tool_use", "assistant"):
                try flush(&conversation)
                guard let id = block["id"]?.stringValue, !id.isEmpty else { throw RequestFields.missing("\(blockParam).id") }
                guard let name = block["name"]?.stringValue else { throw RequestFields.missing("\(blockParam).name") }
                guard let input = block["input"], input.objectValue != nil else {
                    throw AFMError(.invalidRequest, "'\(blockParam).input' must be an object.", param: "\(blockParam).input", publicCode: "invalid_type")
                }
                try conversation.append(.functionCall(callID: id, name: name, arguments: input.jsonString, namespace: nil), outputParam: blockParam)
            case ("tool_result", "user"):
                try flush(&conversation)
                guard let id = block["tool_use_id"]?.stringValue else { throw RequestFields.missing("\(blockParam).tool_use_id") }
                var output = try resultText(block["content"], param: "\(blockParam).content")
                if try RequestFields.optionalBool(block.objectValue ?? [:], "is_error", param: "\(blockParam).is_error") == true {
                    // The pipeline's tool output has no error flag; the model reads it from the text.
                    output = "Error: " + output
                }
                try conversation.append(.functionCallOutput(callID: id, output: output), outputParam: "\(blockParam).tool_use_id")
            case ("thinking", "assistant"), ("redacted_thinking", "assistant"):
                // Earlier reasoning carries no state this gateway sealed; it is dropped, as a Responses reasoning item
                // without encrypted content is.
                continue
            case ("document", _), ("search_result", _), ("server_tool_use", _), ("web_search_tool_result", _):
                throw AFMError(
                    .invalidRequest, "Content blocks of type '\(type)' are not supported: send text or images.", param: "\(blockParam).type",
                    publicCode: "unsupported_parameter")
            default:
                throw AFMError(
                    .invalidRequest, "Content blocks of type '\(type)' are not allowed in \(role) messages.", param: "\(blockParam).type",
                    publicCode: "invalid_value")
            }
        }
        try flush(&conversation)
    }

    /// An `image` block with a base64 source.
    private static func image(_ block: JSONValue, param: String, index: Int) throws(AFMError) -> JSONValue {
        guard let source = block["source"]?.objectValue else { throw RequestFields.missing("\(param).source") }
        guard source["type"]?.stringValue == "base64" else {
            throw AFMError(
                .invalidRequest, "Only base64 image sources are supported: this gateway fetches no URLs.", param: "\(param).source.type",
                publicCode: "invalid_image_url")
        }
        guard let mediaType = source["media_type"]?.stringValue, mediaType.hasPrefix("image/") else {
            throw AFMError(.invalidRequest, "'\(param).source.media_type' must be an image type.", param: "\(param).source.media_type", publicCode: "invalid_value")
        }
        guard let data = source["data"]?.stringValue else { throw RequestFields.missing("\(param).source.data") }
        return try ImageParts.documentPart(dataURL: "data:\(mediaType);base64,\(data)", param: "\(param).source.data", index: index)
    }

    /// A tool result's content: a string or text blocks (joined).
    private static func resultText(_ value: JSONValue?, param: String) throws(AFMError) -> String {
        guard let value, !value.isNull else { return "" }
        if let text = value.stringValue { return text }
        guard let blocks = value.arrayValue else { throw RequestFields.typeError(param, expected: "a string or an array of text blocks", got: value) }
        try RequestFields.checkContentParts(blocks, param: param)
        var texts: [String] = []
        for (index, block) in blocks.enumerated() {
            guard block["type"]?.stringValue == "text", let text = block["text"]?.stringValue else {
                throw AFMError(
                    .invalidRequest, "'\(param)[\(index)]' must be a text block: tool results with images are not supported.", param: "\(param)[\(index)]",
                    publicCode: "invalid_value")
            }
            texts.append(text)
        }
        return texts.joined(separator: "\n")
    }
}
