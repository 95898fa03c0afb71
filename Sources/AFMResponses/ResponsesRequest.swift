// SPDX-License-Identifier: Apache-2.0
import AFMCore
import AFMJSON

/// A validated `POST /v1/responses` body.
///
/// Parsing checks every field against `RequestPolicy` and the shapes of `reference/responses-api.md` §1.1–1.2
/// and throws an `AFMError` naming the offending field (`param`) for anything else.
public struct ResponsesRequest: Sendable {
    public typealias Item = PipelineRequest.Item

    /// The request the pipeline serves.
    public var pipeline: PipelineRequest
    /// `tools` and `tool_choice` as sent, for echoing in the response object.
    public var tools: [JSONValue]
    public var toolChoice: JSONValue
    public var instructions: String?
    /// The raw body, for echoing accepted-and-ignored fields in the response object.
    public var body: JSONObject

    public var model: String { pipeline.model }
    /// System text in order: `instructions`, then `system`/`developer` messages.
    public var system: [String] { pipeline.system }
    public var items: [Item] { pipeline.items }
    public var stream: Bool { pipeline.stream }
    public var temperature: Double? { pipeline.temperature }
    public var topP: Double? { pipeline.topP }
    public var maxOutputTokens: Int? { pipeline.maxOutputTokens }
    /// The normalized tools and tool choice.
    public var toolSet: ToolSet { pipeline.toolSet }
    public var parallelToolCalls: Bool { pipeline.parallelToolCalls }
    /// `reasoning.effort` as sent (nil when absent or null).
    public var reasoningEffort: String? { pipeline.reasoningEffort }
    /// `truncation`: `auto` drops the oldest complete turns until the input fits; `disabled` refuses instead.
    public var truncationAuto: Bool { pipeline.truncationAuto }
    /// How many `input_image` parts the whole history carries.
    public var imageCount: Int { pipeline.imageCount }
    /// The form the answer must take (`text.format`): text, any JSON object, or JSON matching a schema.
    public var outputFormat: OutputFormat { pipeline.outputFormat }
    /// Warnings for the `x-afm-warning` response headers.
    public var warnings: [String] { pipeline.warnings }

    /// What the response object echoes of this request.
    public var echo: ResponseBuilder.Echo {
        ResponseBuilder.Echo(body: body, instructions: instructions, tools: tools, toolChoice: toolChoice)
    }

    /// Parses and validates a request body.
    ///
    /// - Throws: `AFMError` (400) with `param` set to the offending field.
    public init(body bytes: [UInt8]) throws(AFMError) {
        try self.init(object: RequestFields.object(bytes))
    }

    /// Validates an already parsed body.
    public init(object: JSONObject) throws(AFMError) {
        try RequestPolicy.table.check(object)
        body = object

        let model = try RequestFields.model(object)
        try RequestFields.checkStore(object)
        let stream = try RequestFields.optionalBool(object, "stream") ?? false
        let parallelToolCalls = try RequestFields.optionalBool(object, "parallel_tool_calls") ?? true
        let temperature = try RequestFields.optionalNumber(object, "temperature", in: 0...2)
        let topP = try RequestFields.optionalNumber(object, "top_p", in: 0...1)
        let maxOutputTokens = try RequestFields.optionalInteger(object, "max_output_tokens", minimum: 1)
        if let topLogprobs = object["top_logprobs"], !topLogprobs.isNull, topLogprobs.numberValue?.int64Value != 0 {
            throw AFMError(.invalidRequest, "top_logprobs is not supported; send 0 or omit it.", param: "top_logprobs", publicCode: "unsupported_parameter")
        }
        var outputFormat = OutputFormat.text
        if let text = object["text"], !text.isNull {
            guard let textObject = text.objectValue else { throw RequestFields.typeError("text", expected: "an object", got: text) }
            outputFormat = try OutputFormat.responses(textObject["format"])
        }

        var system: [String] = []
        if let instructions = object["instructions"], !instructions.isNull {
            guard let text = instructions.stringValue else { throw RequestFields.typeError("instructions", expected: "a string", got: instructions) }
            self.instructions = text
            if !text.isEmpty { system.append(text) }
        } else {
            self.instructions = nil
        }

        guard let input = object["input"] else { throw RequestFields.missing("input") }
        var conversation = ConversationItems()
        let imageCount: Int
        switch input {
        case .string(let text):
            try conversation.append(.message(role: "user", parts: [["type": "text", "text": .string(text)]]), outputParam: "input")
            imageCount = 0
        case .array(let list):
            guard !list.isEmpty else {
                throw AFMError(.invalidRequest, "'input' must not be an empty array.", param: "input", publicCode: "empty_array")
            }
            try RequestFields.checkConversation(list, param: "input")
            var images = 0
            for (index, element) in list.enumerated() {
                let param = "input[\(index)]"
                guard let item = try Self.parseItem(element, param: param, system: &system, images: &images) else { continue }
                if case .message = item {
                    try conversation.append(item, outputParam: "\(param).content")
                } else {
                    try conversation.append(item, outputParam: "\(param).call_id")
                }
            }
            imageCount = images
        default:
            throw RequestFields.typeError("input", expected: "a string or an array of items", got: input)
        }
        let items = try conversation.finished(param: "input", what: "user message or tool output")

        let toolSet = try ToolSet(tools: object["tools"], choice: object["tool_choice"])
        tools = Self.echoedTools(object["tools"]?.arrayValue ?? [])
        toolChoice = object["tool_choice"]?.nonNull ?? "auto"

        var reasoningEffort: String?
        if let reasoning = object["reasoning"], !reasoning.isNull {
            guard let reasoningObject = reasoning.objectValue else { throw RequestFields.typeError("reasoning", expected: "an object", got: reasoning) }
            if let effort = reasoningObject["effort"], !effort.isNull {
                guard let name = effort.stringValue else { throw RequestFields.typeError("reasoning.effort", expected: "a string", got: effort) }
                guard ["none", "minimal", "low", "medium", "high", "xhigh", "max"].contains(name) else {
                    throw AFMError(
                        .invalidRequest, "Invalid 'reasoning.effort': '\(name)'. Supported: none, low, medium, high.",
                        param: "reasoning.effort", publicCode: "invalid_value")
                }
                reasoningEffort = name
            }
        }
        var truncationAuto = false
        if let truncation = object["truncation"], !truncation.isNull {
            guard let mode = truncation.stringValue, mode == "auto" || mode == "disabled" else {
                throw AFMError(.invalidRequest, "Invalid 'truncation': use \"auto\" or \"disabled\".", param: "truncation", publicCode: "invalid_value")
            }
            truncationAuto = mode == "auto"
        }
        if let include = object["include"], !include.isNull {
            guard let list = include.arrayValue, list.allSatisfy({ $0.stringValue != nil }) else {
                throw RequestFields.typeError("include", expected: "an array of strings", got: include)
            }
        }
        pipeline = PipelineRequest(
            dialect: .responses, model: model, system: system, items: items, stream: stream, temperature: temperature, topP: topP,
            maxOutputTokens: maxOutputTokens, toolSet: toolSet, parallelToolCalls: parallelToolCalls, reasoningEffort: reasoningEffort,
            truncationAuto: truncationAuto, imageCount: imageCount, outputFormat: outputFormat)
    }

    /// The tools as the response object echoes them: a function tool with every member the published schemas
    /// require (`description`, `parameters` and `strict`, null when the client sent none), others as sent.
    static func echoedTools(_ tools: [JSONValue]) -> [JSONValue] {
        tools.map { tool in
            guard var object = tool.objectValue, object["type"] == "function" else { return tool }
            for key in ["description", "parameters", "strict"] where object[key] == nil { object[key] = .null }
            return .object(object)
        }
    }

    private static func parseItem(_ element: JSONValue, param: String, system: inout [String], images: inout Int) throws(AFMError) -> Item? {
        guard let item = element.objectValue else { throw typeError(param, expected: "an object", got: element) }
        let type = item["type"]?.stringValue ?? (item["role"] != nil ? "message" : nil)
        switch type {
        case "message":
            guard let role = item["role"]?.stringValue else {
                throw AFMError(.invalidRequest, "Missing required parameter: '\(param).role'.", param: "\(param).role", publicCode: "missing_required_parameter")
            }
            guard ["user", "assistant", "system", "developer"].contains(role) else {
                throw AFMError(
                    .invalidRequest, "Invalid value for '\(param).role': '\(role)'. Supported: user, assistant, system, developer.",
                    param: "\(param).role", publicCode: "invalid_value")
            }
            let parts = try parseContent(item["content"], role: role, param: "\(param).content", images: &images)
            if role == "system" || role == "developer" {
                let text = parts.compactMap { $0["text"]?.stringValue }.joined(separator: "\n")
                if !text.isEmpty { system.append(text) }
                return nil
            }
            return .message(role: role, parts: parts)
        case "function_call":
            guard let callID = item["call_id"]?.stringValue, let name = item["name"]?.stringValue,
                let arguments = item["arguments"]?.stringValue
            else {
                throw AFMError(.invalidRequest, "'\(param)' must have string call_id, name and arguments.", param: param, publicCode: "invalid_value")
            }
            let namespace = item["namespace"]?.stringValue
            return .functionCall(callID: callID, name: name, arguments: arguments, namespace: namespace)
        case "function_call_output":
            guard let callID = item["call_id"]?.stringValue else {
                throw AFMError(.invalidRequest, "'\(param).call_id' must be a string.", param: "\(param).call_id", publicCode: "invalid_value")
            }
            let output = try toolOutput(item["output"], param: "\(param).output")
            return .functionCallOutput(callID: callID, output: output)
        case "custom_tool_call":
            guard let callID = item["call_id"]?.stringValue, let name = item["name"]?.stringValue, let input = item["input"]?.stringValue else {
                throw AFMError(.invalidRequest, "'\(param)' must have string call_id, name and input.", param: param, publicCode: "invalid_value")
            }
            return .customToolCall(callID: callID, name: name, input: input)
        case "custom_tool_call_output":
            guard let callID = item["call_id"]?.stringValue else {
                throw AFMError(.invalidRequest, "'\(param).call_id' must be a string.", param: "\(param).call_id", publicCode: "invalid_value")
            }
            return .customToolCallOutput(callID: callID, output: try toolOutput(item["output"], param: "\(param).output"))
        case "reasoning":
            let encrypted = item["encrypted_content"]
            guard encrypted == nil || encrypted?.isNull == true || encrypted?.stringValue != nil else {
                throw typeError("\(param).encrypted_content", expected: "a string or null", got: encrypted ?? nil)
            }
            if let summary = item["summary"], !summary.isNull, summary.arrayValue == nil {
                throw typeError("\(param).summary", expected: "an array", got: summary)
            }
            return .reasoning(encryptedContent: encrypted?.stringValue)
        case "item_reference":
            throw AFMError(
                .invalidRequest, "item_reference needs stored items; this gateway stores nothing. Send the item itself.",
                param: "\(param).type", publicCode: "unsupported_parameter")
        case let other:
            throw AFMError(
                .invalidRequest, "Unsupported input item type '\(other ?? "(missing)")' at '\(param)'.",
                param: "\(param).type", publicCode: "invalid_value")
        }
    }

    /// A tool output: a string, or a list of `input_text` parts (joined); images in tool outputs are not supported.
    private static func toolOutput(_ value: JSONValue?, param: String) throws(AFMError) -> String {
        if let text = value?.stringValue { return text }
        guard let parts = value?.arrayValue else {
            throw AFMError(.invalidRequest, "'\(param)' must be a string or an array of input_text parts.", param: param, publicCode: "invalid_value")
        }
        try RequestFields.checkContentParts(parts, param: param)
        var texts: [String] = []
        for (index, part) in parts.enumerated() {
            guard part["type"]?.stringValue == "input_text", let text = part["text"]?.stringValue else {
                throw AFMError(.invalidRequest, "'\(param)[\(index)]' must be an input_text part.", param: "\(param)[\(index)]", publicCode: "invalid_value")
            }
            texts.append(text)
        }
        return texts.joined(separator: "\n")
    }

    private static func parseContent(_ content: JSONValue?, role: String, param: String, images: inout Int) throws(AFMError) -> [JSONValue] {
        guard let content else {
            throw AFMError(.invalidRequest, "Missing required parameter: '\(param)'.", param: param, publicCode: "missing_required_parameter")
        }
        if let text = content.stringValue { return [["type": "text", "text": .string(text)]] }
        guard let parts = content.arrayValue else { throw typeError(param, expected: "a string or an array of parts", got: content) }
        try RequestFields.checkContentParts(parts, param: param)
        var result: [JSONValue] = []
        for (index, part) in parts.enumerated() {
            let partParam = "\(param)[\(index)]"
            guard let type = part["type"]?.stringValue else {
                throw AFMError(.invalidRequest, "Missing required parameter: '\(partParam).type'.", param: "\(partParam).type", publicCode: "missing_required_parameter")
            }
            switch type {
            case "input_text", "output_text", "text":
                guard let text = part["text"]?.stringValue else {
                    throw AFMError(.invalidRequest, "'\(partParam).text' must be a string.", param: "\(partParam).text", publicCode: "invalid_value")
                }
                if type == "output_text" && role != "assistant" {
                    throw AFMError(.invalidRequest, "output_text parts belong to assistant messages.", param: "\(partParam).type", publicCode: "invalid_value")
                }
                result.append(["type": "text", "text": .string(text)])
            case "refusal":
                continue
            case "input_image":
                guard role == "user" else {
                    throw AFMError(.invalidRequest, "input_image parts belong to user messages.", param: "\(partParam).type", publicCode: "invalid_value")
                }
                images += 1
                result.append(try ImageParts.documentPart(part, param: partParam, index: images))
            case "input_file":
                throw AFMError(
                    .invalidRequest, "input_file is not supported: send the file's text as input_text.",
                    param: "\(partParam).type", publicCode: "unsupported_parameter")
            default:
                throw AFMError(.invalidRequest, "Unsupported content part type '\(type)'.", param: "\(partParam).type", publicCode: "invalid_value")
            }
        }
        return result
    }

    static func typeError(_ param: String, expected: String, got value: JSONValue) -> AFMError {
        RequestFields.typeError(param, expected: expected, got: value)
    }
}
