// SPDX-License-Identifier: Apache-2.0
import AFMJSON

/// The JSON Schema of a schema turn's answer (`text.format` `{type:"json_schema", name, schema, strict}`).
///
/// Objects keep property order and the model writes in that order: put a `reasoning` property before the
/// `choice` it justifies. The final JSON is re-serialized in the schema's order.
public struct AgentSchema: Sendable, Hashable {
    /// The format's name (letters, digits, `_` and `-`).
    public var name: String
    /// The schema: an object schema in the gateway's subset.
    public var schema: JSONValue

    public init(name: String, schema: JSONValue) {
        self.name = name
        self.schema = schema
    }

    /// The `text` member of a Responses request.
    var textFormat: JSONValue {
        ["format": ["type": "json_schema", "name": .string(name), "schema": schema, "strict": true]]
    }
}
