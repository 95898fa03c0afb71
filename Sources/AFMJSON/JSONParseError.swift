// SPDX-License-Identifier: Apache-2.0

/// Why a document was rejected by ``JSONParser``, and where.
///
/// The parser stops at the first problem it finds, so `offset` always points at the byte that made the
/// document invalid (or at the end of the input for ``Kind/unexpectedEnd``). The `message` is meant to be
/// returned to API clients verbatim, so it never echoes input bytes that might not be valid UTF-8.
public struct JSONParseError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The category of a parse failure. Gateways map these to error codes; the message carries the detail.
    public enum Kind: Sendable, Hashable {
        /// A structural error: an unexpected character, a missing `:`/`,`, a trailing comma, an unescaped
        /// control character in a string, a byte order mark, a string over
        /// ``JSONParser/Limits/maxStringBytes``, and so on.
        case syntax
        /// Arrays and objects were nested deeper than ``JSONParser/Limits/maxDepth``.
        case depthLimitExceeded
        /// The document has more values than ``JSONParser/Limits/maxValues``.
        case valueLimitExceeded
        /// The input is not well-formed UTF-8 (including overlong forms, encoded surrogates and truncated
        /// sequences).
        case invalidUTF8
        /// An object has the same member name twice. A gateway must not guess which one the client meant.
        case duplicateKey
        /// A number does not follow the RFC 8259 grammar (leading zeros, a bare `-`, `1.`, `.5`, `1e`, `+1`).
        case invalidNumber
        /// A backslash escape in a string is not one of the RFC 8259 escapes, has bad hex digits, or
        /// encodes a lone UTF-16 surrogate.
        case invalidEscape
        /// A complete value was followed by something other than whitespace.
        case trailingData
        /// The input ended before the value was complete (including empty or whitespace-only input).
        case unexpectedEnd
    }

    /// The category of the failure.
    public var kind: Kind
    /// The byte offset in the input at which the problem was detected (0-based).
    public var offset: Int
    /// A human-readable explanation, for example
    /// `invalid JSON at byte 17: expected ',' or '}' after object member`.
    public var message: String

    /// Creates an error with an explicit message.
    public init(kind: Kind, offset: Int, message: String) {
        self.kind = kind
        self.offset = offset
        self.message = message
    }

    /// Creates an error whose message is `invalid JSON at byte <offset>: <detail>`.
    public init(kind: Kind, offset: Int, detail: String) {
        self.init(kind: kind, offset: offset, message: "invalid JSON at byte \(offset): \(detail)")
    }

    /// The same as ``message``.
    public var description: String { message }
}
