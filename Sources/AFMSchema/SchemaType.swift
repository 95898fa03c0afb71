// SPDX-License-Identifier: Apache-2.0
import AFMJSON

/// A JSON Schema `type` name.
enum SchemaType: String, CaseIterable {
    case object, array, string, number, integer, boolean, null

    /// Whether `value` is an instance of this type (`integer` accepts any number with no fraction, `1.0`
    /// included, as JSON Schema says).
    func matches(_ value: JSONValue) -> Bool {
        switch (self, value) {
        case (.object, .object), (.array, .array), (.string, .string), (.boolean, .bool), (.null, .null),
            (.number, .number):
            return true
        case (.integer, .number(let number)):
            if number.isInteger { return true }
            let double = number.doubleValue
            return double.isFinite && double.rounded(.towardZero) == double
        default:
            return false
        }
    }
}

/// A node's declared `type`: one name, or one name made nullable (`["string", "null"]`).
struct SchemaTypes: Equatable {
    /// The non-null type (`null` only for a plain `"null"` schema).
    var base: SchemaType
    /// Whether `null` is also allowed (written as a two-element `type` array).
    var nullable: Bool

    func matches(_ value: JSONValue) -> Bool {
        base.matches(value) || (nullable && value.isNull)
    }

    /// How the type reads in messages: `string` or `string or null`.
    var name: String {
        nullable ? "\(base.rawValue) or null" : base.rawValue
    }
}
