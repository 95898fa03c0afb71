// SPDX-License-Identifier: Apache-2.0
public import AFMJSON

/// The result of validating a function tool's `parameters`: the schema a backend should enforce, and what
/// it will not enforce.
public struct ToolSchemaReport: Sendable, Hashable {
    /// The normalized schema: the input with property order kept, unenforced keywords moved into
    /// `description` text, `additionalProperties: false` made explicit on every object, an inferred `type`
    /// added where the input left it implicit, and `$schema` dropped. See ``ToolSchemaValidator``.
    public var normalized: JSONValue
    /// One line per keyword that is kept only as description text, for example
    /// `tools[0].parameters.properties.city.pattern is not enforced (kept as description)`.
    public var warnings: [String]

    /// Creates a report.
    public init(normalized: JSONValue, warnings: [String]) {
        self.normalized = normalized
        self.warnings = warnings
    }
}
