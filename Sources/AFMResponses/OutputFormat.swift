// SPDX-License-Identifier: Apache-2.0
import AFMCore
import AFMJSON
import AFMSchema

/// The form a request's answer must take: plain text, any JSON object, or JSON matching a schema.
///
/// This is the pipeline's own type, not a wire shape: each dialect decodes its field into it — Responses
/// `text.format` (``responses(_:)``), Chat Completions `response_format` (``jsonSchema(_:param:)`` on its
/// `json_schema` object, ``jsonObject(param:)``) — and everything after that is shared: the capability check
/// (`structured_output`, else 400 `unsupported_capability`), the generation request document's `output_format`
/// (docs/backend-abi.md §8.2), and the check of the finished answer (``check(_:)``), which turns a backend's
/// invalid JSON into `response.failed` with `invalid_structured_output` instead of `completed`.
///
/// A schema goes through `ToolSchemaValidator` with purpose `.output`: the subset tools use, so what cannot be
/// enforced is refused with 400 `invalid_json_schema` naming the exact JSON path (`param`), and what is only kept
/// as description text comes back in ``warnings`` (`x-afm-warning` headers).
public struct OutputFormat: Sendable {
    /// Which of the three forms.
    public enum Kind: Sendable, Hashable {
        /// Free text (the default).
        case text
        /// Any JSON object (`{"type": "json_object"}`).
        case jsonObject
        /// JSON matching ``OutputFormat/schema``.
        case jsonSchema
    }

    /// The form.
    public let kind: Kind
    /// The schema's name (`[a-zA-Z0-9_-]{1,64}`), for `json_schema`.
    public let name: String?
    /// The schema's description, when the client gave one.
    public let description: String?
    /// The normalized schema (property order kept, `additionalProperties: false` explicit, unenforced keywords
    /// moved into descriptions), for `json_schema`.
    public let schema: JSONValue?
    /// `strict` as the client sent it (nil when absent). Informational: the schema is always enforced.
    public let strict: Bool?
    /// One line per schema keyword kept only as description text.
    public let warnings: [String]
    /// Where the request set the format (`text.format`, `response_format`): the `param` of errors about it.
    public let param: String
    private let validator: SchemaInstanceValidator?

    /// Free text.
    public static let text = OutputFormat(kind: .text, param: "text.format")

    private init(
        kind: Kind, name: String? = nil, description: String? = nil, schema: JSONValue? = nil, strict: Bool? = nil,
        warnings: [String] = [], param: String
    ) {
        self.kind = kind
        self.name = name
        self.description = description
        self.schema = schema
        self.strict = strict
        self.warnings = warnings
        self.param = param
        validator = schema.map(SchemaInstanceValidator.init(schema:))
    }

    /// Whether the answer must be JSON (the model needs the `structured_output` capability).
    public var isStructured: Bool { kind != .text }

    // MARK: - Decoding

    /// Any JSON object, requested at `param`.
    public static func jsonObject(param: String) -> OutputFormat {
        OutputFormat(kind: .jsonObject, param: param)
    }

    /// A `json_schema` format from an object holding `name`, `schema`, and optionally `description` and `strict`
    /// (Responses' `text.format` itself, Chat Completions' `response_format.json_schema`).
    ///
    /// - Parameters:
    ///   - object: The object; members other than those four (and `type`) are refused.
    ///   - param: Its path in the request (`text.format`, `response_format.json_schema`); errors name paths below it.
    /// - Throws: `AFMError` 400: `missing_required_parameter`, `invalid_type`, `invalid_value`, `unknown_parameter`,
    ///   or `invalid_json_schema` with `param` the JSON path of the offending schema node.
    public static func jsonSchema(_ object: JSONObject, param: String) throws(AFMError) -> OutputFormat {
        for (key, _) in object where !["type", "name", "schema", "description", "strict"].contains(key) {
            throw AFMError(
                .invalidRequest, "Unknown parameter: '\(param).\(key)'.", param: "\(param).\(key)",
                publicCode: "unknown_parameter")
        }
        guard let nameValue = object["name"], !nameValue.isNull else {
            throw AFMError(
                .invalidRequest, "Missing required parameter: '\(param).name'.", param: "\(param).name",
                publicCode: "missing_required_parameter")
        }
        guard let name = nameValue.stringValue else {
            throw ResponsesRequest.typeError("\(param).name", expected: "a string", got: nameValue)
        }
        guard (1...64).contains(name.utf8.count), name.utf8.allSatisfy(Self.isNameByte) else {
            throw AFMError(
                .invalidRequest, "Invalid '\(param).name': use 1–64 characters of a-z, A-Z, 0-9, '_' and '-'.",
                param: "\(param).name", publicCode: "invalid_value")
        }
        var description: String?
        if let value = object["description"], !value.isNull {
            guard let text = value.stringValue else {
                throw ResponsesRequest.typeError("\(param).description", expected: "a string", got: value)
            }
            description = text
        }
        var strict: Bool?
        if let value = object["strict"], !value.isNull {
            guard let flag = value.boolValue else {
                throw ResponsesRequest.typeError("\(param).strict", expected: "a boolean", got: value)
            }
            strict = flag
        }
        guard let schema = object["schema"], !schema.isNull else {
            throw AFMError(
                .invalidRequest, "Missing required parameter: '\(param).schema'.", param: "\(param).schema",
                publicCode: "missing_required_parameter")
        }
        let report: ToolSchemaReport
        do {
            report = try ToolSchemaValidator.validate(schema, path: "\(param).schema", purpose: .output)
        } catch {
            throw AFMError(
                .invalidRequest, "Unsupported JSON schema at '\(error.path)': \(error.message)", param: error.path,
                publicCode: "invalid_json_schema")
        }
        return OutputFormat(
            kind: .jsonSchema, name: name, description: description, schema: report.normalized, strict: strict,
            warnings: report.warnings, param: param)
    }

    /// Decodes Responses' `text.format` (absent or null: text).
    ///
    /// - Throws: `AFMError` 400 naming the field under `text.format`.
    public static func responses(_ value: JSONValue?) throws(AFMError) -> OutputFormat {
        let param = "text.format"
        guard let value, !value.isNull else { return .text }
        guard let object = value.objectValue else {
            throw ResponsesRequest.typeError(param, expected: "an object", got: value)
        }
        guard let typeValue = object["type"] else {
            throw AFMError(
                .invalidRequest, "Missing required parameter: '\(param).type'.", param: "\(param).type",
                publicCode: "missing_required_parameter")
        }
        switch typeValue.stringValue {
        case "text", "json_object":
            for (key, _) in object where key != "type" {
                throw AFMError(
                    .invalidRequest, "Unknown parameter: '\(param).\(key)'.", param: "\(param).\(key)",
                    publicCode: "unknown_parameter")
            }
            return typeValue.stringValue == "text" ? .text : .jsonObject(param: param)
        case "json_schema":
            return try jsonSchema(object, param: param)
        default:
            throw AFMError(
                .invalidRequest, "Invalid '\(param).type': \(typeValue.jsonString). Supported: text, json_object, json_schema.",
                param: "\(param).type", publicCode: "invalid_value")
        }
    }

    private static func isNameByte(_ byte: UInt8) -> Bool {
        (byte | 0x20 >= UInt8(ascii: "a") && byte | 0x20 <= UInt8(ascii: "z"))
            || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "_")
            || byte == UInt8(ascii: "-")
    }

    // MARK: - The generation request document

    /// The `output_format` member of the generation request document (docs/backend-abi.md §8.2):
    /// `{"type":"text"}`, `{"type":"json_object"}`, or
    /// `{"type":"json_schema","name","description","schema","strict"}` with the normalized schema.
    public var documentValue: JSONValue {
        switch kind {
        case .text:
            return ["type": "text"]
        case .jsonObject:
            return ["type": "json_object"]
        case .jsonSchema:
            return [
                "type": "json_schema", "name": name.map(JSONValue.string) ?? nil,
                "description": description.map(JSONValue.string) ?? nil, "schema": schema ?? nil,
                "strict": strict.map(JSONValue.bool) ?? nil,
            ]
        }
    }

    /// A backend's refusal of the schema, located in the client's request: a backend names the keyword it cannot
    /// enforce by its path in the generation request document (`output_format.schema.properties.score.maximum`,
    /// the local backend's grammar limits); the client sees it as `param` under its own field
    /// (`text.format.schema.properties.score.maximum`, `response_format.json_schema.schema…`). Other errors pass
    /// unchanged.
    public func locating(_ error: AFMError) -> AFMError {
        let prefix = "output_format.schema"
        guard kind == .jsonSchema, error.code == .invalidRequest, error.param == nil, error.message.hasPrefix(prefix)
        else { return error }
        let rest = error.message.dropFirst(prefix.count)
        let pathEnd = rest.firstIndex { $0 == " " || $0 == ":" } ?? rest.endIndex
        guard rest.isEmpty || rest.first == "." || rest.first == "[" || rest.first == " " || rest.first == ":" else {
            return error
        }
        var located = error
        located.param = "\(param).schema" + rest[..<pathEnd]
        located.message = "\(param).schema" + rest
        return located
    }

    // MARK: - Checking an answer

    /// The deepest nesting an answer may have: the request parser's own limit, plenty for any schema a model
    /// can fill.
    public static let maximumAnswerDepth = 128

    /// Checks a finished answer: it must be one JSON value (surrounding whitespace allowed), an object for
    /// `json_object`, matching the schema for `json_schema`. Text always passes.
    ///
    /// - Returns: nil when the answer is valid, else what is wrong, for the `invalid_structured_output` message.
    public func check(_ answer: String) -> String? {
        guard kind != .text else { return nil }
        let value: JSONValue
        do {
            value = try JSONParser.parse(Array(answer.utf8), limits: .init(maxDepth: Self.maximumAnswerDepth))
        } catch {
            return "the answer is not JSON (\(error.message))"
        }
        switch kind {
        case .text:
            return nil
        case .jsonObject:
            return value.objectValue == nil ? "the answer is \(value.typeName), not a JSON object" : nil
        case .jsonSchema:
            return validator?.violation(of: value).map { "the answer does not match the schema at \($0)" }
        }
    }
}
