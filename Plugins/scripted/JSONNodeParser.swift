// SPDX-License-Identifier: Apache-2.0

/// A strict RFC 8259 parser for the generation request documents `generate` receives.
///
/// Rejects what `JSONSerialization` rejected: trailing commas, comments, control characters in strings, invalid
/// UTF-8, lone surrogates, leading zeros, trailing garbage, and nesting deeper than `maximumDepth` (so a
/// hostile document cannot overflow the caller's stack: `generate` runs on a host thread).
struct JSONNodeParser {
    /// Nesting limit for arrays and objects (JSONSerialization's limit).
    static let maximumDepth = 512

    /// Why a document is not JSON.
    struct Failure: Error {
        var message: String
    }

    private let bytes: UnsafeBufferPointer<UInt8>
    private let topLevelKeys: [String]?
    private var position = 0
    private var depth = 0

    private init(bytes: UnsafeBufferPointer<UInt8>, topLevelKeys: [String]?) {
        self.bytes = bytes
        self.topLevelKeys = topLevelKeys
    }

    /// Parses one JSON document (any value, surrounded by optional whitespace).
    ///
    /// - Parameter topLevelKeys: When the document is an object, the only members it keeps; the values of the
    ///   others are checked just as strictly but not built (nil keeps everything). The backend reads five keys of
    ///   a request document, and building the rest was most of the parse.
    /// - Throws: `Failure` naming the problem and its byte offset.
    static func parse(_ bytes: UnsafeBufferPointer<UInt8>, keepingTopLevelKeys topLevelKeys: [String]? = nil)
        throws(Failure) -> JSONNode
    {
        var parser = JSONNodeParser(bytes: bytes, topLevelKeys: topLevelKeys)
        parser.skipWhitespace()
        let value = try parser.parseValue()
        parser.skipWhitespace()
        guard parser.position == bytes.count else { throw parser.failure("unexpected data after the document") }
        return value
    }

    // MARK: - Values

    private mutating func parseValue() throws(Failure) -> JSONNode {
        guard position < bytes.count else { throw failure("unexpected end of data") }
        switch bytes[position] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectWord("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectWord("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectWord("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw failure("unexpected character")
        }
    }

    private mutating func parseObject() throws(Failure) -> JSONNode {
        try enter()
        position += 1
        var members: [JSONNode.Member] = []
        skipWhitespace()
        if peek() == UInt8(ascii: "}") {
            position += 1
            depth -= 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard peek() == UInt8(ascii: "\"") else { throw failure("expected a string key") }
            let key = try parseString()
            skipWhitespace()
            guard peek() == UInt8(ascii: ":") else { throw failure("expected ':'") }
            position += 1
            skipWhitespace()
            if depth == 1, let keep = topLevelKeys, !keep.contains(key) {
                try skipValue()
            } else {
                members.append(JSONNode.Member(key: key, value: try parseValue()))
            }
            skipWhitespace()
            switch peek() {
            case UInt8(ascii: ","): position += 1
            case UInt8(ascii: "}"):
                position += 1
                depth -= 1
                return .object(members)
            default: throw failure("expected ',' or '}'")
            }
        }
    }

    private mutating func parseArray() throws(Failure) -> JSONNode {
        try enter()
        position += 1
        var items: [JSONNode] = []
        skipWhitespace()
        if peek() == UInt8(ascii: "]") {
            position += 1
            depth -= 1
            return .array(items)
        }
        while true {
            skipWhitespace()
            items.append(try parseValue())
            skipWhitespace()
            switch peek() {
            case UInt8(ascii: ","): position += 1
            case UInt8(ascii: "]"):
                position += 1
                depth -= 1
                return .array(items)
            default: throw failure("expected ',' or ']'")
            }
        }
    }

    private mutating func enter() throws(Failure) {
        depth += 1
        guard depth <= Self.maximumDepth else { throw failure("nested deeper than \(Self.maximumDepth) levels") }
    }

    private mutating func expectWord(_ word: StaticString) throws(Failure) {
        let count = word.utf8CodeUnitCount
        guard bytes.count - position >= count else { throw failure("unexpected end of data") }
        for offset in 0..<count where bytes[position + offset] != word.utf8Start[offset] {
            throw failure("unexpected character")
        }
        position += count
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, kept as text.
    private mutating func parseNumber() throws(Failure) -> JSONNode {
        let start = position
        try scanNumber()
        return .number(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self))
    }

    private mutating func scanNumber() throws(Failure) {
        if peek() == UInt8(ascii: "-") { position += 1 }
        guard let first = peek(), Self.isDigit(first) else { throw failure("invalid number") }
        position += 1
        if first == UInt8(ascii: "0") {
            if let next = peek(), Self.isDigit(next) { throw failure("invalid number (leading zero)") }
        } else {
            skipDigits()
        }
        if peek() == UInt8(ascii: ".") {
            position += 1
            guard let digit = peek(), Self.isDigit(digit) else { throw failure("invalid number") }
            skipDigits()
        }
        if peek() == UInt8(ascii: "e") || peek() == UInt8(ascii: "E") {
            position += 1
            if peek() == UInt8(ascii: "+") || peek() == UInt8(ascii: "-") { position += 1 }
            guard let digit = peek(), Self.isDigit(digit) else { throw failure("invalid number") }
            skipDigits()
        }
    }

    // MARK: - Skipping

    /// Checks one value exactly as `parseValue` would, without building it.
    private mutating func skipValue() throws(Failure) {
        guard position < bytes.count else { throw failure("unexpected end of data") }
        switch bytes[position] {
        case UInt8(ascii: "{"): try skipContainer(close: UInt8(ascii: "}"), members: true)
        case UInt8(ascii: "["): try skipContainer(close: UInt8(ascii: "]"), members: false)
        case UInt8(ascii: "\""): try skipString()
        case UInt8(ascii: "t"): try expectWord("true")
        case UInt8(ascii: "f"): try expectWord("false")
        case UInt8(ascii: "n"): try expectWord("null")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try scanNumber()
        default: throw failure("unexpected character")
        }
    }

    /// An object (`members`: string keys and ':') or an array, up to its closing byte.
    private mutating func skipContainer(close: UInt8, members: Bool) throws(Failure) {
        try enter()
        position += 1
        skipWhitespace()
        if peek() == close {
            position += 1
            depth -= 1
            return
        }
        while true {
            skipWhitespace()
            if members {
                guard peek() == UInt8(ascii: "\"") else { throw failure("expected a string key") }
                try skipString()
                skipWhitespace()
                guard peek() == UInt8(ascii: ":") else { throw failure("expected ':'") }
                position += 1
                skipWhitespace()
            }
            try skipValue()
            skipWhitespace()
            switch peek() {
            case UInt8(ascii: ","): position += 1
            case close:
                position += 1
                depth -= 1
                return
            default: throw failure(members ? "expected ',' or '}'" : "expected ',' or ']'")
            }
        }
    }

    /// A string: the same escape and control-character rules as `parseString`, and valid UTF-8 (escapes are ASCII,
    /// so checking the raw bytes between the quotes is the same check).
    private mutating func skipString() throws(Failure) {
        position += 1  // the opening quote
        let start = position
        var ascii = true
        while position < bytes.count {
            let byte = bytes[position]
            switch byte {
            case UInt8(ascii: "\""):
                if !ascii && !Self.isWellFormedUTF8(UnsafeBufferPointer(rebasing: bytes[start..<position])) {
                    throw Failure(message: "invalid UTF-8 in the string at byte \(start)")
                }
                position += 1
                return
            case UInt8(ascii: "\\"):
                position += 1
                var discarded: [UInt8] = []
                try appendEscape(to: &discarded)
            case 0..<0x20:
                throw failure("control character in a string")
            default:
                if byte >= 0x80 { ascii = false }
                position += 1
            }
        }
        throw failure("unterminated string")
    }

    // MARK: - Strings

    private mutating func parseString() throws(Failure) -> String {
        position += 1  // the opening quote
        let start = position
        // Fast path: no escapes.
        while position < bytes.count {
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") {
                let text = try Self.validated(UnsafeBufferPointer(rebasing: bytes[start..<position]), at: start)
                position += 1
                return text
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw failure("control character in a string") }
            position += 1
        }
        var scratch = Array(UnsafeBufferPointer(rebasing: bytes[start..<position]))
        while position < bytes.count {
            let byte = bytes[position]
            switch byte {
            case UInt8(ascii: "\""):
                position += 1
                return try scratch.withUnsafeBufferPointer { bytes throws(Failure) in
                    try Self.validated(bytes, at: start)
                }
            case UInt8(ascii: "\\"):
                position += 1
                try appendEscape(to: &scratch)
            case 0..<0x20:
                throw failure("control character in a string")
            default:
                scratch.append(byte)
                position += 1
            }
        }
        throw failure("unterminated string")
    }

    private mutating func appendEscape(to scratch: inout [UInt8]) throws(Failure) {
        guard let escape = peek() else { throw failure("unterminated string") }
        position += 1
        switch escape {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): scratch.append(escape)
        case UInt8(ascii: "b"): scratch.append(0x08)
        case UInt8(ascii: "f"): scratch.append(0x0C)
        case UInt8(ascii: "n"): scratch.append(0x0A)
        case UInt8(ascii: "r"): scratch.append(0x0D)
        case UInt8(ascii: "t"): scratch.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = try hex4()
            if (0xD800..<0xDC00).contains(scalar) {
                guard bytes.count - position >= 6, bytes[position] == UInt8(ascii: "\\"),
                    bytes[position + 1] == UInt8(ascii: "u")
                else { throw failure("unpaired surrogate escape") }
                position += 2
                let low = try hex4()
                guard (0xDC00..<0xE000).contains(low) else { throw failure("unpaired surrogate escape") }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00..<0xE000).contains(scalar) {
                throw failure("unpaired surrogate escape")
            }
            // Safe to unwrap: surrogates were excluded above and every other value up to 0x10FFFF is a scalar.
            scratch.append(contentsOf: String(Unicode.Scalar(scalar)!).utf8)
        default:
            throw failure("invalid escape")
        }
    }

    private mutating func hex4() throws(Failure) -> UInt32 {
        guard bytes.count - position >= 4 else { throw failure("unterminated string") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[position]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw failure("invalid \\u escape")
            }
            value = value << 4 | UInt32(digit)
            position += 1
        }
        return value
    }

    /// The string of `utf8`, or a failure when the bytes are not well-formed UTF-8.
    ///
    /// Not `String(validating:as:)`: as a generic call from this module it looked up type metadata at run time
    /// for every string, which cost more than the rest of the parse.
    private static func validated(_ utf8: UnsafeBufferPointer<UInt8>, at offset: Int) throws(Failure) -> String {
        guard isWellFormedUTF8(utf8) else { throw Failure(message: "invalid UTF-8 in the string at byte \(offset)") }
        return String(decoding: utf8, as: UTF8.self)
    }

    /// Unicode's table of well-formed byte sequences (no overlong forms, surrogates or values past U+10FFFF).
    private static func isWellFormedUTF8(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var index = 0
        let count = bytes.count
        func continuation(_ offset: Int, _ range: ClosedRange<UInt8> = 0x80...0xBF) -> Bool {
            index + offset < count && range.contains(bytes[index + offset])
        }
        while index < count {
            let lead = bytes[index]
            switch lead {
            case 0x00...0x7F:
                index += 1
            case 0xC2...0xDF:
                guard continuation(1) else { return false }
                index += 2
            case 0xE0...0xEF:
                let second: ClosedRange<UInt8> = lead == 0xE0 ? 0xA0...0xBF : lead == 0xED ? 0x80...0x9F : 0x80...0xBF
                guard continuation(1, second), continuation(2) else { return false }
                index += 3
            case 0xF0...0xF4:
                let second: ClosedRange<UInt8> = lead == 0xF0 ? 0x90...0xBF : lead == 0xF4 ? 0x80...0x8F : 0x80...0xBF
                guard continuation(1, second), continuation(2), continuation(3) else { return false }
                index += 4
            default:
                return false
            }
        }
        return true
    }

    // MARK: - Bytes

    private func peek() -> UInt8? { position < bytes.count ? bytes[position] : nil }

    private mutating func skipWhitespace() {
        while position < bytes.count {
            switch bytes[position] {
            case 0x20, 0x09, 0x0A, 0x0D: position += 1
            default: return
            }
        }
    }

    private mutating func skipDigits() {
        while let byte = peek(), Self.isDigit(byte) { position += 1 }
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    private func failure(_ message: String) -> Failure {
        Failure(message: "\(message) at byte \(position)")
    }
}
