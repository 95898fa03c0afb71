// SPDX-License-Identifier: Apache-2.0
import AFMJSON

/// One entry of `GET /v1/models`: a served model with its budgets, or an alias (`on-device`, `auto`, …).
public struct ModelInfo: Sendable, Hashable {
    public var id: String
    /// The model an alias resolves to now; nil for a concrete model.
    public var aliasOf: String?
    /// The input budget in tokens (nil for an alias, or a gateway that does not say).
    public var maxInputTokens: Int?
    /// The output budget in tokens.
    public var maxOutputTokens: Int?
    /// The declared capabilities (`tools`, `vision`, `structured_output`, …) as the gateway lists them.
    public var capabilities: JSONValue?

    public init(
        id: String, aliasOf: String? = nil, maxInputTokens: Int? = nil, maxOutputTokens: Int? = nil,
        capabilities: JSONValue? = nil
    ) {
        self.id = id
        self.aliasOf = aliasOf
        self.maxInputTokens = maxInputTokens
        self.maxOutputTokens = maxOutputTokens
        self.capabilities = capabilities
    }

    /// Reads one `data` entry; nil without an `id`.
    init?(json: JSONValue) {
        guard let id = json["id"]?.stringValue else { return nil }
        self.init(
            id: id, aliasOf: json["alias_of"]?.stringValue,
            maxInputTokens: json["max_input_tokens"]?.numberValue?.intValue,
            maxOutputTokens: json["max_output_tokens"]?.numberValue?.intValue, capabilities: json["capabilities"])
    }
}
