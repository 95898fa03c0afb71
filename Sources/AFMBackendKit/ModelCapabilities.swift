// SPDX-License-Identifier: Apache-2.0

/// What a model can do, as the describe document lists it (docs/backend-abi.md §8.3, `models[].capabilities`).
public struct ModelCapabilities: Sendable, Hashable {
    /// The model streams its answer (every backend's events stream; false only for a model that sends one delta).
    public var streaming: Bool
    /// Function calling.
    public var tools: Bool
    /// Image input.
    public var vision: Bool
    /// The model reasons.
    public var reasoning: Bool
    /// Reasoning can be turned off with `reasoning_effort: "none"`.
    public var reasoningOptional: Bool
    /// ABI 1.1: the model honours `output_format` (one JSON value matching the schema).
    public var structuredOutput: Bool

    /// Capabilities with the ABI's defaults for whatever is not given: streaming, nothing else.
    public init(
        streaming: Bool = true, tools: Bool = false, vision: Bool = false, reasoning: Bool = false,
        reasoningOptional: Bool = false, structuredOutput: Bool = false
    ) {
        self.streaming = streaming
        self.tools = tools
        self.vision = vision
        self.reasoning = reasoning
        self.reasoningOptional = reasoningOptional
        self.structuredOutput = structuredOutput
    }

    /// The JSON keys, in describe-document order, with their values.
    public var fields: [(key: String, value: Bool)] {
        [
            ("streaming", streaming), ("tools", tools), ("vision", vision), ("reasoning", reasoning),
            ("reasoning_optional", reasoningOptional), ("structured_output", structuredOutput),
        ]
    }

    /// The `capabilities` object.
    public var json: String { "{" + fields.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",") + "}" }
}
