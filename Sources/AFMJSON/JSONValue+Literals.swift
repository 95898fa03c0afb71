// SPDX-License-Identifier: Apache-2.0

// Literal conformances let tests and response builders write JSON inline:
// `let body: JSONValue = ["object": "list", "data": [], "usage": ["total_tokens": 3]]`.

extension JSONValue: ExpressibleByNilLiteral {
    /// `nil` is `null`.
    public init(nilLiteral: ()) {
        self = .null
    }
}

extension JSONValue: ExpressibleByBooleanLiteral {
    /// `true`/`false` are booleans.
    public init(booleanLiteral value: Bool) {
        self = .bool(value)
    }
}

extension JSONValue: ExpressibleByIntegerLiteral {
    /// Integer literals are integer numbers.
    public init(integerLiteral value: Int) {
        self = .number(JSONNumber(value))
    }
}

extension JSONValue: ExpressibleByFloatLiteral {
    /// Float literals become the shortest round-trip literal of the `Double` (`0.5`, `2.0`).
    public init(floatLiteral value: Double) {
        self = .number(JSONNumber(value))
    }
}

extension JSONValue: ExpressibleByStringLiteral {
    /// String literals are strings.
    public init(stringLiteral value: String) {
        self = .string(value)
    }
}

extension JSONValue: ExpressibleByArrayLiteral {
    /// Array literals are arrays.
    public init(arrayLiteral elements: JSONValue...) {
        self = .array(elements)
    }
}

extension JSONValue: ExpressibleByDictionaryLiteral {
    /// Dictionary literals are objects that keep the written order: `["b": 1, "a": 2]` encodes as
    /// `{"b":1,"a":2}`.
    ///
    /// - Precondition: the keys are distinct (checked in debug builds; see `JSONObject.init(literalElements:)`).
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(JSONObject(literalElements: elements))
    }
}
