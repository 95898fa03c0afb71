// SPDX-License-Identifier: Apache-2.0
import AFMCore
import AFMJSON

/// Readers for the fields every dialect shares (model, booleans, sampling numbers, token caps, `store`), so each
/// rule and each error message exists once. Every error is a 400 naming the field in `param`.
public enum RequestFields {
    /// The most JSON values (objects, arrays, strings, numbers, booleans, nulls) a request body may hold, checked
    /// while it is parsed (400 `too_many_values`): the cap shared by every document from the network
    /// (``JSONParser/Limits/maximumDocumentValues``, which says why).
    public static let maximumJSONValues = JSONParser.Limits.maximumDocumentValues
    /// The most items a conversation may hold: Chat Completions and Messages `messages`, Responses `input` (400
    /// `array_above_max_length` naming the field).
    public static let maximumConversationItems = 50_000
    /// The most content parts one message (or tool output, or Messages `system`) may hold (400
    /// `array_above_max_length` naming its content).
    public static let maximumContentParts = 1_000

    /// Parses a request body: a JSON object at most 64 levels deep of at most ``maximumJSONValues`` values.
    public static func object(_ bytes: [UInt8]) throws(AFMError) -> JSONObject {
        let value: JSONValue
        do {
            value = try JSONParser.parse(bytes, limits: .init(maxDepth: 64, maxValues: maximumJSONValues))
        } catch {
            if error.kind == .valueLimitExceeded {
                throw AFMError(
                    .invalidRequest,
                    "The request body holds more than \(maximumJSONValues) JSON values (objects, arrays, strings, numbers, "
                        + "booleans and nulls); this server refuses larger documents (byte \(error.offset)).",
                    publicCode: "too_many_values")
            }
            let code = error.kind == .depthLimitExceeded ? "nesting_too_deep" : "invalid_json"
            throw AFMError(.invalidRequest, "The request body is not valid JSON: \(error.message)", publicCode: code)
        }
        guard let object = value.objectValue else {
            throw AFMError(.invalidRequest, "The request body must be a JSON object, not \(value.typeName).", publicCode: "invalid_json")
        }
        return object
    }

    /// The required `model`: a non-empty string of at most 256 bytes.
    public static func model(_ object: JSONObject) throws(AFMError) -> String {
        guard let model = object["model"] else { throw missing("model") }
        guard let name = model.stringValue, !name.isEmpty, name.utf8.count <= 256 else {
            throw typeError("model", expected: "a non-empty string of at most 256 bytes", got: model)
        }
        return name
    }

    /// `store`: absent, null or false; true is refused (the gateway keeps nothing).
    public static func checkStore(_ object: JSONObject) throws(AFMError) {
        guard let store = object["store"], !store.isNull else { return }
        guard let flag = store.boolValue else { throw typeError("store", expected: "a boolean", got: store) }
        if flag {
            throw AFMError(
                .invalidRequest, "store: true is not supported: this gateway keeps no responses. Send store: false or omit it.",
                param: "store", publicCode: "unsupported_parameter")
        }
    }

    /// An optional boolean (null counts as absent).
    public static func optionalBool(_ object: JSONObject, _ key: String, param: String? = nil) throws(AFMError) -> Bool? {
        guard let value = object[key], !value.isNull else { return nil }
        guard let flag = value.boolValue else { throw typeError(param ?? key, expected: "a boolean", got: value) }
        return flag
    }

    /// An optional number within `range` (null counts as absent).
    public static func optionalNumber(_ object: JSONObject, _ key: String, in range: ClosedRange<Double>) throws(AFMError) -> Double? {
        guard let value = object[key], !value.isNull else { return nil }
        guard let number = value.numberValue?.doubleValue else { throw typeError(key, expected: "a number", got: value) }
        guard range.contains(number) else {
            throw AFMError(
                .invalidRequest, "Invalid '\(key)': expected a value between \(range.lowerBound) and \(range.upperBound).",
                param: key, publicCode: "invalid_value")
        }
        return number
    }

    /// An optional integer of at least `minimum` (null counts as absent): token caps, `top_k`, `n`.
    public static func optionalInteger(_ object: JSONObject, _ key: String, minimum: Int, param: String? = nil) throws(AFMError) -> Int? {
        guard let value = object[key], !value.isNull else { return nil }
        let param = param ?? key
        guard let number = value.numberValue, number.isInteger, let integer = number.intValue else {
            throw typeError(param, expected: "an integer", got: value)
        }
        guard integer >= minimum else {
            throw AFMError(
                .invalidRequest, "Invalid '\(param)': expected a value >= \(minimum), but got \(number.literal).",
                param: param, publicCode: "integer_below_min_value")
        }
        return integer
    }

    /// An optional string (null counts as absent).
    public static func optionalString(_ object: JSONObject, _ key: String, param: String? = nil) throws(AFMError) -> String? {
        guard let value = object[key], !value.isNull else { return nil }
        guard let text = value.stringValue else { throw typeError(param ?? key, expected: "a string", got: value) }
        return text
    }

    /// The most UTF-8 bytes of one stop sequence, in every dialect and form (one string or a list element): the
    /// builder holds back up to this much text and compares every delta against each sequence.
    public static let maximumStopSequenceBytes = 256

    /// Stop sequences: one string or a list of at most `maximum` non-empty strings, each of at most
    /// ``maximumStopSequenceBytes`` bytes (the one place this rule lives: Chat Completions `stop`, Messages
    /// `stop_sequences`; Responses has no stop sequences).
    public static func stopSequences(_ value: JSONValue?, param: String, maximum: Int, allowString: Bool) throws(AFMError) -> [String] {
        guard let value, !value.isNull else { return [] }
        if allowString, let single = value.stringValue {
            guard !single.isEmpty, single.utf8.count <= maximumStopSequenceBytes else {
                throw AFMError(
                    .invalidRequest, "'\(param)' must be a non-empty string of at most \(maximumStopSequenceBytes) bytes.", param: param,
                    publicCode: "invalid_value")
            }
            return [single]
        }
        guard let list = value.arrayValue else {
            throw typeError(param, expected: allowString ? "a string or an array of strings" : "an array of strings", got: value)
        }
        guard list.count <= maximum else {
            throw AFMError(.invalidRequest, "'\(param)' takes at most \(maximum) sequences, but got \(list.count).", param: param, publicCode: "array_above_max_length")
        }
        var sequences: [String] = []
        for (index, element) in list.enumerated() {
            guard let text = element.stringValue, !text.isEmpty, text.utf8.count <= maximumStopSequenceBytes else {
                throw AFMError(
                    .invalidRequest, "'\(param)[\(index)]' must be a non-empty string of at most \(maximumStopSequenceBytes) bytes.",
                    param: "\(param)[\(index)]",
                    publicCode: "invalid_value")
            }
            sequences.append(text)
        }
        return sequences
    }

    /// Refuses stop sequences with a structured answer (`format` json_schema or json_object): a stop sequence
    /// would cut the JSON short of valid, and a cut answer cannot be delivered as the structured answer asked
    /// for (docs/chat-completions.md and docs/anthropic-messages.md, "Stop sequences"). A 400 naming `param` up
    /// front, instead of a 500 after generating (which SDKs retry).
    public static func checkStopSequences(_ stop: [String], param: String, format: OutputFormat) throws(AFMError) {
        guard !stop.isEmpty, format.isStructured else { return }
        throw AFMError(
            .invalidRequest,
            "'\(param)' cannot be combined with a JSON \(format.param): a stop sequence would cut the structured answer short "
                + "of valid JSON. Send one or the other.",
            param: param, publicCode: "unsupported_parameter")
    }

    /// Refuses a conversation (`messages`, `input`) of more than ``maximumConversationItems`` items.
    public static func checkConversation(_ list: [JSONValue], param: String) throws(AFMError) {
        try checkLength(list.count, param: param, maximum: maximumConversationItems, what: "items")
    }

    /// Refuses a list of content parts (a message's content, a tool output's parts, Messages `system` blocks) of
    /// more than ``maximumContentParts`` parts.
    public static func checkContentParts(_ list: [JSONValue], param: String) throws(AFMError) {
        try checkLength(list.count, param: param, maximum: maximumContentParts, what: "content parts")
    }

    private static func checkLength(_ count: Int, param: String, maximum: Int, what: String) throws(AFMError) {
        guard count > maximum else { return }
        throw AFMError(
            .invalidRequest, "'\(param)' holds \(count) \(what); at most \(maximum) are allowed.", param: param,
            publicCode: "array_above_max_length")
    }

    /// A missing required field.
    public static func missing(_ param: String) -> AFMError {
        AFMError(.invalidRequest, "Missing required parameter: '\(param)'.", param: param, publicCode: "missing_required_parameter")
    }

    /// A field of the wrong type.
    public static func typeError(_ param: String, expected: String, got value: JSONValue) -> AFMError {
        AFMError(
            .invalidRequest, "Invalid type for '\(param)': expected \(expected), but got \(value.typeName).",
            param: param, publicCode: "invalid_type")
    }
}
