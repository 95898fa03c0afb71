// SPDX-License-Identifier: Apache-2.0

/// One entry of the describe document's `models` (docs/backend-abi.md §8.3).
public struct ModelDescription: Sendable, Hashable {
    /// The model id clients put in `model`.
    public var id: String
    /// The context window in tokens.
    public var contextTokens: Int
    /// The input budget (positive).
    public var maxInputTokens: Int
    /// The output budget (positive).
    public var maxOutputTokens: Int
    /// What the model can do.
    public var capabilities: ModelCapabilities

    /// A model whose budgets default to the ABI's 3/4 and 1/4 of the context (at least 1 each: the host refuses a
    /// describe document with an empty budget).
    public init(
        id: String, contextTokens: Int, maxInputTokens: Int? = nil, maxOutputTokens: Int? = nil,
        capabilities: ModelCapabilities = ModelCapabilities()
    ) {
        self.id = id
        self.contextTokens = contextTokens
        self.maxInputTokens = maxInputTokens ?? max(1, contextTokens * 3 / 4)
        self.maxOutputTokens = maxOutputTokens ?? max(1, contextTokens / 4)
        self.capabilities = capabilities
    }

    /// The model's JSON object.
    public var json: String {
        "{\"id\":" + JSON.quote(id) + ",\"context_tokens\":\(contextTokens)"
            + ",\"max_input_tokens\":\(maxInputTokens),\"max_output_tokens\":\(maxOutputTokens)"
            + ",\"capabilities\":" + capabilities.json + "}"
    }
}
