// SPDX-License-Identifier: Apache-2.0
import AFMBackendKit
import Foundation

/// A generation request document (docs/backend-abi.md §8.2), validated and ready to be written as an upstream
/// request body in either protocol.
///
/// | ABI request              | Responses body                                  | Chat Completions body                         |
/// |--------------------------|-------------------------------------------------|-----------------------------------------------|
/// | `system[]`               | `instructions` (joined by blank lines)          | one leading `system` message                  |
/// | user/assistant `message` | `message` items (`input_text`/`output_text`)    | `user`/`assistant` messages                   |
/// | `image` part             | `input_image` with a data URL                   | `image_url` part with a data URL              |
/// | `function_call`          | `function_call` item                            | `tool_calls` on the assistant message         |
/// | `function_call_output`   | `function_call_output` item                     | `tool` message                                |
/// | `reasoning` (our state)  | `reasoning` item: its `encrypted_content`/text  | `reasoning_content` on the next assistant msg |
/// | `tools`                  | `function` tools (`namespace__name` if namespaced) | `function` tools (same naming)             |
/// | `tool_choice`            | `auto`/`none`/`required`/`{type,name}`          | `auto`/`none`/`required`/`{type,function}`    |
/// | `max_output_tokens`      | `max_output_tokens`                             | `max_tokens`                                  |
/// | `reasoning_effort`       | `reasoning.effort`                              | `reasoning_effort`                            |
/// | `output_format` (1.1)    | `text.format` (`json_schema`/`json_object`)     | `response_format` (`json_schema`/`json_object`) |
///
/// Both bodies ask for a stream (`stream: true`; Chat also `stream_options.include_usage`); Responses bodies
/// also send `store: false` and `include: ["reasoning.encrypted_content"]`, so reasoning survives statelessly.
/// Reasoning from one protocol replayed to the other keeps only what that protocol can carry (a Chat upstream
/// gets the text; an encrypted-only Responses blob is dropped for a Chat upstream).
struct UpstreamRequest {
    /// One input item.
    enum Item {
        case message(role: String, parts: [Part])
        case functionCall(callID: String, name: String, arguments: String)
        case functionCallOutput(callID: String, output: String)
        case reasoning(ReasoningState?)
    }

    /// One content part.
    enum Part {
        case text(String)
        case image(dataURL: String)
    }

    /// One function tool (the upstream name flattens a namespace as `namespace__name`).
    struct Tool {
        var upstreamName: String
        var description: String?
        var parameters: Any
    }

    var model: String
    var responseID: String
    var system: [String]
    var items: [Item]
    var tools: [Tool]
    /// `auto`, `none`, `required` or `function` (then `toolName`).
    var toolMode: String
    var toolName: String?
    var parallelToolCalls: Bool?
    var maxOutputTokens: Int?
    var temperature: Double?
    var topP: Double?
    /// The client's sampling seed; Chat Completions upstreams take it (Responses has no seed).
    var seed: Int?
    var reasoningEffort: String?
    var hasImages: Bool
    /// Upstream tool name → the name the host knows (without the namespace prefix).
    var toolNames: [String: String]
    /// The answer's form (ABI 1.1 `output_format`); nil for text.
    var outputFormat: OutputFormat?

    /// A JSON answer the upstream must enforce (its own structured outputs); the host checks it afterwards.
    struct OutputFormat {
        /// `json_object` or `json_schema`.
        var type: String
        var name: String?
        var description: String?
        var strict: Bool?
        /// The normalized schema exactly as the host wrote it (property order kept), for `json_schema`.
        var schema: [UInt8]?
    }

    /// Stands for the schema in a body until the serialized body gets the schema's own bytes (`body(for:…)`).
    private static let schemaPlaceholder = "afm-output-schema-9d3c41"

    /// Validates a parsed request document.
    ///
    /// - Throws: `AFM_ERR_INCOMPATIBLE` for another `request_version`; `AFM_ERR_INVALID_REQUEST` naming the field
    ///   that is malformed.
    ///
    /// - Parameter raw: the document's bytes, for members whose order matters (the output schema).
    init(parsing object: [String: Any], raw: [UInt8]) throws(BackendError) {
        guard let version = JSON.int(object["request_version"]) else {
            throw .invalidRequest("generation request: request_version must be an integer")
        }
        guard version == 1 else {
            throw .incompatible(
                "generation request has request_version \(version); the private-cloud backend reads version 1")
        }
        guard let model = JSON.string(object["model"]) else {
            throw .invalidRequest("generation request: model must be a string")
        }
        self.model = model
        responseID = JSON.string(object["response_id"]) ?? ""
        system = try Self.strings(object["system"], field: "system")
        var items: [Item] = []
        var hasImages = false
        for (index, raw) in try Self.array(object["input"], field: "input").enumerated() {
            guard let item = JSON.object(raw), let type = JSON.string(item["type"]) else {
                throw .invalidRequest("generation request: input[\(index)] must be an object with a type")
            }
            let path = "input[\(index)]"
            switch type {
            case "message":
                let role = JSON.string(item["role"]) ?? "user"
                guard role == "user" || role == "assistant" else {
                    throw .invalidRequest("generation request: \(path).role must be user or assistant")
                }
                var parts: [Part] = []
                if let text = JSON.string(item["content"]) {
                    parts.append(.text(text))
                } else {
                    for (partIndex, rawPart) in try Self.array(item["content"], field: "\(path).content").enumerated() {
                        guard let part = JSON.object(rawPart) else {
                            throw .invalidRequest("generation request: \(path).content[\(partIndex)] must be an object")
                        }
                        switch JSON.string(part["type"]) {
                        case "text":
                            guard let text = JSON.string(part["text"]) else {
                                throw .invalidRequest(
                                    "generation request: \(path).content[\(partIndex)].text must be a string")
                            }
                            parts.append(.text(text))
                        case "image":
                            guard let data = JSON.string(part["data_base64"]) else {
                                throw .invalidRequest(
                                    "generation request: \(path).content[\(partIndex)].data_base64 must be a string")
                            }
                            let mime = JSON.string(part["mime_type"]) ?? "image/png"
                            parts.append(.image(dataURL: "data:\(mime);base64,\(data)"))
                            hasImages = true
                        default:
                            continue
                        }
                    }
                }
                items.append(.message(role: role, parts: parts))
            case "function_call":
                guard let callID = JSON.string(item["call_id"]), let name = JSON.string(item["name"]) else {
                    throw .invalidRequest("generation request: \(path) needs string call_id and name")
                }
                let namespace = JSON.string(item["namespace"])
                items.append(
                    .functionCall(
                        callID: callID, name: Self.upstreamName(name, namespace: namespace),
                        arguments: JSON.string(item["arguments"]) ?? "{}"))
            case "function_call_output":
                guard let callID = JSON.string(item["call_id"]) else {
                    throw .invalidRequest("generation request: \(path).call_id must be a string")
                }
                items.append(.functionCallOutput(callID: callID, output: JSON.string(item["output"]) ?? ""))
            case "reasoning":
                let state = JSON.string(item["state_base64"]).flatMap { Data(base64Encoded: $0) }
                items.append(.reasoning(state.flatMap { ReasoningState(decoding: $0) }))
            default:
                continue  // readers ignore what they do not know
            }
        }
        self.items = items
        self.hasImages = hasImages
        var tools: [Tool] = []
        var toolNames: [String: String] = [:]
        for (index, raw) in try Self.array(object["tools"], field: "tools").enumerated() {
            guard let tool = JSON.object(raw), let name = JSON.string(tool["name"]) else {
                throw .invalidRequest("generation request: tools[\(index)] needs a string name")
            }
            let upstream = Self.upstreamName(name, namespace: JSON.string(tool["namespace"]))
            toolNames[upstream] = name
            let parameters = JSON.object(tool["parameters"]) ?? ["type": "object", "properties": [String: Any]()]
            tools.append(Tool(upstreamName: upstream, description: JSON.string(tool["description"]), parameters: parameters))
        }
        self.tools = tools
        self.toolNames = toolNames
        let choice = JSON.object(object["tool_choice"])
        toolMode = JSON.string(choice?["mode"]) ?? "auto"
        guard ["auto", "none", "required", "function"].contains(toolMode) else {
            throw .invalidRequest("generation request: tool_choice.mode \"\(toolMode)\" is not known")
        }
        toolName = JSON.string(choice?["name"])
        if toolMode == "function" {
            guard let name = toolName else {
                throw .invalidRequest("generation request: tool_choice mode function needs a name")
            }
            toolName = tools.first { toolNames[$0.upstreamName] == name }?.upstreamName ?? name
        }
        parallelToolCalls = JSON.bool(object["parallel_tool_calls"])
        if !JSON.isNullOrMissing(object["max_output_tokens"]) {
            guard let value = JSON.int(object["max_output_tokens"]), value > 0 else {
                throw .invalidRequest("generation request: max_output_tokens must be a positive integer or null")
            }
            maxOutputTokens = value
        }
        temperature = try Self.number(object["temperature"], field: "temperature")
        topP = try Self.number(object["top_p"], field: "top_p")
        if !JSON.isNullOrMissing(object["seed"]) {
            guard let value = JSON.int(object["seed"]) else {
                throw .invalidRequest("generation request: seed must be an integer or null")
            }
            seed = value
        }
        if !JSON.isNullOrMissing(object["reasoning_effort"]) {
            guard let effort = JSON.string(object["reasoning_effort"]),
                ["none", "minimal", "low", "medium", "high", "xhigh"].contains(effort)
            else {
                throw .invalidRequest("generation request: reasoning_effort must be none, low, medium or high")
            }
            reasoningEffort = effort
        }
        if let format = JSON.object(object["output_format"]) {
            switch JSON.string(format["type"]) {
            case "text", nil:
                break
            case "json_object":
                outputFormat = OutputFormat(type: "json_object")
            case "json_schema":
                guard JSON.object(format["schema"]) != nil,
                    let schema = RawJSONMember.value(of: "output_format", in: raw).flatMap({
                        RawJSONMember.value(of: "schema", in: $0)
                    })
                else {
                    throw .invalidRequest("generation request: output_format.schema must be a JSON Schema object")
                }
                outputFormat = OutputFormat(
                    type: "json_schema", name: JSON.string(format["name"]), description: JSON.string(format["description"]),
                    strict: JSON.bool(format["strict"]), schema: schema)
            case let other?:
                throw .invalidRequest("generation request: output_format.type \"\(other)\" is not known")
            }
        }
    }

    // MARK: - Bodies

    /// The upstream request body for `wireProtocol`, naming the upstream's `model`.
    func body(for wireProtocol: WireProtocol, model upstreamModel: String, sendsReasoning: Bool) -> [UInt8] {
        var body: [String: Any]
        switch wireProtocol {
        case .responses: body = responsesBody(model: upstreamModel)
        case .chatCompletions: body = chatBody(model: upstreamModel)
        }
        if !sendsReasoning {
            body["reasoning"] = nil
            body["reasoning_effort"] = nil
        }
        if let outputFormat {
            var format: [String: Any] = ["type": outputFormat.type]
            if outputFormat.type == "json_schema" {
                format["name"] = outputFormat.name ?? "answer"
                format["schema"] = Self.schemaPlaceholder
                if let description = outputFormat.description { format["description"] = description }
                if let strict = outputFormat.strict { format["strict"] = strict }
            }
            switch wireProtocol {
            case .responses:
                body["text"] = ["format": format]
            case .chatCompletions:
                // Chat Completions nests the schema's fields under `json_schema`.
                var responseFormat: [String: Any] = ["type": outputFormat.type]
                if outputFormat.type == "json_schema" {
                    format["type"] = nil
                    responseFormat["json_schema"] = format
                }
                body["response_format"] = responseFormat
            }
        }
        guard
            let data = try? JSONSerialization.data(
                withJSONObject: body, options: [.sortedKeys, .withoutEscapingSlashes])
        else { return Array("{}".utf8) }
        guard let schema = outputFormat?.schema else { return Array(data) }
        return Self.splice(schema, for: "\"" + Self.schemaPlaceholder + "\"", into: Array(data))
    }

    /// Replaces the first occurrence of `placeholder` in `body` by `bytes`.
    private static func splice(_ bytes: [UInt8], for placeholder: String, into body: [UInt8]) -> [UInt8] {
        let needle = Array(placeholder.utf8)
        guard needle.count <= body.count else { return body }
        for start in 0...(body.count - needle.count) where body[start..<start + needle.count].elementsEqual(needle) {
            return Array(body[..<start]) + bytes + Array(body[(start + needle.count)...])
        }
        return body
    }

    private func responsesBody(model: String) -> [String: Any] {
        var body: [String: Any] = [
            "model": model, "stream": true, "store": false, "include": ["reasoning.encrypted_content"],
        ]
        if !system.isEmpty { body["instructions"] = system.joined(separator: "\n\n") }
        var input: [Any] = []
        for item in items {
            switch item {
            case .message(let role, let parts):
                let content: [Any] = parts.map { part in
                    switch part {
                    case .text(let text):
                        return ["type": role == "assistant" ? "output_text" : "input_text", "text": text] as [String: Any]
                    case .image(let url):
                        return ["type": "input_image", "image_url": url, "detail": "auto"]
                    }
                }
                input.append(["type": "message", "role": role, "content": content])
            case .functionCall(let callID, let name, let arguments):
                input.append(["type": "function_call", "call_id": callID, "name": name, "arguments": arguments])
            case .functionCallOutput(let callID, let output):
                input.append(["type": "function_call_output", "call_id": callID, "output": output])
            case .reasoning(let state):
                guard let state, !state.isEmpty else { continue }
                if state.wireProtocol == .chatCompletions && state.text.isEmpty { continue }
                var reasoning: [String: Any] = ["type": "reasoning", "summary": [Any]()]
                if let blob = state.encryptedContent, state.wireProtocol == .responses {
                    reasoning["encrypted_content"] = blob
                }
                if !state.text.isEmpty { reasoning["content"] = [["type": "reasoning_text", "text": state.text]] }
                input.append(reasoning)
            }
        }
        body["input"] = input
        if !tools.isEmpty {
            body["tools"] = tools.map { tool -> [String: Any] in
                var entry: [String: Any] = ["type": "function", "name": tool.upstreamName, "parameters": tool.parameters]
                if let description = tool.description { entry["description"] = description }
                return entry
            }
            if toolMode == "function", let toolName {
                body["tool_choice"] = ["type": "function", "name": toolName]
            } else {
                body["tool_choice"] = toolMode
            }
            if let parallelToolCalls { body["parallel_tool_calls"] = parallelToolCalls }
        }
        if let maxOutputTokens { body["max_output_tokens"] = maxOutputTokens }
        if let temperature { body["temperature"] = temperature }
        if let topP { body["top_p"] = topP }
        if let reasoningEffort { body["reasoning"] = ["effort": reasoningEffort] }
        return body
    }

    private func chatBody(model: String) -> [String: Any] {
        var body: [String: Any] = ["model": model, "stream": true, "stream_options": ["include_usage": true]]
        var messages: [Any] = []
        if !system.isEmpty { messages.append(["role": "system", "content": system.joined(separator: "\n\n")]) }
        var assistant: [String: Any]?
        var pendingReasoning: String?
        func flush() {
            if let open = assistant { messages.append(open) }
            assistant = nil
        }
        func openAssistant() -> [String: Any] {
            var message: [String: Any] = ["role": "assistant"]
            if let pendingReasoning { message["reasoning_content"] = pendingReasoning }
            pendingReasoning = nil
            return message
        }
        for item in items {
            switch item {
            case .message(let role, let parts):
                flush()
                let texts = parts.compactMap { if case .text(let text) = $0 { text } else { nil } }
                if role == "assistant" {
                    var message = openAssistant()
                    message["content"] = texts.joined()
                    assistant = message
                } else if parts.contains(where: { if case .image = $0 { true } else { false } }) {
                    let content: [Any] = parts.map { part in
                        switch part {
                        case .text(let text): return ["type": "text", "text": text] as [String: Any]
                        case .image(let url): return ["type": "image_url", "image_url": ["url": url]]
                        }
                    }
                    messages.append(["role": "user", "content": content])
                } else {
                    messages.append(["role": "user", "content": texts.joined()])
                }
            case .functionCall(let callID, let name, let arguments):
                var message = assistant ?? openAssistant()
                var calls = message["tool_calls"] as? [Any] ?? []
                calls.append(["id": callID, "type": "function", "function": ["name": name, "arguments": arguments]])
                message["tool_calls"] = calls
                if message["content"] == nil { message["content"] = NSNull() }
                assistant = message
            case .functionCallOutput(let callID, let output):
                flush()
                messages.append(["role": "tool", "tool_call_id": callID, "content": output])
            case .reasoning(let state):
                flush()
                if let text = state?.text, !text.isEmpty { pendingReasoning = text }
            }
        }
        flush()
        body["messages"] = messages
        if !tools.isEmpty {
            body["tools"] = tools.map { tool -> [String: Any] in
                var function: [String: Any] = ["name": tool.upstreamName, "parameters": tool.parameters]
                if let description = tool.description { function["description"] = description }
                return ["type": "function", "function": function]
            }
            if toolMode == "function", let toolName {
                body["tool_choice"] = ["type": "function", "function": ["name": toolName]]
            } else {
                body["tool_choice"] = toolMode
            }
            if let parallelToolCalls { body["parallel_tool_calls"] = parallelToolCalls }
        }
        if let maxOutputTokens { body["max_tokens"] = maxOutputTokens }
        if let temperature { body["temperature"] = temperature }
        if let topP { body["top_p"] = topP }
        if let seed { body["seed"] = seed }
        if let reasoningEffort { body["reasoning_effort"] = reasoningEffort }
        return body
    }

    // MARK: - Helpers

    /// The upstream's name for a tool: `namespace__name` when it has a namespace.
    static func upstreamName(_ name: String, namespace: String?) -> String {
        guard let namespace, !namespace.isEmpty else { return name }
        return "\(namespace)__\(name)"
    }

    private static func array(_ value: Any?, field: String) throws(BackendError) -> [Any] {
        if JSON.isNullOrMissing(value) { return [] }
        guard let array = JSON.array(value) else {
            throw .invalidRequest("generation request: \(field) must be an array")
        }
        return array
    }

    private static func strings(_ value: Any?, field: String) throws(BackendError) -> [String] {
        var out: [String] = []
        for (index, item) in try array(value, field: field).enumerated() {
            guard let text = JSON.string(item) else {
                throw .invalidRequest("generation request: \(field)[\(index)] must be a string")
            }
            out.append(text)
        }
        return out
    }

    private static func number(_ value: Any?, field: String) throws(BackendError) -> Double? {
        if JSON.isNullOrMissing(value) { return nil }
        guard !JSON.isBool(value), let number = value as? NSNumber else {
            throw .invalidRequest("generation request: \(field) must be a number or null")
        }
        return number.doubleValue
    }
}
