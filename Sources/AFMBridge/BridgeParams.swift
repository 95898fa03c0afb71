// SPDX-License-Identifier: Apache-2.0
import AFMJSON

/// A params object (or a nested object of one) read field by field: every problem is a −32602 error naming the
/// field by its path (`policy.max_steps`, `tools[1].name`), and fields nobody read are refused as unknown (a
/// typo is never ignored silently).
struct BridgeParams {
    let object: JSONObject
    /// The path of this object in the params ("" for the params themselves).
    let path: String
    private var read: Set<String> = []

    init(_ object: JSONObject, path: String = "") {
        self.object = object
        self.path = path
    }

    func field(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    private mutating func value(_ key: String) -> JSONValue? {
        read.insert(key)
        guard let value = object[key], !value.isNull else { return nil }
        return value
    }

    mutating func string(_ key: String) throws(JSONRPCError) -> String {
        guard let value = try optionalString(key) else { throw .invalidParams(field(key), "is required (a string)") }
        return value
    }

    mutating func optionalString(_ key: String, maxBytes: Int = 1 << 20) throws(JSONRPCError) -> String? {
        guard let value = value(key) else { return nil }
        guard let text = value.stringValue else { throw .invalidParams(field(key), "must be a string, not \(value.typeName)") }
        guard text.utf8.count <= maxBytes else { throw .invalidParams(field(key), "is longer than \(maxBytes) bytes") }
        return text
    }

    /// A non-empty string of letters, digits, `_`, `-` and `.` (tool and server names).
    mutating func name(_ key: String) throws(JSONRPCError) -> String {
        let text = try string(key)
        let allowed = text.utf8.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || byte == 0x5F
                || byte == 0x2D || byte == 0x2E
        }
        guard !text.isEmpty, text.utf8.count <= 64, allowed else { throw .invalidParams(field(key), "must be 1 to 64 ASCII letters, digits, '_', '-' or '.'") }
        return text
    }

    mutating func optionalInt(_ key: String, in range: ClosedRange<Int>) throws(JSONRPCError) -> Int? {
        guard let value = value(key) else { return nil }
        guard let number = value.numberValue?.intValue else {
            throw .invalidParams(field(key), "must be an integer, not \(value.jsonString.prefix(40))")
        }
        guard range.contains(number) else {
            throw .invalidParams(field(key), "must be between \(range.lowerBound) and \(range.upperBound)")
        }
        return number
    }

    mutating func optionalDouble(_ key: String, in range: ClosedRange<Double>) throws(JSONRPCError) -> Double? {
        guard let value = value(key) else { return nil }
        guard let number = value.numberValue?.doubleValue, range.contains(number) else {
            throw .invalidParams(field(key), "must be a number between \(range.lowerBound) and \(range.upperBound)")
        }
        return number
    }

    mutating func optionalBool(_ key: String) throws(JSONRPCError) -> Bool? {
        guard let value = value(key) else { return nil }
        guard let flag = value.boolValue else { throw .invalidParams(field(key), "must be true or false") }
        return flag
    }

    mutating func optionalObject(_ key: String) throws(JSONRPCError) -> BridgeParams? {
        guard let value = value(key) else { return nil }
        guard let object = value.objectValue else { throw .invalidParams(field(key), "must be an object, not \(value.typeName)") }
        return BridgeParams(object, path: field(key))
    }

    /// The raw JSON object at `key` (world facts, schemas), not checked further.
    mutating func optionalRawObject(_ key: String) throws(JSONRPCError) -> JSONObject? {
        guard let value = value(key) else { return nil }
        guard let object = value.objectValue else { throw .invalidParams(field(key), "must be an object, not \(value.typeName)") }
        return object
    }

    mutating func rawObject(_ key: String) throws(JSONRPCError) -> JSONObject {
        guard let object = try optionalRawObject(key) else { throw .invalidParams(field(key), "is required (an object)") }
        return object
    }

    /// An array of objects, each read as nested params (`key[i]`).
    mutating func optionalObjects(_ key: String, max: Int) throws(JSONRPCError) -> [BridgeParams]? {
        guard let value = value(key) else { return nil }
        guard let array = value.arrayValue else { throw .invalidParams(field(key), "must be an array, not \(value.typeName)") }
        guard array.count <= max else { throw .invalidParams(field(key), "has \(array.count) entries; at most \(max) are allowed") }
        var result: [BridgeParams] = []
        for (index, element) in array.enumerated() {
            guard let object = element.objectValue else { throw .invalidParams("\(field(key))[\(index)]", "must be an object") }
            result.append(BridgeParams(object, path: "\(field(key))[\(index)]"))
        }
        return result
    }

    mutating func optionalStrings(_ key: String, max: Int) throws(JSONRPCError) -> [String]? {
        guard let value = value(key) else { return nil }
        guard let array = value.arrayValue else { throw .invalidParams(field(key), "must be an array of strings") }
        guard array.count <= max else { throw .invalidParams(field(key), "has \(array.count) entries; at most \(max) are allowed") }
        var result: [String] = []
        for (index, element) in array.enumerated() {
            guard let text = element.stringValue else { throw .invalidParams("\(field(key))[\(index)]", "must be a string") }
            result.append(text)
        }
        return result
    }

    mutating func strings(_ key: String, max: Int) throws(JSONRPCError) -> [String] {
        guard let value = try optionalStrings(key, max: max) else { throw .invalidParams(field(key), "is required (an array of strings)") }
        return value
    }

    /// An object of string values (environment variables).
    mutating func optionalStringMap(_ key: String) throws(JSONRPCError) -> [String: String]? {
        guard let object = try optionalRawObject(key) else { return nil }
        var result: [String: String] = [:]
        for (name, value) in object {
            guard let text = value.stringValue else { throw .invalidParams("\(field(key)).\(name)", "must be a string") }
            result[name] = text
        }
        return result
    }

    /// The raw value at `key`, whatever its type (nil when absent or null).
    mutating func raw(_ key: String) -> JSONValue? { value(key) }

    /// Fails on the first field that no reader asked for.
    func finish() throws(JSONRPCError) {
        if let unknown = object.keys.first(where: { !read.contains($0) }) {
            throw .invalidParams(field(unknown), "unknown field (see docs/bridge.md for this method's params)")
        }
    }
}
