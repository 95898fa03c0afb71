// SPDX-License-Identifier: Apache-2.0

/// A function tool's `parameters` schema uses something constrained decoding cannot enforce, or is not a
/// valid schema; names the JSON path of the offending node or keyword.
public struct ToolSchemaError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Where the problem is, starting with the `path` given to ``ToolSchemaValidator/validate(_:path:)``, for
    /// example `tools[0].parameters.properties.tags.items` or `tools[0].parameters.additionalProperties`.
    /// Property names that are not plain identifiers are written as `properties["a b"]`.
    public var path: String
    /// What is wrong and, where there is one, what to write instead.
    public var message: String

    /// Creates an error.
    public init(path: String, message: String) {
        self.path = path
        self.message = message
    }

    /// The OpenAI-compatible error code for every schema error: `invalid_function_parameters`.
    public var code: String { "invalid_function_parameters" }

    /// `path: message`.
    public var description: String { "\(path): \(message)" }
}
