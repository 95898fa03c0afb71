// SPDX-License-Identifier: Apache-2.0
import AFMCore
import AFMJSON

/// A validated `POST /v1/responses` body.
///
/// Parsing checks every field against `RequestPolicy` and the shapes of `reference/responses-api.md` §1.1–1.2
/// and throws an `AFMError` naming the offending field (`param`) for anything else.
public struct ResponsesRequest: Sendable {
    /// One item of the conversation, normalized.
    public enum Item: Sendable, Hashable {
        /// A user or assistant message; parts are `{"type":"text"}` or `{"type":"image"}` document parts.
        case message(role: String, parts: [JSONValue])
        case functionCall(callID: String, name: String, arguments: String, namespace: String?)
        case functionCallOutput(callID: String, output: String)
        /// A custom tool call replayed; the backend sees it as a function call with `{"input": …}`.
        case customToolCall(callID: String, name: String, input: String)
        case customToolCallOutput(callID: String, output: String)
        /// A reasoning item replayed with its sealed state (nil when the client sent none).
        case reasoning(encryptedContent: String?)
    }

    public var model: String
    /// System text in order: `instructions`, then `system`/`developer` messages.
    public var system: [String]
    public var items: [Item]
    public var stream: Bool
    public var temperature: Double?
    public var topP: Double?
    public var maxOutputTokens: Int?
    /// The normalized tools and tool choice.
    public var toolSet: ToolSet
    /// `tools` and `tool_choice` as sent, for echoing in the response object.
    public var tools: [JSONValue]
    public var toolChoice: JSONValue
    public var parallelToolCalls: Bool
    /// `reasoning.effort` as sent (nil when absent or null).
    public var reasoningEffort: String?
    /// `truncation`: `auto` drops the oldest complete turns until the input fits; `disabled` refuses instead.
    public var truncationAuto: Bool
    /// How many `input_image` parts the whole history carries.
    public var imageCount: Int
    /// The form the answer must take (`text.format`): text, any JSON object, or JSON matching a schema.
    public var outputFormat: OutputFormat
    /// Warnings for the `x-afm-warning` response headers (dropped tools, schema keywords kept only as text).
    public var warnings: [String] { toolSet.warnings + outputFormat.warnings }
    public var instructions: String?
    /// The raw body, for echoing accepted-and-ignored fields in the response object.
    public var body: JSONObject

    /// Parses and validates a request body.
    ///
    /// - Throws: `AFMError` (400) with `param` set to the offending field.
    public init(body bytes: [UInt8]) throws(AFMError) {
        let value: JSONValue
        do {
            value = try JSONParser.parse(bytes, limits: .init(maxDepth: 64))
        } catch {
            let code = error.kind == .depthLimitExceeded ? "nesting_too_deep" : "invalid_json"
            throw AFMError(.invalidRequest, "The request body is not valid JSON: \(error.message)", publicCode: code)
        }
        guard let object = value.objectValue else {
            throw AFMError(.invalidRequest, "The request body must be a JSON object, not \(value.typeName).", publicCode: "invalid_json")
        }
        try self.init(object: object)
    }

    /// Validates an already parsed body.
    public init(object: JSONObject) throws(AFMError) {
        for (key, value) in object {
            switch RequestPolicy.disposition(of: key) {
            case nil:
                throw AFMError(.invalidRequest, "Unknown parameter: '\(key)'.", param: key, publicCode: "unknown_parameter")
            case .rejected(let code, let message)?:
                if key == "background", value == .bool(false) { continue }
                if value.isNull { continue }
                throw AFMError(.invalidRequest, message, param: key, publicCode: code)
            case .supported?, .ignored?:
                continue
            }
        }
        body = object

        guard let model = object["model"] else {
            throw AFMError(.invalidRequest, "Missing required parameter: 'model'.", param: "model", publicCode: "missing_required_parameter")
        }
        guard let modelName = model.stringValue, !modelName.isEmpty, modelName.utf8.count <= 256 else {
            throw Self.typeError("model", expected: "a non-empty string of at most 256 bytes", got: model)
        }
        self.model = modelName

        if let store = object["store"], !store.isNull {
            guard let flag = store.boolValue else { throw Self.typeError("store", expected: "a boolean", got: store) }
            if flag {
                throw AFMError(
                    .invalidRequest, "store: true is not supported: this gateway keeps no responses. Send store: false or omit it.",
                    param: "store", publicCode: "unsupported_parameter")
            }
        }
        stream = try Self.optionalBool(object, "stream") ?? false
        parallelToolCalls = try Self.optionalBool(object, "parallel_tool_calls") ?? true
        temperature = try Self.optionalNumber(object, "temperature", in: 0...2)
        topP = try Self.optionalNumber(object, "top_p", in: 0...1)
        if let cap = object["max_output_tokens"], !cap.isNull {
            guard let number = cap.numberValue, number.isInteger, let tokens = number.intValue else {
                throw Self.typeError("max_output_tokens", expected: "an integer", got: cap)
            }
            guard tokens >= 1 else {
                throw AFMError(
                    .invalidRequest, "Invalid 'max_output_tokens': expected a value >= 1, but got \(number.literal).",
                    param: "max_output_tokens", publicCode: "integer_below_min_value")
            }
            maxOutputTokens = tokens
        } else {
            maxOutputTokens = nil
        }
        if let topLogprobs = object["top_logprobs"], !topLogprobs.isNull, topLogprobs.numberValue?.int64Value != 0 {
            throw AFMError(.invalidRequest, "top_logprobs is not supported; send 0 or omit it.", param: "top_logprobs", publicCode: "unsupported_parameter")
        }
        if let text = object["text"], !text.isNull {
            guard let textObject = text.objectValue else { throw Self.typeError("text", expected: "an object", got: text) }
            outputFormat = try OutputFormat.responses(textObject["format"])
        } else {
            outputFormat = .text
        }

        var system: [String] = []
        if let instructions = object["instructions"], !instructions.isNull {
            guard let text = instructions.stringValue else { throw Self.typeError("instructions", expected: "a string", got: instructions) }
            self.instructions = text
            if !text.isEmpty { system.append(text) }
        } else {
            self.instructions = nil
        }

        guard let input = object["input"] else {
            throw AFMError(.invalidRequest, "Missing required parameter: 'input'.", param: "input", publicCode: "missing_required_parameter")
        }
        var items: [Item] = []
        switch input {
        case .string(let text):
            items.append(.message(role: "user", parts: [["type": "text", "text": .string(text)]]))
            imageCount = 0
        case .array(let list):
            guard !list.isEmpty else {
                throw AFMError(.invalidRequest, "'input' must not be an empty array.", param: "input", publicCode: "empty_array")
            }
            var images = 0
            var callIDs = Set<String>()
            for (index, element) in list.enumerated() {
                let param = "input[\(index)]"
                guard let item = try Self.parseItem(element, param: param, system: &system, images: &images) else { continue }
                switch item {
                case .functionCall(let callID, _, _, _), .customToolCall(let callID, _, _):
                    callIDs.insert(callID)
                case .functionCallOutput(let callID, _), .customToolCallOutput(let callID, _):
                    guard callIDs.contains(callID) else {
                        throw AFMError(
                            .invalidRequest, "No tool call found for the output with call_id '\(callID)': every output must follow the call it answers.",
                            param: "\(param).call_id", publicCode: "invalid_value")
                    }
                default:
                    break
                }
                items.append(item)
            }
            imageCount = images
        default:
            throw Self.typeError("input", expected: "a string or an array of items", got: input)
        }
        guard items.contains(where: {
            switch $0 {
            case .message(let role, _): role == "user"
            case .reasoning: false
            default: true
            }
        }) else {
            throw AFMError(.invalidRequest, "'input' must contain at least one user message or tool output.", param: "input")
        }
        self.system = system
        self.items = items

        toolSet = try ToolSet(tools: object["tools"], choice: object["tool_choice"])
        tools = object["tools"]?.arrayValue ?? []
        toolChoice = object["tool_choice"]?.nonNull ?? "auto"

        if let reasoning = object["reasoning"], !reasoning.isNull {
            guard let reasoningObject = reasoning.objectValue else { throw Self.typeError("reasoning", expected: "an object", got: reasoning) }
            if let effort = reasoningObject["effort"], !effort.isNull {
                guard let name = effort.stringValue else { throw Self.typeError("reasoning.effort", expected: "a string", got: effort) }
                guard ["none", "minimal", "low", "medium", "high", "xhigh", "max"].contains(name) else {
                    throw AFMError(
                        .invalidRequest, "Invalid 'reasoning.effort': '\(name)'. Supported: none, low, medium, high.",
                        param: "reasoning.effort", publicCode: "invalid_value")
                }
                reasoningEffort = name
            } else {
                reasoningEffort = nil
            }
        } else {
            reasoningEffort = nil
        }
        if let truncation = object["truncation"], !truncation.isNull {
            guard let mode = truncation.stringValue, mode == "auto" || mode == "disabled" else {
                throw AFMError(.invalidRequest, "Invalid 'truncation': use \"auto\" or \"disabled\".", param: "truncation", publicCode: "invalid_value")
            }
            truncationAuto = mode == "auto"
        } else {
            truncationAuto = false
        }
        if let include = object["include"], !include.isNull {
            guard let list = include.arrayValue, list.allSatisfy({ $0.stringValue != nil }) else {
                throw Self.typeError("include", expected: "an array of strings", got: include)
            }
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

    private static func optionalBool(_ object: JSONObject, _ key: String) throws(AFMError) -> Bool? {
        guard let value = object[key], !value.isNull else { return nil }
        guard let flag = value.boolValue else { throw typeError(key, expected: "a boolean", got: value) }
        return flag
    }

    private static func optionalNumber(_ object: JSONObject, _ key: String, in range: ClosedRange<Double>) throws(AFMError) -> Double? {
        guard let value = object[key], !value.isNull else { return nil }
        guard let number = value.numberValue?.doubleValue else { throw typeError(key, expected: "a number", got: value) }
        guard range.contains(number) else {
            throw AFMError(
                .invalidRequest, "Invalid '\(key)': expected a value between \(range.lowerBound) and \(range.upperBound).",
                param: key, publicCode: "invalid_value")
        }
        return number
    }

    static func typeError(_ param: String, expected: String, got value: JSONValue) -> AFMError {
        AFMError(
            .invalidRequest, "Invalid type for '\(param)': expected \(expected), but got \(value.typeName).",
            param: param, publicCode: "invalid_type")
    }
}
