// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMTestSupport
import Foundation
import Testing

/// Unrepresentable and malformed `text.format` schemas through a real afmd: every one is a 400 whose `param` is
/// the exact JSON path of the offending node or keyword; none reaches the backend, none is a 5xx.
@Suite(.serialized) struct MalformedSchemaTests {
    /// (schema, path below `text.format.schema` — empty for the schema itself, code).
    static let schemas: [(schema: String, path: String)] = [
        (#"{"type":"object","properties":{"a":{"type":"string"}},"oneOf":[]}"#, "oneOf"),
        (#"{"type":"object","properties":{},"allOf":[{"type":"object"}]}"#, "allOf"),
        (#"{"type":"object","properties":{"a":{"type":"string","not":{"const":"x"}}}}"#, "properties.a.not"),
        (#"{"type":"object","properties":{"a":{"type":"string","if":{}}}}"#, "properties.a.if"),
        (#"{"type":"object","properties":{},"patternProperties":{"^x":{"type":"string"}}}"#, "patternProperties"),
        (#"{"type":"object","properties":{"t":{"type":"array","prefixItems":[{"type":"string"}]}}}"#, "properties.t.prefixItems"),
        (#"{"type":"object","properties":{"t":{"type":"array","items":[{"type":"string"}]}}}"#, "properties.t.items"),
        (#"{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":true}"#, "additionalProperties"),
        (#"{"type":"object","properties":{},"additionalProperties":{"type":"integer"}}"#, "additionalProperties"),
        (#"{"type":"object"}"#, ""),
        (#"{"type":"object","properties":{"meta":{"type":"object"}}}"#, "properties.meta"),
        (#"{"type":"object","properties":{"tags":{"type":"array"}}}"#, "properties.tags"),
        (#"{"type":"object","properties":{"tags":{"type":"array","items":{}}}}"#, "properties.tags.items"),
        (#"{"type":"object","properties":{"a":{"type":"strin"}}}"#, "properties.a.type"),
        (#"{"type":"object","properties":{"a":{"type":["string","integer"]}}}"#, "properties.a.type"),
        (#"{"type":"object","properties":{"a":{"type":"string","minimum":1}}}"#, "properties.a.minimum"),
        (#"{"type":"object","properties":{"a":{"type":"array","items":{"type":"string"},"minItems":-1}}}"#, "properties.a.minItems"),
        (#"{"type":"object","properties":{"a":{"type":"array","items":{"type":"string"},"minItems":3,"maxItems":2}}}"#, "properties.a.maxItems"),
        (#"{"type":"object","properties":{"a":{"type":"integer","minimum":5,"maximum":1}}}"#, "properties.a.maximum"),
        (#"{"type":"object","properties":{"a":{"type":"string"}},"required":"a"}"#, "required"),
        (#"{"type":"object","properties":{"a":{"type":"string"}},"required":["b"]}"#, "required[0]"),
        (#"{"type":"object","properties":{"a":{"type":"string"}},"required":["a","a"]}"#, "required[1]"),
        (#"{"type":"object","properties":{"a":{"$ref":"https://example.com/s.json"}}}"#, "properties.a.$ref"),
        (##"{"type":"object","properties":{"a":{"$ref":"#/$defs/Nope"}}}"##, "properties.a.$ref"),
        (##"{"$defs":{"S":{"type":"string"}},"type":"object","properties":{"a":{"$ref":"#/$defs/S","type":"string"}}}"##, "properties.a.type"),
        (#"{"type":"object","properties":{"a":{"type":"object","properties":{},"$defs":{}}}}"#, "properties.a.$defs"),
        (#"{"$defs":[],"type":"object","properties":{}}"#, "$defs"),
        (##"{"$defs":{"A":{"$ref":"#/$defs/B"},"B":{"$ref":"#/$defs/A"}},"type":"object","properties":{"a":{"$ref":"#/$defs/A"}}}"##, "$defs.B.$ref"),
        (#"{"type":"object","properties":{"a":{"enum":[]}}}"#, "properties.a.enum"),
        (#"{"type":"object","properties":{"a":{"type":"string","enum":["x",1]}}}"#, "properties.a.enum[1]"),
        (#"{"type":"object","properties":{"a":{"type":"integer","const":"x"}}}"#, "properties.a.const"),
        (#"{"type":"object","properties":{"a":{"anyOf":[]}}}"#, "properties.a.anyOf"),
        (#"{"type":"object","properties":{"a":{"anyOf":[{"type":"string"},{"type":"string","description":"again"}]}}}"#, "properties.a.anyOf[1]"),
        (#"{"type":"object","properties":{"a":{"anyOf":[{"type":"integer"},{"type":"number"}]}}}"#, "properties.a.anyOf[1]"),
        (#"{"type":"object","properties":{"a":{"type":"string","anyOf":[{"type":"string"}]}}}"#, "properties.a.type"),
        (#"{"type":"object","properties":{"a":true}}"#, "properties.a"),
        (#"[]"#, ""),
        (#"true"#, ""),
        (#"{}"#, ""),
        (#"{"title":"Only annotations","description":"no type"}"#, ""),
        (#"{"type":"object","properties":{"a":{"type":"string","nullable":true}}}"#, "properties.a.nullable"),
        (#"{"type":"object","properties":{"a":{"type":"string","description":5}}}"#, "properties.a.description"),
        (#"{"type":"object","properties":{"a":{"type":"string","pattern":7}}}"#, "properties.a.pattern"),
        (#"{"type":"object","properties":{"a":{"type":"number","multipleOf":0}}}"#, "properties.a.multipleOf"),
        (#"{"type":"object","properties":{"a":{"type":"string","frobnicate":1}}}"#, "properties.a.frobnicate"),
        (#"{"type":"object","properties":[]}"#, "properties"),
        (#"{"type":"object","properties":{},"items":{"type":"string"}}"#, "items"),
        (#"{"$id":"urn:x","type":"object","properties":{}}"#, "$id"),
        (#"{"type":"object","properties":{"a":{"type":"string"}},"dependentRequired":{"a":[]}}"#, "dependentRequired"),
        (#"{"type":"object","properties":{"a b":{"type":"strng"}}}"#, #"properties["a b"].type"#),
        (#"{"type":"object","properties":{"a":{"type":"string","minLength":"2"}}}"#, "properties.a.minLength"),
        (#"{"type":"object","properties":{"a":{"type":"array","items":{"type":"string"},"contains":{"const":"x"}}}}"#, "properties.a.contains"),
        (#"{"type":"object","properties":{"a":{"type":"array","items":{"type":"object"}}}}"#, "properties.a.items"),
        (#"{"type":"object","properties":{"a":{"type":"object","properties":{},"unevaluatedProperties":false}}}"#, "properties.a.unevaluatedProperties"),
        (##"{"type":"object","properties":{"a":{"$ref":"#/properties/b"}}}"##, "properties.a.$ref"),
    ]

    /// Errors in the format object around the schema, with their `param`.
    static let formats: [(format: String, param: String, code: String)] = [
        (#"{"type":"json_schema","schema":{"type":"string"}}"#, "text.format.name", "missing_required_parameter"),
        (#"{"type":"json_schema","name":"bad name!","schema":{"type":"string"}}"#, "text.format.name", "invalid_value"),
        (#"{"type":"json_schema","name":"\#(String(repeating: "n", count: 65))","schema":{"type":"string"}}"#, "text.format.name", "invalid_value"),
        (#"{"type":"json_schema","name":5,"schema":{"type":"string"}}"#, "text.format.name", "invalid_type"),
        (#"{"type":"json_schema","name":"n"}"#, "text.format.schema", "missing_required_parameter"),
        (#"{"type":"json_schema","name":"n","strict":"yes","schema":{"type":"string"}}"#, "text.format.strict", "invalid_type"),
        (#"{"type":"json_schema","name":"n","description":[],"schema":{"type":"string"}}"#, "text.format.description", "invalid_type"),
        (#"{"type":"json_schema","name":"n","schema":{"type":"string"},"json_schema":{}}"#, "text.format.json_schema", "unknown_parameter"),
        (#"{"type":"xml"}"#, "text.format.type", "invalid_value"),
        (#"{"name":"n"}"#, "text.format.type", "missing_required_parameter"),
        (#"{"type":"json_object","schema":{}}"#, "text.format.schema", "unknown_parameter"),
        (#""json""#, "text.format", "invalid_type"),
    ]

    @Test func everyMalformedSchemaIsA400WithItsExactPath() throws {
        #expect(Self.schemas.count >= 50)
        let harness = try DaemonHarness(models: ["json": #"[{"json":{"text":"{}"}}]"#])
        for (schema, path) in Self.schemas {
            let format = #","text":{"format":{"type":"json_schema","name":"Case","strict":true,"schema":\#(schema)}}"#
            let response = try harness.client().post("/v1/responses", json: responsesBody(model: "json", extra: format))
            let expected = path.isEmpty ? "text.format.schema" : path.hasPrefix("[") ? "text.format.schema" + path : "text.format.schema." + path
            #expect(response.status == 400, "\(schema): \(response.status)")
            #expect(response.json?["error"]?["code"] == "invalid_json_schema", "\(schema)")
            #expect(response.json?["error"]?["param"] == .string(expected), "\(schema): \(String(describing: response.json?["error"]))")
            #expect(response.json?["error"]?["type"] == "invalid_request_error")
        }
        for (format, param, code) in Self.formats {
            let response = try harness.client().post(
                "/v1/responses", json: responsesBody(model: "json", extra: #","text":{"format":\#(format)}"#))
            #expect(response.status == 400, "\(format)")
            #expect(response.json?["error"]?["code"] == .string(code), "\(format): \(String(describing: response.json?["error"]))")
            #expect(response.json?["error"]?["param"] == .string(param), "\(format)")
        }
        // Nothing reached the backend, and the daemon still answers.
        #expect(harness.records().filter { $0["event"] == "generate" }.isEmpty)
        let alive = try harness.client().post(
            "/v1/responses", json: responsesBody(model: "json", extra: #","text":{"format":{"type":"json_object"}}"#))
        #expect(alive.json?["status"] == "completed")
    }

    /// Nesting past the subset's depth limit names the node where it gave up.
    @Test func tooDeepASchemaIsRefusedAtTheLevelThatWentTooFar() throws {
        var schema = #"{"type":"string"}"#
        // Arrays nest one JSON level per schema level, so the body stays inside the request parser's depth limit.
        for _ in 0..<40 { schema = #"{"type":"array","items":\#(schema)}"# }
        let harness = try DaemonHarness(models: ["json": #"[{"json":{"text":"{}"}}]"#])
        let format = #","text":{"format":{"type":"json_schema","name":"Deep","schema":\#(schema)}}"#
        let response = try harness.client().post("/v1/responses", json: responsesBody(model: "json", extra: format))
        #expect(response.status == 400)
        #expect(response.json?["error"]?["code"] == "invalid_json_schema")
        let expected = "text.format.schema" + String(repeating: ".items", count: 33)
        #expect(response.json?["error"]?["param"] == .string(expected))
    }
}
