// SPDX-License-Identifier: Apache-2.0

/// A JSON object: unique string keys, kept in insertion (document) order.
///
/// Order matters to a gateway: responses are compared byte for byte by clients and tests, and forwarded
/// bodies should look like what the client sent. Lookups are linear for small objects, which is faster
/// than hashing for the handful of keys a typical request has; objects with more than
/// ``indexThreshold`` keys keep a hash index, so neither lookups nor the parser's duplicate-key check
/// become quadratic on hostile input.
///
/// Keys are compared with Swift `String` equality, which treats canonically equivalent strings (such as
/// `"\u{E9}"` and `"e\u{301}"`) as equal. The parser therefore rejects such pairs as duplicates, which is
/// the conservative choice for a gateway.
///
/// Two objects are equal when they have the same keys in the same order with equal values.
public struct JSONObject: Sendable, Hashable, Sequence, ExpressibleByDictionaryLiteral {
    /// The element type of the sequence: one member, in order.
    public typealias Element = (key: String, value: JSONValue)

    /// Objects with more keys than this keep a hash index from key to position.
    @usableFromInline
    static let indexThreshold = 12

    /// One member. Keys and values live together in one array: one allocation per object, and the
    /// element type is this module's own, so the runtime's generic-metadata lookups stay cached.
    @usableFromInline
    struct Entry: Sendable, Hashable {
        @usableFromInline var key: String
        @usableFromInline var value: JSONValue

        @inlinable
        init(key: String, value: JSONValue) {
            self.key = key
            self.value = value
        }
    }

    @usableFromInline
    var _entries: [Entry]
    /// Position of each key; only present when there are more than ``indexThreshold`` keys, and absent from
    /// objects written as literals in code until they grow (``init(literalElements:)``).
    @usableFromInline
    var _index: [String: Int]?

    /// Creates an empty object.
    public init() {
        _entries = []
        _index = nil
    }

    /// Creates an object from key/value pairs, in the given order. If a key repeats, the later value
    /// replaces the earlier one at the earlier position (the same as assigning through the subscript).
    public init(_ pairs: [(String, JSONValue)]) {
        self.init()
        _entries.reserveCapacity(pairs.count)
        for (key, value) in pairs {
            self[key] = value
        }
    }

    /// Creates an object from a dictionary literal, keeping the written order.
    ///
    /// - Precondition: the keys are distinct (as for a `Dictionary` literal), which catches typos early.
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self.init(literalElements: elements)
    }

    /// Builds an object written as a literal in code, keeping the written order, without a hash index.
    ///
    /// Literal keys are the programmer's, not input, so the quadratic cases the index guards against cannot
    /// happen; lookups in them are rare (the response object, with ~32 members, is built per request and only
    /// encoded), and hashing every key made the index the largest part of building it. The index appears as
    /// soon as such an object grows through the subscript. Distinct keys are checked in debug builds only, where
    /// every literal runs under the tests.
    @usableFromInline
    init(literalElements elements: [(String, JSONValue)]) {
        _entries = []
        _entries.reserveCapacity(elements.count)
        for (key, value) in elements {
            assert(!_entries.contains { $0.key == key }, "duplicate key \"\(key)\" in a JSON object literal")
            _entries.append(Entry(key: key, value: value))
        }
        _index = nil
    }

    /// Builds an object from entries whose keys are known to be distinct (the parser checks), with the
    /// index the parser built if the object is large.
    @usableFromInline
    init(uniqueEntries entries: [Entry], index: [String: Int]?) {
        _entries = entries
        _index = index ?? JSONObject.makeIndex(entries)
    }

    /// The keys, in order.
    public var keys: [String] { _entries.map(\.key) }

    /// The values, in key order.
    public var values: [JSONValue] { _entries.map(\.value) }

    /// The number of members.
    public var count: Int { _entries.count }

    /// Whether the object has no members.
    public var isEmpty: Bool { _entries.isEmpty }

    /// The number of members (exact, so `Array(object)` allocates once).
    public var underestimatedCount: Int { _entries.count }

    /// Whether the object has a member named `key`.
    public func contains(key: String) -> Bool {
        position(of: key) != nil
    }

    /// The value for `key`, or `nil` if there is none.
    ///
    /// Setting a value replaces an existing member in place, or appends a new member at the end. Setting
    /// `nil` removes the member (later members keep their relative order).
    public subscript(key: String) -> JSONValue? {
        get {
            guard let i = position(of: key) else { return nil }
            return _entries[i].value
        }
        set {
            if let newValue {
                if let i = position(of: key) {
                    _entries[i].value = newValue
                } else {
                    appendNew(key, newValue)
                }
            } else {
                removeValue(forKey: key)
            }
        }
    }

    /// Removes the member named `key`, returning its value, or `nil` if there was none.
    @discardableResult
    public mutating func removeValue(forKey key: String) -> JSONValue? {
        guard let i = position(of: key) else { return nil }
        let old = _entries.remove(at: i).value
        // Positions after `i` shifted; rebuild rather than patch, removal is rare.
        _index = JSONObject.makeIndex(_entries)
        return old
    }

    /// An iterator over the members, in order.
    public struct Iterator: IteratorProtocol, Sendable {
        @usableFromInline
        let object: JSONObject
        @usableFromInline
        var position = 0

        @inlinable
        init(object: JSONObject) {
            self.object = object
        }

        /// The next member, or `nil` after the last one.
        @inlinable
        public mutating func next() -> Element? {
            guard position < object._entries.count else { return nil }
            defer { position += 1 }
            let entry = object._entries[position]
            return (key: entry.key, value: entry.value)
        }
    }

    /// Returns an iterator over the members as `(key:, value:)` pairs, in order.
    @inlinable
    public func makeIterator() -> Iterator {
        Iterator(object: self)
    }

    // The index is a cache derived from the keys, so it takes no part in equality or hashing.

    /// Same keys in the same order with equal values.
    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        lhs._entries == rhs._entries
    }

    /// Hashes the keys and values in order.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(_entries)
    }

    // MARK: - Internals

    /// The position of `key`, by linear scan for small objects and through the index otherwise.
    @inlinable
    func position(of key: String) -> Int? {
        if let index = _index { return index[key] }
        return _entries.firstIndex { $0.key == key }
    }

    @usableFromInline
    mutating func appendNew(_ key: String, _ value: JSONValue) {
        _entries.append(Entry(key: key, value: value))
        if _index != nil {
            _index![key] = _entries.count - 1
        } else if _entries.count > JSONObject.indexThreshold {
            _index = JSONObject.makeIndex(_entries)
        }
    }

    @usableFromInline
    static func makeIndex(_ entries: [Entry]) -> [String: Int]? {
        guard entries.count > indexThreshold else { return nil }
        var index = [String: Int](minimumCapacity: entries.count)
        for (i, entry) in entries.enumerated() { index[entry.key] = i }
        return index
    }
}
