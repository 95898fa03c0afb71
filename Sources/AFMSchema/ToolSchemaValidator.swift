// SPDX-License-Identifier: Apache-2.0
public import AFMJSON

/// Checks a schema — a function tool's `parameters`, or the schema of a structured answer (`text.format`) —
/// against the JSON Schema subset a backend can enforce with constrained decoding, and normalizes it. Tools and
/// structured outputs share this one subset; ``SchemaInstanceValidator`` checks answers against its output.
///
/// # The subset
/// - **Objects** declare `properties` (their order is kept end to end) and may list `required` (declared
///   names, no repeats). `additionalProperties` must be `false` or absent (absent means `false`, and the
///   normalized schema says so). Objects without `properties` are open-ended and refused, except an object
///   fully fixed by `enum`/`const`; `"properties": {}` is an object with no members.
/// - **No arguments:** `parameters: {}` (or only annotations), and `{"type": "object", "properties": {}}`
///   are accepted and normalized to `{"type":"object","properties":{},"additionalProperties":false}`.
/// - **Scalars:** `string` with `minLength`/`maxLength` (non-negative integers, min ≤ max; lengths in code
///   points), `boolean`, `null`; `number` and `integer` with `minimum`, `maximum`, `exclusiveMinimum`,
///   `exclusiveMaximum` (numbers, leaving a non-empty range).
/// - **Arrays** declare `items` (one schema; tuples are refused) and may set `minItems`/`maxItems`
///   (non-negative integers, min ≤ max).
/// - **`enum`** (non-empty) and **`const`**, of any JSON values; with a `type`, every value must have it.
/// - **Nullable:** `"type": ["<type>", "null"]` (kept as written; unions of two non-null types are refused),
///   or `anyOf` with one schema and `{"type": "null"}`.
/// - **`anyOf`:** branches a parser can tell apart by their first bytes: any number of object schemas
///   (directly, through `$ref`, or as nested unions of objects) and literals (`enum`/`const`: string-literal
///   unions), at most one each of string, number-or-integer, boolean, array and nested union, plus optionally
///   `{"type": "null"}` (Optional). `anyOf` and `$ref` combine only with annotations.
/// - **The top:** for tool parameters, one object (`{}` means no arguments); for outputs, any schema of the
///   subset but an empty one.
/// - **`$ref`** to `#`, `#/$defs/<name>` or `#/definitions/<name>` (definitions only at the top). Recursion
///   is fine when an object or array lies on the cycle; a cycle of bare references (`A → B → A`) is refused,
///   as are undefined names. The normalized schema refers to the root through a copy in `$defs`
///   (``RootReferenceLifter``), because grammar converters follow only definition references.
/// - **Annotations** kept: `description`, `title`, `default`, `examples`, `$comment`, `deprecated`,
///   `readOnly`, `writeOnly`. `$schema` is accepted at the top and dropped.
/// - **Kept as description, with a warning:** `pattern`, `format`, `multipleOf`, `uniqueItems`,
///   `minProperties`, `maxProperties`, `contentEncoding`, `contentMediaType` — appended to the node's
///   `description` as `(pattern: ^[a-z]+$; format: email)`.
/// - **Refused,** naming the path of the keyword: every other keyword (`allOf`, `oneOf`, `not`,
///   `if`/`then`/`else`, `patternProperties`, `prefixItems`, `dependentRequired`, `unevaluatedProperties`, …),
///   keywords of the wrong type (`"required": "x"`, `"minimum": "a"`, `"items": 5`), boolean schemas, type-
///   specific keywords on another type (`minimum` on a string), untyped schemas, and nesting deeper than
///   ``maximumDepth``.
///
/// Validation never expands references, so its cost is linear in the size of the schema.
public enum ToolSchemaValidator {
    /// How many schema levels may nest below `parameters` (properties, items, anyOf branches, definitions).
    public static let maximumDepth = 32

    /// How many schema nodes (the root, each property, `items`, `anyOf` branch and definition) one schema may have:
    /// every backend pays per node (a grammar rule or more each, the host's own walk and answer check), and a
    /// 16 MiB body could otherwise carry hundreds of thousands. OpenAI's structured outputs allow 5,000 properties.
    public static let maximumNodes = 10_000

    /// Validates `schema` (the `parameters` of a function tool, or the schema of a structured answer) and returns
    /// it normalized, or throws naming the JSON path.
    ///
    /// - Parameters:
    ///   - schema: The `parameters` value (a `null` `parameters` is the caller's to map to `{}`), or the `schema`
    ///     of `text.format`.
    ///   - path: The path of `schema` in the request, for example `tools[0].parameters` or
    ///     `text.format.schema`; every error path and warning starts with it.
    ///   - purpose: What the schema describes; only the rules for its top differ (``SchemaPurpose``).
    /// - Returns: The normalized schema and the warnings for unenforced keywords.
    /// - Throws: ``ToolSchemaError`` for the first problem found.
    public static func validate(_ schema: JSONValue, path: String, purpose: SchemaPurpose = .toolParameters)
        throws(ToolSchemaError) -> ToolSchemaReport
    {
        guard case .object(let root) = schema else {
            let message =
                schema.boolValue != nil
                ? "boolean schemas (true/false) are not supported; \(purpose.rootName) must be an object schema"
                : "\(purpose.rootName) must be a JSON object schema, not \(schema.typeName)"
            throw ToolSchemaError(path: path, message: message)
        }
        var references = try SchemaReferences(root: root, rootPath: path)
        try references.analyze()
        var walker = SchemaWalker(references: references, purpose: purpose)
        let normalized = RootReferenceLifter.lifted(try walker.node(schema, path: path, depth: 0, isRoot: true))
        return ToolSchemaReport(normalized: normalized, warnings: walker.warnings)
    }
}
