// SPDX-License-Identifier: Apache-2.0

/// An ordered list of HTTP header fields, looked up case-insensitively.
///
/// Order and repeated names are kept exactly as received (or added), because some fields (`Set-Cookie`,
/// `Vary`) repeat and intermediaries must not reorder them. Lookups compare names ASCII-case-insensitively
/// without allocating.
public struct HTTPHeaders: Sendable, Sequence, Equatable, ExpressibleByDictionaryLiteral, CustomStringConvertible {
    /// One field: its name as written, and its value with surrounding whitespace removed.
    public typealias Element = (name: String, value: String)

    private var fields: [Element]

    /// Creates an empty header list.
    public init() { fields = [] }

    /// Creates a header list from `(name, value)` pairs, in order.
    public init(_ pairs: [(String, String)]) {
        fields = pairs.map { (name: $0.0, value: $0.1) }
    }

    /// Creates a header list from a literal such as `["Content-Type": "application/json"]`, in order.
    public init(dictionaryLiteral elements: (String, String)...) {
        fields = elements.map { (name: $0.0, value: $0.1) }
    }

    /// The number of fields (repeated names count separately).
    public var count: Int { fields.count }

    /// Whether there are no fields.
    public var isEmpty: Bool { fields.isEmpty }

    /// The value of the first field called `name` (case-insensitive), or `nil`.
    public subscript(name: String) -> String? {
        for field in fields where Self.namesEqual(field.name, name) { return field.value }
        return nil
    }

    /// Every value of fields called `name` (case-insensitive), in order.
    public func values(for name: String) -> [String] {
        fields.compactMap { Self.namesEqual($0.name, name) ? $0.value : nil }
    }

    /// Whether a field called `name` (case-insensitive) is present.
    public func contains(name: String) -> Bool {
        fields.contains { Self.namesEqual($0.name, name) }
    }

    /// Appends a field, keeping any existing fields with the same name.
    public mutating func add(name: String, value: String) {
        fields.append((name: name, value: value))
    }

    /// Replaces the first field called `name` in place and removes the others, or appends when there is none.
    public mutating func replaceOrAdd(name: String, value: String) {
        guard let first = fields.firstIndex(where: { Self.namesEqual($0.name, name) }) else {
            fields.append((name: name, value: value))
            return
        }
        fields[first] = (name: name, value: value)
        var index = fields.count - 1
        while index > first {
            if Self.namesEqual(fields[index].name, name) { fields.remove(at: index) }
            index -= 1
        }
    }

    /// Removes every field called `name` (case-insensitive).
    public mutating func remove(name: String) {
        fields.removeAll { Self.namesEqual($0.name, name) }
    }

    /// Iterates the fields in order.
    public func makeIterator() -> IndexingIterator<[Element]> { fields.makeIterator() }

    /// Same fields with the same spelling, in the same order.
    public static func == (lhs: HTTPHeaders, rhs: HTTPHeaders) -> Bool {
        lhs.fields.count == rhs.fields.count
            && zip(lhs.fields, rhs.fields).allSatisfy { $0.name == $1.name && $0.value == $1.value }
    }

    /// `[Name: value, …]`, for logs and test failures.
    public var description: String {
        "[" + fields.map { "\($0.name): \($0.value)" }.joined(separator: ", ") + "]"
    }

    /// ASCII case-insensitive comparison of two field names, without allocating. It runs for every field looked up
    /// and every response field written, so it compares the UTF-8 bytes in place (iterating the two UTF-8 views with
    /// `zip` cost ~10 instructions per byte: docs/PERFORMANCE.md, session 9).
    static func namesEqual(_ lhs: String, _ rhs: String) -> Bool {
        guard lhs.utf8.count == rhs.utf8.count else { return false }
        let equal = lhs.utf8.withContiguousStorageIfAvailable { left in
            rhs.utf8.withContiguousStorageIfAvailable { right in
                for index in 0..<left.count where left[index] != right[index] {
                    guard ASCII.lowercased(left[index]) == ASCII.lowercased(right[index]) else { return false }
                }
                return true
            }
        }
        if let equal = equal.flatMap({ $0 }) { return equal }
        for (a, b) in zip(lhs.utf8, rhs.utf8) where a != b {
            guard ASCII.lowercased(a) == ASCII.lowercased(b) else { return false }
        }
        return true
    }
}
