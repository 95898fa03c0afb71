// SPDX-License-Identifier: Apache-2.0

/// How the validator treats each JSON Schema keyword; anything not listed is refused.
///
/// The table is the policy: what a backend can enforce with constrained decoding is `structural` or
/// type-specific and kept; what it cannot is `unenforced` and turned into description text with a warning;
/// annotations pass through; everything else is an error naming the keyword.
enum SchemaKeyword {
    /// Kept as-is; never changes what is valid (`description`, `title`, `default`, `examples`, …).
    case annotation
    /// Only meaningful at the top of `parameters` (`$schema`, `$defs`, `definitions`).
    case rootOnly
    /// Enforced for every type (`type`, `enum`, `const`, `anyOf`, `$ref`).
    case structural
    /// Enforced, and only valid for the given types.
    case typeSpecific([SchemaType])
    /// Valid JSON Schema a constrained decoder does not enforce: kept as description text, with a warning.
    case unenforced
    /// Refused, with a hint saying why or what to use instead.
    case unsupported(String)

    static func classify(_ key: String) -> SchemaKeyword {
        switch key {
        case "description", "title", "default", "examples", "$comment", "deprecated", "readOnly", "writeOnly":
            return .annotation
        case "$schema", "$defs", "definitions":
            return .rootOnly
        case "type", "enum", "const", "anyOf", "$ref":
            return .structural
        case "properties", "required", "additionalProperties":
            return .typeSpecific([.object])
        case "items", "minItems", "maxItems":
            return .typeSpecific([.array])
        case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum":
            return .typeSpecific([.number, .integer])
        case "minLength", "maxLength":
            return .typeSpecific([.string])
        case "pattern", "format", "multipleOf", "uniqueItems", "minProperties",
            "maxProperties", "contentEncoding", "contentMediaType":
            return .unenforced
        case "oneOf":
            return .unsupported("use anyOf (branches that are objects, or one schema and {\"type\": \"null\"})")
        case "allOf", "not", "if", "then", "else", "dependentSchemas", "contentSchema":
            return .unsupported("schema combinators other than anyOf cannot be enforced")
        case "prefixItems", "additionalItems", "unevaluatedItems", "contains", "minContains", "maxContains":
            return .unsupported("tuples and partial array constraints cannot be enforced; use items")
        case "patternProperties", "propertyNames", "unevaluatedProperties":
            return .unsupported("open-ended objects are not supported; declare every property")
        case "dependentRequired", "dependencies":
            return .unsupported("conditional requirements cannot be enforced")
        case "$id", "$anchor", "$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor", "$vocabulary":
            return .unsupported("only local references to #/$defs/<name> are supported")
        case "nullable":
            return .unsupported("write \"type\": [\"<type>\", \"null\"] instead")
        default:
            return .unsupported("unknown keyword")
        }
    }
}
