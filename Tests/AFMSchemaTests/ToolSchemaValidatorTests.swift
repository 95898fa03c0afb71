// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMSchema
import Foundation
import Testing

@Suite("ToolSchemaValidator")
struct ToolSchemaValidatorTests {
    static let accepted: [AcceptedCase] = [
        AcceptedCase(
            "empty parameters (Copilot)", ##"{}"##,
            normalized: ##"{"type":"object","properties":{},"additionalProperties":false}"##),
        AcceptedCase(
            "object with empty properties", ##"{"type":"object","properties":{}}"##,
            normalized: ##"{"type":"object","properties":{},"additionalProperties":false}"##),
        AcceptedCase(
            "annotations only",
            ##"{"description":"no arguments","$schema":"https://json-schema.org/draft/2020-12/schema"}"##,
            normalized:
                ##"{"type":"object","properties":{},"description":"no arguments","additionalProperties":false}"##),
        AcceptedCase(
            "weather",
            ##"{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["c","f"]}},"required":["city"],"additionalProperties":false}"##,
            normalized:
                ##"{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["c","f"]}},"required":["city"],"additionalProperties":false}"##
        ),
        AcceptedCase(
            "additionalProperties made explicit", ##"{"type":"object","properties":{"a":{"type":"string"}}}"##,
            normalized: ##"{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}"##),
        AcceptedCase(
            "type inferred from properties", ##"{"properties":{"a":{"type":"boolean"}},"required":["a"]}"##,
            normalized:
                ##"{"properties":{"a":{"type":"boolean"}},"required":["a"],"type":"object","additionalProperties":false}"##
        ),
        AcceptedCase(
            "boolean and null", ##"{"type":"object","properties":{"b":{"type":"boolean"},"n":{"type":"null"}}}"##),
        AcceptedCase(
            "integer range", ##"{"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":10}}}"##),
        AcceptedCase(
            "number exclusive range",
            ##"{"type":"object","properties":{"x":{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1.5}}}"##),
        AcceptedCase(
            "single-value range", ##"{"type":"object","properties":{"n":{"type":"integer","minimum":3,"maximum":3}}}"##),
        AcceptedCase(
            "huge bounds", ##"{"type":"object","properties":{"n":{"type":"number","minimum":-1e999,"maximum":1e999}}}"##
        ),
        AcceptedCase(
            "array with counts",
            ##"{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":5}}}"##
        ),
        AcceptedCase(
            "array type inferred from items", ##"{"type":"object","properties":{"tags":{"items":{"type":"string"}}}}"##,
            normalized:
                ##"{"type":"object","properties":{"tags":{"items":{"type":"string"},"type":"array"}},"additionalProperties":false}"##
        ),
        AcceptedCase(
            "empty array only",
            ##"{"type":"object","properties":{"none":{"type":"array","items":{"type":"string"},"maxItems":0}}}"##),
        AcceptedCase(
            "nested objects",
            ##"{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"object","properties":{"c":{"type":"integer"}},"required":["c"]}}}}}"##,
            normalized:
                ##"{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"object","properties":{"c":{"type":"integer"}},"required":["c"],"additionalProperties":false}},"additionalProperties":false}},"additionalProperties":false}"##
        ),
        AcceptedCase(
            "nested empty object", ##"{"type":"object","properties":{"options":{"type":"object","properties":{}}}}"##),
        AcceptedCase(
            "enum of mixed values without type",
            ##"{"type":"object","properties":{"v":{"enum":[1,"a",null,true,{"x":1},[1,2]]}}}"##),
        AcceptedCase(
            "integer enum accepts 2.0", ##"{"type":"object","properties":{"v":{"type":"integer","enum":[1,2.0,3e0]}}}"##
        ),
        AcceptedCase("const string", ##"{"type":"object","properties":{"kind":{"const":"circle"}}}"##),
        AcceptedCase(
            "object fixed by const",
            ##"{"type":"object","properties":{"origin":{"type":"object","const":{"x":0,"y":0}}}}"##),
        AcceptedCase("nullable string", ##"{"type":"object","properties":{"s":{"type":["string","null"]}}}"##),
        AcceptedCase(
            "nullable integer, null first",
            ##"{"type":"object","properties":{"n":{"type":["null","integer"],"minimum":0,"enum":[1,null]}}}"##),
        AcceptedCase(
            "nullable object",
            ##"{"type":"object","properties":{"o":{"type":["object","null"],"properties":{"a":{"type":"string"}}}}}"##,
            normalized:
                ##"{"type":"object","properties":{"o":{"type":["object","null"],"properties":{"a":{"type":"string"}},"additionalProperties":false}},"additionalProperties":false}"##
        ),
        AcceptedCase(
            "Pydantic Optional[str]",
            ##"{"type":"object","properties":{"s":{"anyOf":[{"type":"string"},{"type":"null"}],"default":null,"title":"S"}}}"##
        ),
        AcceptedCase(
            "anyOf of scalars of different kinds (Union[str, int, bool, list])",
            ##"{"type":"object","properties":{"v":{"anyOf":[{"type":"string"},{"type":"integer"},{"type":"boolean"},{"type":"array","items":{"type":"string"}},{"type":"null"}]}}}"##
        ),
        AcceptedCase(
            "string-literal union as anyOf of consts",
            ##"{"type":"object","properties":{"v":{"anyOf":[{"const":"a"},{"const":"b"},{"enum":["c","d"]},{"type":"string"}]}}}"##
        ),
        AcceptedCase(
            "anyOf of an object and a scalar",
            ##"{"type":"object","properties":{"v":{"anyOf":[{"type":"object","properties":{}},{"type":"string"},{"type":"null"}]}}}"##
        ),
        AcceptedCase(
            "anyOf of two objects",
            ##"{"type":"object","properties":{"shape":{"anyOf":[{"type":"object","properties":{"r":{"type":"number"}},"required":["r"]},{"type":"object","properties":{"w":{"type":"number"},"h":{"type":"number"}}}]}}}"##
        ),
        AcceptedCase(
            "anyOf of objects and null",
            ##"{"type":"object","properties":{"shape":{"anyOf":[{"type":"object","properties":{"r":{"type":"number"}}},{"properties":{"w":{"type":"number"}}},{"type":"null"}]}}}"##
        ),
        AcceptedCase(
            "Pydantic union of models via $ref",
            ##"{"$defs":{"Cat":{"type":"object","properties":{"meow":{"type":"boolean"}},"title":"Cat"},"Dog":{"properties":{"bark":{"type":"boolean"}},"title":"Dog"}},"type":"object","properties":{"pet":{"anyOf":[{"$ref":"#/$defs/Cat"},{"$ref":"#/$defs/Dog"}]}},"required":["pet"]}"##
        ),
        AcceptedCase(
            "Pydantic Optional[Model]",
            ##"{"$defs":{"M":{"type":"object","properties":{"a":{"type":"string"}}}},"type":"object","properties":{"m":{"anyOf":[{"$ref":"#/$defs/M"},{"type":"null"}],"default":null}}}"##
        ),
        AcceptedCase(
            "Pydantic enum class with described $ref",
            ##"{"$defs":{"Color":{"enum":["red","green"],"title":"Color","type":"string"}},"type":"object","properties":{"c":{"$ref":"#/$defs/Color","description":"the colour"}}}"##
        ),
        AcceptedCase(
            "definitions (draft 7)",
            ##"{"definitions":{"Point":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}}}},"type":"object","properties":{"p":{"$ref":"#/definitions/Point"}}}"##
        ),
        AcceptedCase(
            "recursive tree via $defs",
            ##"{"$defs":{"Node":{"type":"object","properties":{"value":{"type":"string"},"children":{"type":"array","items":{"$ref":"#/$defs/Node"}}},"required":["value"]}},"type":"object","properties":{"root":{"$ref":"#/$defs/Node"}}}"##
        ),
        AcceptedCase(
            "recursion to the root via ## is lifted into $defs",
            ##"{"type":"object","properties":{"name":{"type":"string"},"sub":{"anyOf":[{"$ref":"#"},{"type":"null"}]}}}"##,
            normalized:
                ##"{"type":"object","properties":{"name":{"type":"string"},"sub":{"anyOf":[{"$ref":"#/$defs/root"},{"type":"null"}]}},"additionalProperties":false,"$defs":{"root":{"type":"object","properties":{"name":{"type":"string"},"sub":{"anyOf":[{"$ref":"#/$defs/root"},{"type":"null"}]}},"additionalProperties":false}}}"##
        ),
        AcceptedCase(
            "a lifted root gets a free name and data that looks like a reference is kept",
            ##"{"$defs":{"root":{"type":"string"}},"type":"object","properties":{"r":{"$ref":"#/$defs/root"},"kids":{"type":"array","items":{"$ref":"#"}},"k":{"type":"object","properties":{},"const":{"$ref":"#"}}}}"##,
            normalized:
                ##"{"$defs":{"root":{"type":"string"},"root_2":{"type":"object","properties":{"r":{"$ref":"#/$defs/root"},"kids":{"type":"array","items":{"$ref":"#/$defs/root_2"}},"k":{"type":"object","properties":{},"const":{"$ref":"#"},"additionalProperties":false}},"additionalProperties":false}},"type":"object","properties":{"r":{"$ref":"#/$defs/root"},"kids":{"type":"array","items":{"$ref":"#/$defs/root_2"}},"k":{"type":"object","properties":{},"const":{"$ref":"#"},"additionalProperties":false}},"additionalProperties":false}"##
        ),
        AcceptedCase(
            "mutual recursion through objects",
            ##"{"$defs":{"A":{"type":"object","properties":{"b":{"$ref":"#/$defs/B"}}},"B":{"type":"object","properties":{"a":{"anyOf":[{"$ref":"#/$defs/A"},{"type":"null"}]}}}},"type":"object","properties":{"start":{"$ref":"#/$defs/A"}}}"##
        ),
        AcceptedCase(
            "top-level $ref",
            ##"{"$ref":"#/$defs/Args","$defs":{"Args":{"type":"object","properties":{"q":{"type":"string"}}}}}"##),
        AcceptedCase(
            "anyOf branch is a union of objects",
            ##"{"$defs":{"U":{"anyOf":[{"type":"object","properties":{"a":{"type":"string"}}},{"type":"object","properties":{"b":{"type":"string"}}}]}},"type":"object","properties":{"v":{"anyOf":[{"$ref":"#/$defs/U"},{"type":"object","properties":{"c":{"type":"string"}}}]}}}"##
        ),
        AcceptedCase(
            "JSON Pointer escapes in a name",
            ##"{"$defs":{"a/b~c":{"type":"string"}},"type":"object","properties":{"x":{"$ref":"#/$defs/a~1b~0c"}}}"##),
        AcceptedCase(
            "annotations kept",
            ##"{"type":"object","title":"Args","description":"d","$comment":"c","properties":{"a":{"type":"string","default":"x","examples":["x","y"],"deprecated":true,"readOnly":false,"writeOnly":false}}}"##,
            normalized:
                ##"{"type":"object","title":"Args","description":"d","$comment":"c","properties":{"a":{"type":"string","default":"x","examples":["x","y"],"deprecated":true,"readOnly":false,"writeOnly":false}},"additionalProperties":false}"##
        ),
        AcceptedCase(
            "pattern becomes description",
            ##"{"type":"object","properties":{"city":{"type":"string","pattern":"^[a-z]+$"}}}"##,
            normalized:
                ##"{"type":"object","properties":{"city":{"type":"string","description":"(pattern: ^[a-z]+$)"}},"additionalProperties":false}"##,
            warnings: 1),
        AcceptedCase(
            "format appended to a description, lengths enforced",
            ##"{"type":"object","properties":{"email":{"description":"Address","type":"string","format":"email","minLength":3,"maxLength":254}}}"##,
            normalized:
                ##"{"type":"object","properties":{"email":{"description":"Address (format: email)","type":"string","minLength":3,"maxLength":254}},"additionalProperties":false}"##,
            warnings: 1),
        AcceptedCase(
            "multipleOf", ##"{"type":"object","properties":{"n":{"type":"number","multipleOf":0.5}}}"##, warnings: 1),
        AcceptedCase(
            "uniqueItems and object counts",
            ##"{"type":"object","minProperties":1,"maxProperties":2,"properties":{"t":{"type":"array","items":{"type":"string","contentEncoding":"base64","contentMediaType":"image/png"},"uniqueItems":true}}}"##,
            warnings: 5),
        AcceptedCase(
            "unusual property names",
            ##"{"type":"object","properties":{"first name":{"type":"string"},"a.b":{"type":"string"},"":{"type":"string"},"ünï":{"type":"string"}}}"##
        ),
        AcceptedCase(
            "Zod output (zod-to-json-schema)",
            ##"{"type":"object","properties":{"path":{"type":"string","description":"File path"},"recursive":{"type":"boolean","default":false}},"required":["path"],"additionalProperties":false,"$schema":"http://json-schema.org/draft-07/schema#"}"##,
            normalized:
                ##"{"type":"object","properties":{"path":{"type":"string","description":"File path"},"recursive":{"type":"boolean","default":false}},"required":["path"],"additionalProperties":false}"##
        ),
        AcceptedCase(
            "OpenAI Agents SDK strict schema",
            ##"{"properties":{"city":{"title":"City","type":"string"},"days":{"anyOf":[{"type":"integer"},{"type":"null"}],"title":"Days"}},"required":["city","days"],"title":"get_weather_args","type":"object","additionalProperties":false}"##
        ),
    ]

    @Test("accepted schemas", arguments: accepted)
    func accepts(_ c: AcceptedCase) throws {
        let report = try ToolSchemaValidator.validate(json(c.schema), path: root)
        if let normalized = c.normalized {
            #expect(report.normalized.jsonString == json(normalized).jsonString)
        }
        #expect(report.warnings.count == c.warnings, "\(report.warnings)")
        // Normalizing is idempotent: the output is accepted again and unchanged (warnings are gone, since
        // the unenforced keywords now live in descriptions).
        let again = try ToolSchemaValidator.validate(report.normalized, path: root)
        #expect(again.normalized == report.normalized)
        #expect(again.warnings.isEmpty)
    }

    static let rejected: [RejectedCase] = [
        // The top level.
        RejectedCase("string instead of a schema", ##""x""##, at: "", "JSON object"),
        RejectedCase("boolean schema", ##"true"##, at: "", "boolean schemas"),
        RejectedCase("array instead of a schema", ##"[]"##, at: ""),
        RejectedCase("open-ended top-level object", ##"{"type":"object"}"##, at: "", "open-ended"),
        RejectedCase("top level not an object", ##"{"type":"string"}"##, at: "", "object schema"),
        RejectedCase(
            "top-level anyOf",
            ##"{"anyOf":[{"type":"object","properties":{}},{"type":"object","properties":{"a":{"type":"string"}}}]}"##,
            at: "", "object schema"),
        RejectedCase("nullable top level", ##"{"type":["object","null"],"properties":{}}"##, at: "", "object schema"),
        RejectedCase("top-level $defs only", ##"{"$defs":{}}"##, at: "", "declare a type"),
        // Open-ended objects.
        RejectedCase(
            "additionalProperties true", ##"{"type":"object","properties":{},"additionalProperties":true}"##,
            at: "additionalProperties", "open-ended objects are not supported"),
        RejectedCase(
            "additionalProperties schema (dict)",
            ##"{"type":"object","properties":{"m":{"type":"object","additionalProperties":{"type":"integer"}}}}"##,
            at: "properties.m.additionalProperties", "open-ended"),
        RejectedCase(
            "additionalProperties is a string", ##"{"type":"object","properties":{},"additionalProperties":"no"}"##,
            at: "additionalProperties", "must be false"),
        RejectedCase(
            "nested object without properties", ##"{"type":"object","properties":{"meta":{"type":"object"}}}"##,
            at: "properties.meta", "open-ended"),
        RejectedCase(
            "patternProperties", ##"{"type":"object","properties":{},"patternProperties":{"^x":{"type":"string"}}}"##,
            at: "patternProperties"),
        RejectedCase(
            "unevaluatedProperties", ##"{"type":"object","properties":{},"unevaluatedProperties":false}"##,
            at: "unevaluatedProperties"),
        RejectedCase(
            "propertyNames", ##"{"type":"object","properties":{},"propertyNames":{"pattern":"^a"}}"##,
            at: "propertyNames"),
        // required and properties.
        RejectedCase(
            "required names an undeclared property",
            ##"{"type":"object","properties":{"a":{"type":"string"}},"required":["a","b"]}"##,
            at: "required[1]", "\"b\" is not declared"),
        RejectedCase(
            "required is a string", ##"{"type":"object","properties":{"x":{"type":"string"}},"required":"x"}"##,
            at: "required", "array"),
        RejectedCase(
            "required repeats a name",
            ##"{"type":"object","properties":{"x":{"type":"string"}},"required":["x","x"]}"##, at: "required[1]",
            "twice"),
        RejectedCase(
            "required holds a number", ##"{"type":"object","properties":{"x":{"type":"string"}},"required":[1]}"##,
            at: "required[0]"),
        RejectedCase(
            "properties is an array", ##"{"type":"object","properties":[]}"##, at: "properties", "object of schemas"),
        RejectedCase(
            "property schema true", ##"{"type":"object","properties":{"a":true}}"##, at: "properties.a",
            "boolean schemas"),
        RejectedCase(
            "untyped property {}", ##"{"type":"object","properties":{"a":{}}}"##, at: "properties.a", "declare a type"),
        RejectedCase(
            "property with only a description", ##"{"type":"object","properties":{"a":{"description":"anything"}}}"##,
            at: "properties.a", "declare a type"),
        // Unsupported keywords.
        RejectedCase(
            "allOf", ##"{"type":"object","properties":{"a":{"allOf":[{"type":"string"}]}}}"##, at: "properties.a.allOf",
            "allOf is not supported"),
        RejectedCase("oneOf", ##"{"type":"object","properties":{},"oneOf":[]}"##, at: "oneOf", "use anyOf"),
        RejectedCase(
            "not", ##"{"type":"object","properties":{"a":{"type":"string","not":{"const":"x"}}}}"##,
            at: "properties.a.not"),
        RejectedCase(
            "if/then/else", ##"{"type":"object","properties":{"a":{"type":"string","if":{},"then":{},"else":{}}}}"##,
            at: "properties.a.if"),
        RejectedCase(
            "dependentRequired", ##"{"type":"object","properties":{},"dependentRequired":{}}"##, at: "dependentRequired"
        ),
        RejectedCase(
            "unknown keyword", ##"{"type":"object","properties":{"a":{"type":"string","foo":1}}}"##,
            at: "properties.a.foo", "unknown keyword"),
        RejectedCase(
            "OpenAPI nullable", ##"{"type":"object","properties":{"a":{"type":"string","nullable":true}}}"##,
            at: "properties.a.nullable"),
        RejectedCase("$id", ##"{"$id":"https://example.com/s","type":"object","properties":{}}"##, at: "$id"),
        // Arrays.
        RejectedCase(
            "array without items", ##"{"type":"object","properties":{"tags":{"type":"array"}}}"##,
            at: "properties.tags", "items"),
        RejectedCase(
            "items is a number", ##"{"type":"object","properties":{"tags":{"type":"array","items":5}}}"##,
            at: "properties.tags.items", "JSON object"),
        RejectedCase(
            "items is a tuple", ##"{"type":"object","properties":{"t":{"type":"array","items":[{"type":"string"}]}}}"##,
            at: "properties.t.items", "tuple"),
        RejectedCase(
            "prefixItems",
            ##"{"type":"object","properties":{"t":{"type":"array","prefixItems":[{"type":"string"}],"items":{"type":"string"}}}}"##,
            at: "properties.t.prefixItems", "tuples"),
        RejectedCase(
            "items is {}", ##"{"type":"object","properties":{"t":{"type":"array","items":{}}}}"##,
            at: "properties.t.items", "declare a type"),
        RejectedCase(
            "negative minItems",
            ##"{"type":"object","properties":{"t":{"type":"array","items":{"type":"string"},"minItems":-1}}}"##,
            at: "properties.t.minItems", "non-negative integer"),
        RejectedCase(
            "fractional maxItems",
            ##"{"type":"object","properties":{"t":{"type":"array","items":{"type":"string"},"maxItems":1.5}}}"##,
            at: "properties.t.maxItems"),
        RejectedCase(
            "minItems above maxItems",
            ##"{"type":"object","properties":{"t":{"type":"array","items":{"type":"string"},"minItems":3,"maxItems":2}}}"##,
            at: "properties.t.maxItems", "less than minItems"),
        RejectedCase(
            "items on an object",
            ##"{"type":"object","properties":{"o":{"type":"object","properties":{},"items":{"type":"string"}}}}"##,
            at: "properties.o.items", "does not apply"),
        // Numbers.
        RejectedCase(
            "minimum is a string", ##"{"type":"object","properties":{"n":{"type":"number","minimum":"a"}}}"##,
            at: "properties.n.minimum", "a number"),
        RejectedCase(
            "minimum above maximum",
            ##"{"type":"object","properties":{"n":{"type":"integer","minimum":5,"maximum":3}}}"##,
            at: "properties.n.maximum", "leaves no value"),
        RejectedCase(
            "exclusive bounds meet",
            ##"{"type":"object","properties":{"n":{"type":"number","exclusiveMinimum":1,"maximum":1}}}"##,
            at: "properties.n.maximum"),
        RejectedCase(
            "draft-4 boolean exclusiveMinimum",
            ##"{"type":"object","properties":{"n":{"type":"number","minimum":0,"exclusiveMinimum":true}}}"##,
            at: "properties.n.exclusiveMinimum"),
        RejectedCase(
            "minimum on a string", ##"{"type":"object","properties":{"s":{"type":"string","minimum":1}}}"##,
            at: "properties.s.minimum", "does not apply to type \"string\""),
        RejectedCase(
            "minimum without a type", ##"{"type":"object","properties":{"n":{"minimum":1}}}"##,
            at: "properties.n.minimum", "needs \"type\""),
        RejectedCase(
            "properties on a string", ##"{"type":"object","properties":{"s":{"type":"string","properties":{}}}}"##,
            at: "properties.s.properties"),
        RejectedCase(
            "additionalProperties on a string",
            ##"{"type":"object","properties":{"s":{"type":"string","additionalProperties":false}}}"##,
            at: "properties.s.additionalProperties"),
        RejectedCase(
            "multipleOf zero", ##"{"type":"object","properties":{"n":{"type":"number","multipleOf":0}}}"##,
            at: "properties.n.multipleOf"),
        // enum, const and type.
        RejectedCase(
            "empty enum", ##"{"type":"object","properties":{"e":{"type":"string","enum":[]}}}"##,
            at: "properties.e.enum", "at least one"),
        RejectedCase(
            "enum is a string", ##"{"type":"object","properties":{"e":{"enum":"a"}}}"##, at: "properties.e.enum"),
        RejectedCase(
            "enum value of the wrong type",
            ##"{"type":"object","properties":{"e":{"type":"integer","enum":[1,"x"]}}}"##, at: "properties.e.enum[1]",
            "not of type integer"),
        RejectedCase(
            "enum null without nullable",
            ##"{"type":"object","properties":{"e":{"type":"string","enum":["a",null]}}}"##, at: "properties.e.enum[1]"),
        RejectedCase(
            "const of the wrong type", ##"{"type":"object","properties":{"c":{"type":"boolean","const":"yes"}}}"##,
            at: "properties.c.const"),
        RejectedCase(
            "unknown type", ##"{"type":"object","properties":{"s":{"type":"str"}}}"##, at: "properties.s.type",
            "unknown type"),
        RejectedCase(
            "type is a number", ##"{"type":"object","properties":{"s":{"type":5}}}"##, at: "properties.s.type"),
        RejectedCase(
            "union of two types", ##"{"type":"object","properties":{"s":{"type":["string","integer"]}}}"##,
            at: "properties.s.type", "[\"<type>\", \"null\"]"),
        RejectedCase(
            "union of three types", ##"{"type":"object","properties":{"s":{"type":["string","null","integer"]}}}"##,
            at: "properties.s.type"),
        RejectedCase(
            "null twice", ##"{"type":"object","properties":{"s":{"type":["null","null"]}}}"##, at: "properties.s.type"),
        // anyOf.
        RejectedCase(
            "anyOf of integer and number (both start with a digit)",
            ##"{"type":"object","properties":{"v":{"anyOf":[{"type":"integer"},{"type":"number"}]}}}"##,
            at: "properties.v.anyOf[1]", "two number branches"),
        RejectedCase(
            "anyOf of two strings",
            ##"{"type":"object","properties":{"v":{"anyOf":[{"type":"object","properties":{}},{"type":"string"},{"type":"null"},{"type":"string","title":"again"}]}}}"##,
            at: "properties.v.anyOf[3]", "two string branches"),
        RejectedCase(
            "anyOf of two arrays (one through a reference)",
            ##"{"$defs":{"L":{"type":"array","items":{"type":"string"}}},"type":"object","properties":{"v":{"anyOf":[{"$ref":"#/$defs/L"},{"type":"array","items":{"type":"integer"}}]}}}"##,
            at: "properties.v.anyOf[1]", "two array branches"),
        RejectedCase(
            "empty anyOf", ##"{"type":"object","properties":{"v":{"anyOf":[]}}}"##, at: "properties.v.anyOf",
            "at least one"),
        RejectedCase(
            "anyOf is an object", ##"{"type":"object","properties":{"v":{"anyOf":{}}}}"##, at: "properties.v.anyOf"),
        RejectedCase(
            "anyOf with a sibling type",
            ##"{"type":"object","properties":{"v":{"type":"object","anyOf":[{"type":"object","properties":{}}]}}}"##,
            at: "properties.v.type", "cannot be combined with anyOf"),
        RejectedCase(
            "bad schema inside anyOf",
            ##"{"type":"object","properties":{"v":{"anyOf":[{"type":"object"},{"type":"null"}]}}}"##,
            at: "properties.v.anyOf[0]", "open-ended"),
        // References.
        RejectedCase(
            "undefined $ref", ##"{"type":"object","properties":{"x":{"$ref":"#/$defs/Missing"}}}"##,
            at: "properties.x.$ref", "undefined"),
        RejectedCase(
            "$ref to definitions under $defs name",
            ##"{"$defs":{"A":{"type":"string"}},"type":"object","properties":{"x":{"$ref":"#/definitions/A"}}}"##,
            at: "properties.x.$ref"),
        RejectedCase(
            "remote $ref", ##"{"type":"object","properties":{"x":{"$ref":"https://example.com/schema.json"}}}"##,
            at: "properties.x.$ref", "only local references"),
        RejectedCase(
            "$ref into properties",
            ##"{"type":"object","properties":{"a":{"type":"string"},"x":{"$ref":"#/properties/a"}}}"##,
            at: "properties.x.$ref"),
        RejectedCase(
            "$ref into a definition",
            ##"{"$defs":{"A":{"type":"object","properties":{"b":{"type":"string"}}}},"type":"object","properties":{"x":{"$ref":"#/$defs/A/properties/b"}}}"##,
            at: "properties.x.$ref"),
        RejectedCase(
            "bad JSON Pointer escape",
            ##"{"$defs":{"A":{"type":"string"}},"type":"object","properties":{"x":{"$ref":"#/$defs/A~2"}}}"##,
            at: "properties.x.$ref", "JSON Pointer"),
        RejectedCase(
            "$ref is a number", ##"{"type":"object","properties":{"x":{"$ref":5}}}"##, at: "properties.x.$ref"),
        RejectedCase(
            "$ref with a sibling type",
            ##"{"$defs":{"A":{"type":"string"}},"type":"object","properties":{"x":{"$ref":"#/$defs/A","type":"string"}}}"##,
            at: "properties.x.type", "cannot be combined with $ref"),
        RejectedCase("$defs is an array", ##"{"$defs":[],"type":"object","properties":{}}"##, at: "$defs"),
        RejectedCase(
            "definition is true", ##"{"$defs":{"A":true},"type":"object","properties":{}}"##, at: "$defs.A",
            "boolean schemas"),
        RejectedCase(
            "nested $defs", ##"{"type":"object","properties":{"x":{"type":"string","$defs":{}}}}"##,
            at: "properties.x.$defs", "only supported at the top"),
        RejectedCase(
            "bad unused definition", ##"{"$defs":{"Unused":{"type":"object"}},"type":"object","properties":{}}"##,
            at: "$defs.Unused", "open-ended"),
        RejectedCase(
            "reference cycle A → B → A",
            ##"{"$defs":{"A":{"$ref":"#/$defs/B"},"B":{"$ref":"#/$defs/A"}},"type":"object","properties":{"x":{"$ref":"#/$defs/A"}}}"##,
            at: "$defs.B.$ref", "#/$defs/A → #/$defs/B → #/$defs/A"),
        RejectedCase(
            "self reference", ##"{"$defs":{"A":{"$ref":"#/$defs/A"}},"type":"object","properties":{}}"##,
            at: "$defs.A.$ref", "reference cycle"),
        RejectedCase(
            "cycle through anyOf only",
            ##"{"$defs":{"A":{"anyOf":[{"$ref":"#/$defs/B"},{"type":"null"}]},"B":{"anyOf":[{"$ref":"#/$defs/A"},{"type":"null"}]}},"type":"object","properties":{}}"##,
            at: "$defs.B.anyOf[0].$ref", "reference cycle"),
        RejectedCase("top level refers to itself", ##"{"$ref":"#"}"##, at: "$ref", "reference cycle"),
        // Annotations and unenforced keywords of the wrong type.
        RejectedCase(
            "description is a number", ##"{"type":"object","description":5,"properties":{}}"##, at: "description",
            "a string"),
        RejectedCase(
            "examples is a string", ##"{"type":"object","properties":{"a":{"type":"string","examples":"x"}}}"##,
            at: "properties.a.examples"),
        RejectedCase(
            "pattern is a number", ##"{"type":"object","properties":{"a":{"type":"string","pattern":5}}}"##,
            at: "properties.a.pattern"),
        RejectedCase(
            "minLength is negative", ##"{"type":"object","properties":{"a":{"type":"string","minLength":-2}}}"##,
            at: "properties.a.minLength"),
        RejectedCase(
            "maxLength below minLength",
            ##"{"type":"object","properties":{"a":{"type":"string","minLength":4,"maxLength":3}}}"##,
            at: "properties.a.maxLength", "less than minLength"),
        RejectedCase(
            "maxLength on an integer", ##"{"type":"object","properties":{"a":{"type":"integer","maxLength":3}}}"##,
            at: "properties.a.maxLength", "does not apply"),
        RejectedCase(
            "uniqueItems is a string",
            ##"{"type":"object","properties":{"t":{"type":"array","items":{"type":"string"},"uniqueItems":"yes"}}}"##,
            at: "properties.t.uniqueItems"),
        RejectedCase("$schema is a number", ##"{"$schema":7}"##, at: "$schema"),
        // Bounds llama.cpp's converter would read wrongly: it takes counts as a C int (4294967296 became 0, so a
        // minLength the host checks was never generated) and integer bounds as an int64_t (2^64-1 became -1).
        RejectedCase(
            "minLength beyond a C int",
            ##"{"type":"object","properties":{"a":{"type":"string","minLength":4294967296}}}"##,
            at: "properties.a.minLength", "no larger than 2147483647"),
        RejectedCase(
            "minItems beyond a C int",
            ##"{"type":"object","properties":{"t":{"type":"array","items":{"type":"string"},"minItems":2147483648}}}"##,
            at: "properties.t.minItems", "no larger than 2147483647"),
        RejectedCase(
            "integer minimum beyond 2^53",
            ##"{"type":"object","properties":{"n":{"type":"integer","minimum":18446744073709551615}}}"##,
            at: "properties.n.minimum", "9007199254740991"),
        RejectedCase(
            "integer exclusiveMaximum beyond -2^53",
            ##"{"type":"object","properties":{"n":{"type":["integer","null"],"exclusiveMaximum":-1e300}}}"##,
            at: "properties.n.exclusiveMaximum", "9007199254740991"),
        // Paths name unusual property names unambiguously.
        RejectedCase(
            "quoted property name in the path", ##"{"type":"object","properties":{"first name":{"type":"text"}}}"##,
            at: ##"properties["first name"].type"##),
        RejectedCase(
            "dotted property name in the path", ##"{"type":"object","properties":{"a.b":{"type":"object"}}}"##,
            at: ##"properties["a.b"]"##),
    ]

    @Test("rejected schemas name the path", arguments: rejected)
    func rejects(_ c: RejectedCase) throws {
        let error = try #require(schemaError(json(c.schema)), "accepted")
        #expect(error.path == c.fullPath, "\(error.message)")
        #expect(c.fragment.isEmpty || error.message.contains(c.fragment), "\(error.message)")
        #expect(error.code == "invalid_function_parameters")
    }

    @Test("the tables are large enough")
    func tableSizes() {
        #expect(Self.accepted.count >= 30)
        #expect(Self.rejected.count >= 30)
    }

    // MARK: - Specific behaviour

    @Test("property order is preserved end to end")
    func propertyOrder() throws {
        let names = ["zeta", "alpha", "mu", "beta", "omega", "delta", "a1", "a0", "Z", "b", "c", "d", "e", "f", "g"]
        let properties = JSONObject(names.map { ($0, ["type": "string"] as JSONValue) })
        let schema: JSONValue = [
            "type": "object", "properties": .object(properties),
            "required": .array(names.reversed().map { .string($0) }),
        ]
        let report = try ToolSchemaValidator.validate(schema, path: root)
        let normalized = try #require(report.normalized["properties"]?.objectValue)
        #expect(normalized.keys == names)
        // The encoded bytes keep the order too, which is what a backend's grammar builder reads.
        let text = report.normalized.jsonString
        let positions = names.compactMap { text.range(of: "\"\($0)\":")?.lowerBound }
        #expect(positions.count == names.count)
        #expect(positions == positions.sorted())
        #expect(report.normalized["required"] == schema["required"])
    }

    @Test("recursion through $defs is kept as references, not expanded")
    func recursionKept() throws {
        let schema = json(
            ##"{"type":"object","properties":{"tree":{"$ref":"#/$defs/Node"}},"$defs":{"Node":{"type":"object","properties":{"label":{"type":"string"},"kids":{"type":"array","items":{"$ref":"#/$defs/Node"}}},"required":["label","kids"]}}}"##
        )
        let report = try ToolSchemaValidator.validate(schema, path: root)
        #expect(
            report.normalized.jsonString
                == ##"{"type":"object","properties":{"tree":{"$ref":"#/$defs/Node"}},"$defs":{"Node":{"type":"object","properties":{"label":{"type":"string"},"kids":{"type":"array","items":{"$ref":"#/$defs/Node"}}},"required":["label","kids"],"additionalProperties":false}},"additionalProperties":false}"##
        )
    }

    @Test("warning text names the path and says the keyword is kept as description")
    func warningText() throws {
        let schema = json(
            ##"{"type":"object","properties":{"city":{"type":"string","description":"City name","pattern":"^[a-z]+$"},"tags":{"type":"array","items":{"type":"string","format":"uuid"},"uniqueItems":true}}}"##
        )
        let report = try ToolSchemaValidator.validate(schema, path: "parameters")
        #expect(
            report.warnings == [
                "parameters.properties.city.pattern is not enforced (kept as description)",
                "parameters.properties.tags.items.format is not enforced (kept as description)",
                "parameters.properties.tags.uniqueItems is not enforced (kept as description)",
            ])
        #expect(report.normalized["properties"]?["city"]?["description"] == "City name (pattern: ^[a-z]+$)")
        #expect(report.normalized["properties"]?["city"]?["pattern"] == nil)
        #expect(report.normalized["properties"]?["tags"]?["items"]?["description"] == "(format: uuid)")
        #expect(report.normalized["properties"]?["tags"]?["description"] == "(uniqueItems: true)")
    }

    @Test("an empty base path gives paths without a leading dot")
    func emptyBasePath() {
        let error = schemaError(json(##"{"type":"object","properties":{"a":{"type":"object"}}}"##), path: "")
        #expect(error?.path == "properties.a")
    }

    /// `levels` nested array schemas inside the top-level object: the innermost is `levels` below the root.
    private func nested(_ levels: Int) -> JSONValue {
        var schema: JSONValue = ["type": "string"]
        for _ in 1..<levels {
            schema = ["type": "array", "items": schema]
        }
        return ["type": "object", "properties": ["x": schema]]
    }

    @Test("nesting is limited to 32 levels")
    func depthLimit() throws {
        _ = try ToolSchemaValidator.validate(nested(ToolSchemaValidator.maximumDepth), path: root)
        let error = try #require(schemaError(nested(ToolSchemaValidator.maximumDepth + 1)))
        #expect(error.path == root + ".properties.x" + String(repeating: ".items", count: 32))
        #expect(error.message.contains("32"))
        // Very deep input fails at the limit, without recursing through all of it.
        #expect(schemaError(nested(5000))?.path.hasSuffix(".items") == true)
    }

    @Test("long reference chains and cycles are handled without deep recursion")
    func longReferenceChains() throws {
        let count = ToolSchemaValidator.maximumNodes - 10  // deep enough to overflow a recursive walk
        var definitions = JSONObject()
        for index in 0..<count - 1 {
            definitions["d\(index)"] = ["$ref": .string("#/$defs/d\(index + 1)")]
        }
        definitions["d\(count - 1)"] = ["type": "object", "properties": [:]]
        var schema: JSONObject = [
            "type": "object", "properties": ["x": ["anyOf": [["$ref": "#/$defs/d0"], ["$ref": "#/$defs/d0"]]]],
        ]
        schema["$defs"] = .object(definitions)
        _ = try ToolSchemaValidator.validate(.object(schema), path: root)

        definitions["d\(count - 1)"] = ["$ref": "#/$defs/d0"]
        schema["$defs"] = .object(definitions)
        let error = try #require(schemaError(.object(schema)))
        #expect(error.message.contains("reference cycle"))
    }

    @Test("unions of references to unions cost linear time")
    func unionsOfUnions() throws {
        // d_i = anyOf[d_{i+1}, d_{i+1}]: naive object checks would take 2^count steps. (Four nodes a definition,
        // within maximumNodes.)
        let count = ToolSchemaValidator.maximumNodes / 4 - 10
        var definitions = JSONObject()
        for index in 0..<count - 1 {
            let next: JSONValue = ["$ref": .string("#/$defs/d\(index + 1)")]
            definitions["d\(index)"] = ["anyOf": [next, next, ["type": "null"]]]
        }
        definitions["d\(count - 1)"] = ["type": "object", "properties": [:]]
        var schema: JSONObject = ["type": "object", "properties": ["x": ["$ref": "#/$defs/d0"]]]
        schema["$defs"] = .object(definitions)
        // The bound only has to tell linear from exponential work: 2^count steps would never end, so it is generous
        // enough for a loaded machine and a sanitizer's slowdown (AddressSanitizer took 13 s at load 20–30, where an
        // ordinary build takes well under a second).
        let clock = ContinuousClock()
        let elapsed = try clock.measure { _ = try ToolSchemaValidator.validate(.object(schema), path: root) }
        #expect(elapsed < .seconds(60), "\(elapsed)")

        // The same chain ending in a string is not a union of objects: each definition has two union branches
        // (the last, two string branches) that a parser could not tell apart; definitions are checked in order.
        definitions["d\(count - 1)"] = ["type": "string"]
        schema["$defs"] = .object(definitions)
        let error = try #require(schemaError(.object(schema)))
        #expect(error.path == root + ".$defs.d0.anyOf[1]")
        #expect(error.message.contains("two union branches"))
    }

    @Test("two bounds on one side keep the tighter one, which says the same (llama.cpp reads only minimum/maximum)")
    func oneBoundPerSide() throws {
        let schema = json(
            ##"{"type":"object","properties":{"i":{"type":"integer","minimum":0,"exclusiveMinimum":5,"maximum":10,"exclusiveMaximum":20},"n":{"type":"number","exclusiveMinimum":1,"minimum":2,"exclusiveMaximum":3,"maximum":3}}}"##)
        let normalized = try ToolSchemaValidator.validate(schema, path: root).normalized
        #expect(
            normalized.objectValue?["properties"]
                == json(##"{"i":{"type":"integer","exclusiveMinimum":5,"maximum":10},"n":{"type":"number","minimum":2,"exclusiveMaximum":3}}"##))
    }

    @Test("counts written as 3e0 or 2.0 reach backends as integers (llama.cpp's converter read them as floats)")
    func countsAreNormalizedToIntegers() throws {
        let schema = json(
            ##"{"type":"object","properties":{"s":{"type":"string","minLength":3e0,"maxLength":2.0e1},"t":{"type":"array","items":{"type":"string"},"minItems":1.0,"maxItems":20e-1}}}"##)
        let normalized = try ToolSchemaValidator.validate(schema, path: root).normalized
        #expect(
            normalized.objectValue?["properties"]
                == json(##"{"s":{"type":"string","minLength":3,"maxLength":20},"t":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":2}}"##))
        // A fraction that is not zero, or a minimum above the maximum once both are read as integers, is still refused.
        #expect(schemaError(json(##"{"type":"object","properties":{"s":{"type":"string","maxLength":2.5}}}"##))?.path
            == root + ".properties.s.maxLength")
        #expect(schemaError(json(##"{"type":"object","properties":{"s":{"type":"string","minLength":3.0,"maxLength":2.00}}}"##))?.path
            == root + ".properties.s.maxLength")
    }

    @Test("a schema has at most maximumNodes nodes; the first one over is named")
    func nodeCountIsLimited() throws {
        func schema(properties: Int) -> JSONValue {
            var members = JSONObject()
            for index in 0..<properties { members["p\(index)"] = ["type": "boolean"] }
            return ["type": "object", "properties": .object(members)]
        }
        // The root and maximumNodes - 1 properties.
        _ = try ToolSchemaValidator.validate(schema(properties: ToolSchemaValidator.maximumNodes - 1), path: root)
        let error = try #require(schemaError(schema(properties: ToolSchemaValidator.maximumNodes)))
        #expect(error.path == root + ".properties.p\(ToolSchemaValidator.maximumNodes - 1)")
        #expect(error.message.contains("more than \(ToolSchemaValidator.maximumNodes) nodes"))
        // Definitions, items and branches count too.
        var definitions = JSONObject()
        for index in 0..<ToolSchemaValidator.maximumNodes / 2 {
            definitions["d\(index)"] = ["type": "array", "items": ["anyOf": [["type": "null"], ["type": "string"]]]]
        }
        let withDefinitions: JSONValue = ["type": "object", "properties": [:], "$defs": .object(definitions)]
        #expect(schemaError(withDefinitions)?.message.contains("nodes") == true)
    }

    @Test("errors are reported in document order within a node")
    func documentOrder() {
        let error = schemaError(
            json(##"{"type":"object","properties":{"a":{"type":"string","allOf":[],"oneOf":[]}}}"##))
        #expect(error?.path == root + ".properties.a.allOf")
    }

    @Test("error descriptions read as path: message")
    func errorDescription() {
        let error = ToolSchemaError(path: "tools[0].parameters", message: "m")
        #expect(error.description == "tools[0].parameters: m")
    }
}
