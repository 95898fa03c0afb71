// SPDX-License-Identifier: Apache-2.0
import Foundation

/// Strict accessors over the `Any` trees that Foundation's `JSONSerialization` produces, plus a compact writer.
///
/// `JSONSerialization` hands back `NSNumber` for numbers *and* booleans, and `NSNumber` happily converts between
/// them (`1 as? Bool` is `true`). These helpers keep JSON's types apart, so a setting or field that says `true`
/// where a number is expected is an error rather than 1 (a script's `"repeat": true` rather than a loop of one).
public enum JSON {
    /// Parses `bytes` as a JSON object.
    ///
    /// - Throws: A message describing why the bytes are not a JSON object.
    public static func object(from bytes: Data) throws(BackendError) -> [String: Any] {
        let value: Any
        do {
            value = try JSONSerialization.jsonObject(with: bytes, options: [])
        } catch {
            throw .invalidRequest("not valid JSON (\(describe(error)))")
        }
        guard let object = value as? [String: Any] else { throw .invalidRequest("not a JSON object") }
        return object
    }

    /// True for JSON `true`/`false` (a boxed Boolean, not any number).
    public static func isBool(_ value: Any?) -> Bool {
        guard let number = value as? NSNumber else { return false }
        // JSONSerialization boxes booleans as __NSCFBoolean, whose objCType is "c"; numbers it parses are never "c".
        return String(cString: number.objCType) == "c"
    }

    /// The value as a JSON boolean, or nil.
    public static func bool(_ value: Any?) -> Bool? {
        guard isBool(value), let number = value as? NSNumber else { return nil }
        return number.boolValue
    }

    /// The value as an integer that JSON wrote exactly (`3` or `3.0`, not `3.5`, not `true`), or nil.
    public static func int(_ value: Any?) -> Int? {
        guard !isBool(value), let number = value as? NSNumber else { return nil }
        return value as? Int ?? Int(exactly: number.doubleValue)
    }

    /// The value as a string, or nil.
    public static func string(_ value: Any?) -> String? { value as? String }

    /// True when the key is absent or JSON `null`.
    public static func isNullOrMissing(_ value: Any?) -> Bool { value == nil || value is NSNull }

    /// The value as an array, or nil.
    public static func array(_ value: Any?) -> [Any]? { value as? [Any] }

    /// The value as an object, or nil.
    public static func object(_ value: Any?) -> [String: Any]? { value as? [String: Any] }

    /// Serializes a parsed value back to compact JSON on one line (sorted keys, `/` unescaped).
    ///
    /// Used for records: JSON strings escape every control character, so the output never contains a newline.
    public static func serialize(_ value: Any) -> String {
        guard JSONSerialization.isValidJSONObject([value]),
            let data = try? JSONSerialization.data(
                withJSONObject: value, options: [.sortedKeys, .withoutEscapingSlashes, .fragmentsAllowed])
        else { return "null" }
        return String(decoding: data, as: UTF8.self)
    }

    /// `string` as a quoted JSON string literal.
    public static func quote(_ string: String) -> String {
        var out = "\""
        out.reserveCapacity(string.utf8.count + 2)
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x2028 || scalar.value == 0x2029:
                out +=
                    "\\u" + String(repeating: "0", count: 4 - String(scalar.value, radix: 16).count)
                    + String(scalar.value, radix: 16)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// A short description of a Foundation parsing error (its debug description when it has one).
    private static func describe(_ error: any Error) -> String {
        let nsError = error as NSError
        if let detail = nsError.userInfo[NSDebugDescriptionErrorKey] as? String { return detail }
        return nsError.localizedDescription
    }
}
