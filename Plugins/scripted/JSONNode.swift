// SPDX-License-Identifier: Apache-2.0

/// A parsed JSON value, as `JSONNodeParser` produces it for generation request documents.
///
/// `generate` runs on the host's request path, so it does not go through Foundation's `JSONSerialization` (which
/// boxes every value in `NSNumber`/`NSDictionary` and costs dynamic casts on every read; it was about a sixth of
/// afmd's CPU per scripted request). Objects keep their members in document order in an array: the documents the
/// host sends have a dozen keys, where a linear scan beats hashing.
enum JSONNode: Sendable, Hashable {
    case null
    case bool(Bool)
    /// A number, as its literal text (already checked against JSON's grammar).
    case number(String)
    case string(String)
    case array([JSONNode])
    case object([Member])

    /// One member of an object.
    struct Member: Sendable, Hashable {
        var key: String
        var value: JSONNode
    }

    /// The member `key` of an object (the last one when a key repeats, as JSONSerialization did), or nil.
    subscript(key: String) -> JSONNode? {
        guard case .object(let members) = self else { return nil }
        return members.last(where: { $0.key == key })?.value
    }

    /// True for `null` and for a missing member (`nil`).
    static func isNullOrMissing(_ node: JSONNode?) -> Bool {
        switch node {
        case nil, .null?: true
        default: false
        }
    }

    /// The value as a string, or nil.
    var string: String? {
        if case .string(let text) = self { return text }
        return nil
    }

    /// The value as an array, or nil.
    var array: [JSONNode]? {
        if case .array(let items) = self { return items }
        return nil
    }

    /// Whether the value is an object.
    var isObject: Bool {
        if case .object = self { return true }
        return false
    }

    /// The value as an integer that JSON wrote exactly (`3`, `3.0` or `3e0`, not `3.5`, not `true`), or nil.
    var int: Int? {
        guard case .number(let text) = self else { return nil }
        if let exact = Int(text) { return exact }
        guard let value = Double(text) else { return nil }
        return Int(exactly: value)
    }
}
