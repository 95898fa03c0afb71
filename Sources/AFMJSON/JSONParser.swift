// SPDX-License-Identifier: Apache-2.0

/// A strict RFC 8259 JSON parser that keeps object key order and exact number literals.
///
/// What it rejects, and why a gateway wants that:
/// - anything outside RFC 8259: trailing commas, comments, single quotes, `NaN`/`Infinity`, leading zeros,
///   unescaped control characters in strings, non-standard escapes, whitespace other than space, tab,
///   CR and LF;
/// - a leading UTF-8 byte order mark (``JSONParseError/Kind/syntax``): RFC 8259 forbids sending one, and
///   accepting it would let two parsers disagree about the same body;
/// - ill-formed UTF-8 anywhere, including overlong forms and encoded surrogates
///   (``JSONParseError/Kind/invalidUTF8``), and `\u` escapes that leave a lone surrogate
///   (``JSONParseError/Kind/invalidEscape``), so every parsed string is valid Unicode;
/// - duplicate keys in one object (``JSONParseError/Kind/duplicateKey``): different consumers would pick
///   different values, so no choice is safe;
/// - nesting deeper than ``Limits/maxDepth``, checked before descending, so hostile input such as a
///   million `[` fails fast and never exhausts the stack;
/// - more values than ``Limits/maxValues``, checked as each value starts, so a body of tiny values cannot build a
///   tree many times its size.
///
/// The parser works on a byte buffer in one pass, copies string runs without escapes in one go, and uses
/// no Foundation.
public struct JSONParser: Sendable {
    /// Resource limits for one parse.
    public struct Limits: Sendable {
        /// The deepest nesting of arrays and objects accepted; `[]` has depth 1 and a scalar depth 0.
        /// Values above ``maximumSupportedDepth`` are treated as that value, because parsing, encoding,
        /// comparing and releasing a value all recurse once per level.
        public var maxDepth: Int = 64
        /// The longest string (key or value) accepted, in bytes of its decoded UTF-8; `nil` means no limit
        /// beyond the input size. Longer strings fail with ``JSONParseError/Kind/syntax``.
        public var maxStringBytes: Int? = nil
        /// The most values (objects, arrays, strings, numbers, booleans and nulls, at any depth) accepted; `nil`
        /// means no limit beyond the input size. A document with more fails with
        /// ``JSONParseError/Kind/valueLimitExceeded`` as soon as the parser reaches one too many, so the tree it
        /// builds stays proportional to the limit: small values cost the tree many times their bytes (`{}` is 3
        /// bytes of input and tens of bytes of tree).
        public var maxValues: Int? = nil

        /// The hard ceiling on ``maxDepth``: far deeper than any real request, and shallow enough that the
        /// recursion in parsing, encoding, `==` and hashing stays well within an 8 MiB thread stack even
        /// in debug builds (they use about 1.3 KiB per level there, under 0.7 KiB in release builds).
        public static let maximumSupportedDepth = 1_000

        /// The most values a document from the network may hold, wherever it is parsed: afmd's request bodies (400
        /// `too_many_values`), the events `afm` reads from a server, the web chat's request bodies. Tiny values cost
        /// the tree many times their bytes: 14 MB of empty content parts peaked at 287 MB in afmd, and a 32 MiB event
        /// of `{}` costs about a GiB. 20,000 turns of a conversation are 60,000 values.
        public static let maximumDocumentValues = 262_144

        /// Creates limits; the defaults suit HTTP request bodies.
        public init(maxDepth: Int = 64, maxStringBytes: Int? = nil, maxValues: Int? = nil) {
            self.maxDepth = maxDepth
            self.maxStringBytes = maxStringBytes
            self.maxValues = maxValues
        }
    }

    /// Parses one JSON document (a value surrounded by optional whitespace) from UTF-8 bytes.
    public static func parse(_ bytes: [UInt8], limits: Limits = .init()) throws(JSONParseError) -> JSONValue {
        let result = bytes.withUnsafeBufferPointer { buffer in
            Result { () throws(JSONParseError) -> JSONValue in try parse(buffer, limits: limits) }
        }
        return try result.get()
    }

    /// Parses one JSON document from UTF-8 bytes in raw memory, such as a connection's receive buffer.
    public static func parse(
        _ bytes: UnsafeRawBufferPointer, limits: Limits = .init()
    ) throws(JSONParseError) -> JSONValue {
        let result = bytes.withMemoryRebound(to: UInt8.self) { buffer in
            Result { () throws(JSONParseError) -> JSONValue in try parse(buffer, limits: limits) }
        }
        return try result.get()
    }

    /// Parses one JSON document from a buffer of UTF-8 bytes.
    public static func parse(
        _ bytes: UnsafeBufferPointer<UInt8>, limits: Limits = .init()
    ) throws(JSONParseError) -> JSONValue {
        guard let base = bytes.baseAddress, !bytes.isEmpty else {
            throw JSONParseError(kind: .unexpectedEnd, offset: 0, detail: "the input is empty")
        }
        var core = ParserCore(base: base, count: bytes.count, limits: limits)
        defer { core.release() }
        return try core.parseDocument()
    }

    /// Parses one JSON document from a string (its UTF-8 bytes; offsets in errors count those bytes).
    public static func parse(_ text: String, limits: Limits = .init()) throws(JSONParseError) -> JSONValue {
        var text = text
        let result = text.withUTF8 { buffer in
            Result { () throws(JSONParseError) -> JSONValue in try parse(buffer, limits: limits) }
        }
        return try result.get()
    }
}
