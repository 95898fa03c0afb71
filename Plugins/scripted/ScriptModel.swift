// SPDX-License-Identifier: Apache-2.0
import AFMBackendKit

/// One model a script serves: its id, budgets, capabilities and the steps that make up every answer.
struct ScriptModel: Sendable, Hashable {
    /// What the model can do, as listed in the describe document. A script's default is streaming, tools and
    /// optional reasoning, and `structured_output` (ABI 1.1): the scripted backend enforces nothing, its script is
    /// the answer, and the host checks it like any backend's.
    typealias Capabilities = ModelCapabilities

    /// The model id clients put in `model`.
    var id: String
    /// The context window in tokens.
    var contextTokens: Int
    /// The input budget (3/4 of the context unless the script says otherwise).
    var maxInputTokens: Int
    /// The output budget (1/4 of the context unless the script says otherwise).
    var maxOutputTokens: Int
    /// What the model can do.
    var capabilities: Capabilities
    /// How long `afm.tokenize/1` takes for this model (`tokenize_delay_ms`, default 0): a slow tokenizer, so tests
    /// can hold counts in flight (a runner's tokenizer pool).
    var tokenizeDelayMilliseconds = 0
    /// The answer, played for every request.
    var steps: [ScriptStep] {
        didSet { playsInsideGenerate = ScriptStep.immediateEventCount(of: steps) != nil }
    }
    /// Whether the answer never waits and is short enough to be sent from inside `generate`
    /// (`ScriptStep.immediateEventCount(of:)`).
    private(set) var playsInsideGenerate: Bool

    /// The largest context a script may declare: the host's limit (`BackendDescription.maximumContextTokens`,
    /// 2^31 - 1), which also keeps budget arithmetic far from overflow.
    static let maximumContextTokens = Int(Int32.max)

    /// Creates a model whose budgets default to 3/4 and 1/4 of `contextTokens`.
    init(
        id: String, contextTokens: Int, maxInputTokens: Int? = nil, maxOutputTokens: Int? = nil,
        capabilities: Capabilities = .scriptDefault, steps: [ScriptStep]
    ) {
        self.id = id
        self.contextTokens = contextTokens
        // At least 1 each: the host refuses a describe document with an empty budget.
        self.maxInputTokens = maxInputTokens ?? max(1, contextTokens * 3 / 4)
        self.maxOutputTokens = maxOutputTokens ?? max(1, contextTokens / 4)
        self.capabilities = capabilities
        self.steps = steps
        playsInsideGenerate = ScriptStep.immediateEventCount(of: steps) != nil
    }

    /// The built-in model served when no `Script` setting is given: it echoes the last user text word by word.
    static func demo(contextTokens: Int) -> ScriptModel {
        ScriptModel(id: "scripted-demo", contextTokens: contextTokens, steps: [.echo])
    }

    /// Parses `models[i]` of a script file.
    ///
    /// - Parameters:
    ///   - value: The model object.
    ///   - path: Its location, e.g. `models[0]`.
    ///   - defaultContextTokens: The context used when the model names none (the `ContextTokens` setting).
    init(parsing value: Any, at path: String, defaultContextTokens: Int) throws(ScriptStep.ParseError) {
        guard let object = JSON.object(value) else {
            throw ScriptStep.ParseError(path: path, problem: "a model must be a JSON object")
        }
        let allowed: Set = [
            "id", "context_tokens", "max_input_tokens", "max_output_tokens", "capabilities", "steps", "tokenize_delay_ms", "comment",
        ]
        if let unknown = object.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw ScriptStep.ParseError(path: path, problem: "unknown key \"\(unknown)\"")
        }
        guard let id = JSON.string(object["id"]), !id.isEmpty else {
            throw ScriptStep.ParseError(path: path + ".id", problem: "must be a non-empty string")
        }
        let context = try Self.tokens(object["context_tokens"], at: path + ".context_tokens") ?? defaultContextTokens
        let maxInput = try Self.tokens(object["max_input_tokens"], at: path + ".max_input_tokens")
        let maxOutput = try Self.tokens(object["max_output_tokens"], at: path + ".max_output_tokens")
        var capabilities = Capabilities.scriptDefault
        if let raw = object["capabilities"], !JSON.isNullOrMissing(raw) {
            guard let flags = JSON.object(raw) else {
                throw ScriptStep.ParseError(path: path + ".capabilities", problem: "must be an object of booleans")
            }
            for (key, flag) in flags where key != "comment" {
                let here = "\(path).capabilities.\(key)"
                guard let flag = JSON.bool(flag) else {
                    throw ScriptStep.ParseError(path: here, problem: "must be true or false")
                }
                switch key {
                case "streaming": capabilities.streaming = flag
                case "tools": capabilities.tools = flag
                case "vision": capabilities.vision = flag
                case "reasoning": capabilities.reasoning = flag
                case "reasoning_optional": capabilities.reasoningOptional = flag
                case "structured_output": capabilities.structuredOutput = flag
                default: throw ScriptStep.ParseError(path: here, problem: "unknown capability")
                }
            }
        }
        let steps =
            JSON.isNullOrMissing(object["steps"]) ? [] : try ScriptStep.parseList(object["steps"], at: path + ".steps")
        self.init(
            id: id, contextTokens: context, maxInputTokens: maxInput, maxOutputTokens: maxOutput,
            capabilities: capabilities, steps: steps)
        if !JSON.isNullOrMissing(object["tokenize_delay_ms"]) {
            guard let milliseconds = JSON.int(object["tokenize_delay_ms"]),
                (0...ScriptStep.Limits.maximumDelayMilliseconds).contains(milliseconds)
            else {
                throw ScriptStep.ParseError(
                    path: path + ".tokenize_delay_ms", problem: "must be an integer from 0 to \(ScriptStep.Limits.maximumDelayMilliseconds)")
            }
            tokenizeDelayMilliseconds = milliseconds
        }
    }

    /// A token count field: absent/null → nil, else an integer from 1 to `maximumContextTokens`.
    private static func tokens(_ value: Any?, at path: String) throws(ScriptStep.ParseError) -> Int? {
        if JSON.isNullOrMissing(value) { return nil }
        guard let tokens = JSON.int(value), (1...maximumContextTokens).contains(tokens) else {
            throw ScriptStep.ParseError(path: path, problem: "must be an integer from 1 to \(maximumContextTokens)")
        }
        return tokens
    }
}

extension ModelCapabilities {
    /// A script model's capabilities when its script names none (docs/backend-abi.md §10.2).
    static let scriptDefault = ModelCapabilities(
        streaming: true, tools: true, vision: false, reasoning: false, reasoningOptional: true, structuredOutput: true)
}
