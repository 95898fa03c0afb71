// SPDX-License-Identifier: Apache-2.0
import AFMCore
import AFMJSON
import AFMSchema

/// The tools of a request, normalized for the backend, and the tool choice.
///
/// - `function` tools: their `parameters` must be in the subset constrained decoding can enforce
///   (`ToolSchemaValidator`); unenforced keywords become description text and warnings.
/// - `namespace` tools (MCP servers, as Codex sends them) are expanded into functions whose calls carry the
///   namespace.
/// - `custom` tools (free-form input, e.g. Codex's apply_patch) are offered to the model as a function with one
///   string argument `input`; their calls come back as `custom_tool_call` items.
/// - Hosted tools (`web_search`, `file_search`, …) cannot run here: they are dropped with a warning, and a
///   `tool_choice` naming one is refused.
public struct ToolSet: Sendable {
    /// One tool as the backend sees it.
    public struct Tool: Sendable, Hashable {
        public enum Kind: Sendable, Hashable {
            case function
            case custom
        }
        public var name: String
        public var description: String?
        public var parameters: JSONValue
        public var namespace: String?
        public var kind: Kind
        /// Where the client wrote the parameters (`tools[2].parameters`, `tools[0].function.parameters`,
        /// `tools[1].input_schema`): the `param` of errors about them.
        public var parametersPath: String
        /// The check of a call's arguments against ``parameters``.
        let validator: SchemaInstanceValidator

        init(name: String, description: String?, parameters: JSONValue, namespace: String?, kind: Kind, parametersPath: String) {
            self.name = name
            self.description = description
            self.parameters = parameters
            self.namespace = namespace
            self.kind = kind
            self.parametersPath = parametersPath
            validator = SchemaInstanceValidator(schema: parameters)
        }
    }

    /// What the model may or must call.
    public enum Choice: Sendable, Hashable {
        case auto
        case none
        case required
        case named(String)
    }

    public var tools: [Tool] = []
    public var choice: Choice = .auto
    /// Types of hosted tools that were dropped.
    public var dropped: [String] = []
    /// Human-readable warnings (dropped tools, unenforced schema keywords), sent in `x-afm-warning` headers.
    public var warnings: [String] = []

    /// Hosted tool types clients send routinely; they run on OpenAI's side, so here they are dropped.
    static let hostedTypes: Set<String> = [
        "web_search", "web_search_preview", "web_search_preview_2025_03_11", "file_search", "code_interpreter",
        "image_generation", "local_shell", "shell", "apply_patch", "computer", "computer_use_preview", "mcp",
        "tool_search",
    ]

    public init() {}

    /// Parses Responses `tools` and `tool_choice`.
    ///
    /// - Throws: `AFMError` 400 naming the JSON path of the problem.
    public init(tools value: JSONValue?, choice choiceValue: JSONValue?) throws(AFMError) {
        if let value, !value.isNull {
            guard let list = value.arrayValue else { throw ResponsesRequest.typeError("tools", expected: "an array", got: value) }
            for (index, entry) in list.enumerated() {
                try add(entry, path: "tools[\(index)]", namespace: nil)
            }
        }
        try checkNames()
        choice = try Self.parseChoice(choiceValue, tools: tools, dropped: dropped)
    }

    /// Adds a function tool from any dialect: `name` must be 1–128 characters of a-z, A-Z, 0-9, `_`, `-`, `.`,
    /// and `parameters` (absent or null: no arguments) must be in the schema subset constrained decoding can
    /// enforce. `path` names the tool object (`tools[2]`, `tools[2].function`), `parametersKey` the member that holds
    /// its schema (`parameters`, Anthropic's `input_schema`).
    public mutating func addFunction(
        _ object: JSONObject, path: String, parametersKey: String = "parameters", namespace: String? = nil
    ) throws(AFMError) {
        let name = try Self.name(object, path: path)
        let description = try Self.optionalString(object, "description", path: path)
        let parameters = object[parametersKey]?.nonNull ?? ["type": "object", "properties": [:]]
        let report: ToolSchemaReport
        do {
            report = try ToolSchemaValidator.validate(parameters, path: "\(path).\(parametersKey)")
        } catch {
            throw AFMError(
                .invalidRequest, "Unsupported tool schema at '\(error.path)': \(error.message)", param: error.path,
                publicCode: "invalid_tool_schema")
        }
        warnings += report.warnings
        tools.append(
            Tool(
                name: name, description: description, parameters: report.normalized, namespace: namespace, kind: .function,
                parametersPath: "\(path).\(parametersKey)"))
    }

    /// Drops a tool that runs on the provider's side (a hosted or server tool), with a warning.
    public mutating func drop(hosted type: String, path: String) {
        dropped.append(type)
        warnings.append("\(path): hosted tool '\(type)' is not available on this gateway and was dropped")
    }

    /// Sets the tool choice a dialect decoded, after checking it against the tools: `required` needs a tool, and a
    /// named tool must be among them. Also refuses duplicate tool names.
    ///
    /// - Parameter param: the field of the choice (`tool_choice`), and `nameParam` the field of a named tool.
    public mutating func setChoice(_ choice: Choice, param: String, nameParam: String) throws(AFMError) {
        try checkNames()
        switch choice {
        case .required where tools.isEmpty:
            throw AFMError(.invalidRequest, "\(param) 'required' needs at least one tool.", param: param, publicCode: "invalid_value")
        case .named(let name) where !tools.contains(where: { $0.name == name }):
            throw AFMError(.invalidRequest, "\(param) names '\(name)', which is not among the tools.", param: nameParam, publicCode: "invalid_value")
        default:
            self.choice = choice
        }
    }

    private func checkNames() throws(AFMError) {
        var seen = Set<String>()
        for tool in tools where !seen.insert(tool.name).inserted {
            throw AFMError(.invalidRequest, "Duplicate tool name '\(tool.name)'.", param: "tools", publicCode: "invalid_value")
        }
    }

    private mutating func add(_ entry: JSONValue, path: String, namespace: String?) throws(AFMError) {
        guard let object = entry.objectValue else { throw ResponsesRequest.typeError(path, expected: "an object", got: entry) }
        guard let type = object["type"]?.stringValue else {
            throw AFMError(.invalidRequest, "Missing required parameter: '\(path).type'.", param: "\(path).type", publicCode: "missing_required_parameter")
        }
        switch type {
        case "function":
            try addFunction(object, path: path, namespace: namespace)
        case "custom":
            let name = try Self.name(object, path: path)
            var description = try Self.optionalString(object, "description", path: path) ?? ""
            // A grammar or format the client attached cannot be enforced; the model sees it as text.
            if let format = object["format"], !format.isNull {
                description += (description.isEmpty ? "" : "\n\n") + "Input format: \(format.jsonString)"
            }
            let parameters: JSONValue = [
                "type": "object", "properties": ["input": ["type": "string", "description": "The raw input of the tool."]],
                "required": ["input"], "additionalProperties": false,
            ]
            tools.append(
                Tool(
                    name: name, description: description.isEmpty ? nil : description, parameters: parameters, namespace: namespace,
                    kind: .custom, parametersPath: path))
        case "namespace":
            guard namespace == nil else {
                throw AFMError(.invalidRequest, "Namespaces cannot be nested ('\(path)').", param: path, publicCode: "invalid_value")
            }
            let name = try Self.name(object, path: path)
            guard let inner = object["tools"]?.arrayValue else {
                throw AFMError(.invalidRequest, "'\(path).tools' must be an array of tools.", param: "\(path).tools", publicCode: "invalid_type")
            }
            for (index, tool) in inner.enumerated() { try add(tool, path: "\(path).tools[\(index)]", namespace: name) }
        case let hosted where Self.hostedTypes.contains(hosted):
            drop(hosted: hosted, path: path)
        default:
            throw AFMError(.invalidRequest, "Unsupported tool type '\(type)' at '\(path)'.", param: "\(path).type", publicCode: "invalid_value")
        }
    }

    private static func name(_ object: JSONObject, path: String) throws(AFMError) -> String {
        guard let name = object["name"]?.stringValue else {
            throw AFMError(.invalidRequest, "Missing required parameter: '\(path).name'.", param: "\(path).name", publicCode: "missing_required_parameter")
        }
        guard !name.isEmpty, name.utf8.count <= 128,
            name.unicodeScalars.allSatisfy({ ($0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0))) || $0 == "_" || $0 == "-" || $0 == "." })
        else {
            throw AFMError(
                .invalidRequest, "Invalid '\(path).name': use 1–128 characters of a-z, A-Z, 0-9, '_', '-' and '.'.",
                param: "\(path).name", publicCode: "invalid_value")
        }
        return name
    }

    private static func optionalString(_ object: JSONObject, _ key: String, path: String) throws(AFMError) -> String? {
        guard let value = object[key], !value.isNull else { return nil }
        guard let text = value.stringValue else { throw ResponsesRequest.typeError("\(path).\(key)", expected: "a string", got: value) }
        return text
    }

    private static func parseChoice(_ value: JSONValue?, tools: [Tool], dropped: [String]) throws(AFMError) -> Choice {
        guard let value, !value.isNull else { return .auto }
        if let mode = value.stringValue {
            switch mode {
            case "auto": return .auto
            case "none": return .none
            case "required":
                guard !tools.isEmpty else {
                    throw AFMError(.invalidRequest, "tool_choice 'required' needs at least one tool.", param: "tool_choice", publicCode: "invalid_value")
                }
                return .required
            default:
                throw AFMError(.invalidRequest, "Invalid tool_choice '\(mode)': use auto, none, required or {\"type\":\"function\",\"name\":…}.", param: "tool_choice", publicCode: "invalid_value")
            }
        }
        guard let object = value.objectValue, let type = object["type"]?.stringValue else {
            throw ResponsesRequest.typeError("tool_choice", expected: "a string or an object with a type", got: value)
        }
        switch type {
        case "function", "custom":
            guard let name = object["name"]?.stringValue else {
                throw AFMError(.invalidRequest, "Missing required parameter: 'tool_choice.name'.", param: "tool_choice.name", publicCode: "missing_required_parameter")
            }
            guard tools.contains(where: { $0.name == name }) else {
                throw AFMError(.invalidRequest, "tool_choice names '\(name)', which is not among the tools.", param: "tool_choice.name", publicCode: "invalid_value")
            }
            return .named(name)
        case let hosted where dropped.contains(hosted) || hostedTypes.contains(hosted):
            throw AFMError(
                .invalidRequest, "tool_choice names the hosted tool '\(hosted)', which is not available on this gateway.",
                param: "tool_choice", publicCode: "unsupported_tool")
        default:
            throw AFMError(.invalidRequest, "Unsupported tool_choice type '\(type)'.", param: "tool_choice.type", publicCode: "invalid_value")
        }
    }

    /// The `tools` array of the generation request document.
    var documentTools: JSONValue {
        .array(
            tools.map { tool in
                [
                    "name": .string(tool.name), "description": tool.description.map(JSONValue.string) ?? nil,
                    "parameters": tool.parameters, "namespace": tool.namespace.map(JSONValue.string) ?? nil,
                ]
            })
    }

    /// The `tool_choice` of the generation request document.
    var documentChoice: JSONValue {
        switch choice {
        case .auto: ["mode": "auto"]
        case .none: ["mode": "none"]
        case .required: ["mode": "required"]
        case .named(let name): ["mode": "function", "name": .string(name)]
        }
    }

    /// The tool a call names, if any.
    func tool(named name: String) -> Tool? { tools.first { $0.name == name } }

    /// The deepest nesting of a call's arguments, as for a structured answer.
    static let maximumArgumentsDepth = OutputFormat.maximumAnswerDepth

    /// Checks a finished call's arguments (JSON text) against its tool's parameters, as a structured answer is
    /// checked against its schema (docs/responses-api.md, "Tools"): every bound the subset has, number bounds
    /// included, from any backend. Empty arguments are no arguments (`{}`).
    ///
    /// A call of a tool the request does not offer is delivered, with no schema to check it against: the client's
    /// runtime is what can recover from it — AFMAgent answers it with an "unknown tool" output the model reads on its
    /// next step (docs/agents.md), LangGraph's `ToolNode` with an error message — and failing the response would throw
    /// away the model's answer with it. vLLM and Ollama pass such calls through as well; the local backend's grammar
    /// only lets a model name offered tools. Its arguments must still be a JSON object, as every tool's are: every
    /// dialect delivers them as one (Messages' `input`), and a client parses them as one.
    ///
    /// - Returns: nil when the arguments are valid, else the `invalid_structured_output` error naming the tool, the
    ///   JSON path in the arguments, and in `param` where the client wrote the parameters (none for a tool not
    ///   offered).
    func checkArguments(ofCall name: String, _ arguments: String) -> AFMError? {
        guard let tool = tool(named: name) else { return Self.checkObjectArguments(ofUnofferedCall: name, arguments) }
        let problem: String?
        if arguments.allSatisfy(\.isWhitespace) {
            problem = tool.validator.violation(of: .object([:])).map { "the arguments do not match the schema at \($0)" }
        } else {
            do {
                let value = try JSONParser.parse(Array(arguments.utf8), limits: .init(maxDepth: Self.maximumArgumentsDepth))
                problem = tool.validator.violation(of: value).map { "the arguments do not match the schema at \($0)" }
            } catch {
                problem = "the arguments are not JSON (\(error.message))"
            }
        }
        return problem.map {
            AFMError(
                .invalidStructuredOutput, "The model's call of the tool '\(name)' does not satisfy \(tool.parametersPath): \($0).",
                param: tool.parametersPath)
        }
    }

    /// The check of a call of a tool the request does not offer: no arguments, or a JSON object.
    private static func checkObjectArguments(ofUnofferedCall name: String, _ arguments: String) -> AFMError? {
        if arguments.allSatisfy(\.isWhitespace) { return nil }
        let problem: String
        do {
            let value = try JSONParser.parse(Array(arguments.utf8), limits: .init(maxDepth: maximumArgumentsDepth))
            if value.objectValue != nil { return nil }
            problem = "the arguments are not a JSON object"
        } catch {
            problem = "the arguments are not JSON (\(error.message))"
        }
        return AFMError(
            .invalidStructuredOutput, "The model's call of the tool '\(name)', which the request does not offer, is invalid: \(problem).")
    }

    /// A backend's refusal of a tool's schema, located in the client's request: a backend names the keyword it
    /// cannot enforce by its path in the generation request document (`tools[0].parameters.properties.text.minLength`,
    /// the local backend's grammar limits and repetition budget); the client sees it as `param` under the tool's own
    /// field (`tools[1].parameters…` when a hosted tool before it was dropped, `tools[0].function.parameters…`,
    /// `tools[0].input_schema…`), as ``OutputFormat/locating(_:)`` does for the output schema. Other errors pass
    /// unchanged.
    public func locating(_ error: AFMError) -> AFMError {
        guard error.code == .invalidRequest, error.param == nil, error.message.hasPrefix("tools[") else { return error }
        let afterBracket = error.message.dropFirst("tools[".count)
        guard let close = afterBracket.firstIndex(of: "]"), let index = Int(afterBracket[..<close]), tools.indices.contains(index) else {
            return error
        }
        let member = ".parameters"
        let rest = afterBracket[afterBracket.index(after: close)...]
        guard rest.hasPrefix(member) else { return error }
        let tail = rest.dropFirst(member.count)
        guard tail.isEmpty || tail.first == "." || tail.first == "[" || tail.first == " " || tail.first == ":" else { return error }
        let pathEnd = tail.firstIndex { $0 == " " || $0 == ":" } ?? tail.endIndex
        var located = error
        located.param = tools[index].parametersPath + tail[..<pathEnd]
        located.message = tools[index].parametersPath + tail
        return located
    }
}
