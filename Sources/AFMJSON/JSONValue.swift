// SPDX-License-Identifier: Apache-2.0

/// A JSON value that keeps everything a gateway must forward faithfully: object key order and the exact
/// text of numbers.
///
/// Build values with literals (`["model": "m", "stream": true]`), parse them with ``JSONParser``, and
/// encode them with ``encoded()``. Equality is structural: objects compare keys in order, numbers compare
/// their literal text (see ``JSONNumber``).
///
/// Equality, hashing and encoding recurse once per nesting level, as does releasing a value; that is
/// why ``JSONParser`` bounds nesting with ``JSONParser/Limits/maxDepth``.
public enum JSONValue: Sendable, Hashable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number, kept as its exact literal.
    case number(JSONNumber)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object with ordered, unique keys.
    case object(JSONObject)
}

extension JSONValue {
    /// The member `key` if this is an object that has it, else `nil` (also for non-objects), so lookups
    /// chain: `body["response_format"]?["type"]?.stringValue`.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let object) = self else { return nil }
        return object[key]
    }

    /// The element at `index` if this is an array and the index is in range, else `nil`.
    public subscript(index: Int) -> JSONValue? {
        guard case .array(let array) = self, array.indices.contains(index) else { return nil }
        return array[index]
    }

    /// The string if this is a `.string`, else `nil`.
    public var stringValue: String? {
        guard case .string(let value) = self else { return nil }
        return value
    }

    /// The boolean if this is a `.bool`, else `nil`.
    public var boolValue: Bool? {
        guard case .bool(let value) = self else { return nil }
        return value
    }

    /// The number if this is a `.number`, else `nil`.
    public var numberValue: JSONNumber? {
        guard case .number(let value) = self else { return nil }
        return value
    }

    /// The elements if this is an `.array`, else `nil`.
    public var arrayValue: [JSONValue]? {
        guard case .array(let value) = self else { return nil }
        return value
    }

    /// The object if this is an `.object`, else `nil`.
    public var objectValue: JSONObject? {
        guard case .object(let value) = self else { return nil }
        return value
    }

    /// Whether this is `.null`.
    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// The value, or nil when it is `null`: for members where "absent" and "null" both mean the default
    /// (`object["text"]?.nonNull ?? defaultText`). A closure that returns `nil` as a `JSONValue` would give
    /// `.null`, not nil, because `JSONValue` is `ExpressibleByNilLiteral`.
    public var nonNull: JSONValue? {
        if isNull { return Optional.none }  // not `isNull ? nil : self`: that ternary's `nil` is `.null`
        return self
    }

    /// The JSON type name for error messages: `null`, `boolean`, `number`, `string`, `array` or `object`.
    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .number: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }
}

extension JSONValue: CustomStringConvertible {
    /// The compact JSON encoding, so values print and interpolate as JSON.
    public var description: String { jsonString }
}
