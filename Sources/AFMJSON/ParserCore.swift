// SPDX-License-Identifier: Apache-2.0

/// The recursive-descent engine behind ``JSONParser``: one cursor over a byte buffer.
///
/// Recursion depth is bounded by checking the nesting limit *before* descending into an array or object,
/// so the stack use is proportional to `maxDepth`, never to the input.
struct ParserCore {
    private let p: UnsafePointer<UInt8>
    private let end: Int
    private var i = 0
    private var depth = 0
    private let maxDepth: Int
    private let maxStringBytes: Int
    private let maxValues: Int
    /// Values started so far, for ``JSONParser/Limits/maxValues``.
    private var valueCount = 0
    /// Reused for strings with escapes, so only the first such string allocates.
    private var scratch: [UInt8] = []
    /// Elements of all open containers, innermost last; see ``UnsafeStack``.
    private var values = UnsafeStack<JSONValue>(capacity: 64)
    /// Members of all open objects, innermost last.
    private var members = UnsafeStack<JSONObject.Entry>(capacity: 32)

    init(base: UnsafePointer<UInt8>, count: Int, limits: JSONParser.Limits) {
        p = base
        end = count
        maxDepth = min(limits.maxDepth, JSONParser.Limits.maximumSupportedDepth)
        maxStringBytes = limits.maxStringBytes ?? Int.max
        maxValues = limits.maxValues ?? Int.max
    }

    /// Frees the element stacks, including anything left on them by an error. Call exactly once.
    func release() {
        values.release()
        members.release()
    }

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        if end >= 3, p[0] == 0xEF, p[1] == 0xBB, p[2] == 0xBF {
            throw JSONParseError(kind: .syntax, offset: 0, detail: "a byte order mark is not allowed")
        }
        skipWhitespace()
        guard i < end else {
            throw JSONParseError(kind: .unexpectedEnd, offset: i, detail: "expected a value, found only whitespace")
        }
        let value = try parseValue()
        skipWhitespace()
        if i < end {
            if p[i] >= 0x80, UTF8Validation.sequenceLength(p, at: i, end: end) == nil {
                throw invalidUTF8(at: i)
            }
            throw JSONParseError(kind: .trailingData, offset: i, detail: "unexpected data after the JSON value")
        }
        return value
    }

    // MARK: - Values

    /// Parses the value at the cursor; whitespace before it has been skipped.
    private mutating func parseValue() throws(JSONParseError) -> JSONValue {
        guard i < end else { throw unexpectedEnd("expected a value") }
        valueCount += 1
        guard valueCount <= maxValues else {
            throw JSONParseError(
                kind: .valueLimitExceeded, offset: i, detail: "the document has more than \(maxValues) values")
        }
        switch p[i] {
        case UInt8(ascii: "\""):
            return .string(try parseString())
        case UInt8(ascii: "{"):
            return try parseObject()
        case UInt8(ascii: "["):
            return try parseArray()
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return .number(try parseNumber())
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            return .null
        case UInt8(ascii: "+"), UInt8(ascii: "."):
            throw JSONParseError(
                kind: .invalidNumber, offset: i, detail: "a number must start with '-' or a digit")
        default:
            throw unexpectedByte("expected a value")
        }
    }

    private mutating func enterContainer() throws(JSONParseError) {
        guard depth < maxDepth else {
            throw JSONParseError(
                kind: .depthLimitExceeded, offset: i,
                detail: "arrays and objects are nested deeper than the limit of \(maxDepth)")
        }
        depth += 1
    }

    private mutating func parseArray() throws(JSONParseError) -> JSONValue {
        try enterContainer()
        i += 1  // [
        skipWhitespace()
        if i < end, p[i] == UInt8(ascii: "]") {
            i += 1
            depth -= 1
            return .array([])
        }
        let first = values.count
        while true {
            values.push(try parseValue())
            skipWhitespace()
            guard i < end else { throw unexpectedEnd("expected ',' or ']' after array element") }
            let byte = p[i]
            i += 1
            if byte == UInt8(ascii: ",") {
                skipWhitespace()
                if i < end, p[i] == UInt8(ascii: "]") {
                    throw JSONParseError(kind: .syntax, offset: i, detail: "trailing comma in array")
                }
            } else if byte == UInt8(ascii: "]") {
                break
            } else {
                i -= 1
                throw unexpectedByte("expected ',' or ']' after array element")
            }
        }
        depth -= 1
        return .array(values.popArray(from: first))
    }

    private mutating func parseObject() throws(JSONParseError) -> JSONValue {
        try enterContainer()
        i += 1  // {
        skipWhitespace()
        if i < end, p[i] == UInt8(ascii: "}") {
            i += 1
            depth -= 1
            return .object(JSONObject())
        }
        let first = members.count
        var index: [String: Int]? = nil
        while true {
            guard i < end else { throw unexpectedEnd("expected a string key") }
            guard p[i] == UInt8(ascii: "\"") else {
                if p[i] == UInt8(ascii: "}") {
                    throw JSONParseError(kind: .syntax, offset: i, detail: "trailing comma in object")
                }
                throw unexpectedByte("expected a string key")
            }
            let keyOffset = i
            let key = try parseString()
            // Small objects: a linear scan beats hashing. Large ones: an index, so hostile input with
            // thousands of keys stays linear.
            if let index {
                if index[key] != nil { throw duplicateKey(key, at: keyOffset) }
            } else {
                for k in first..<members.count where members.base[k].key == key {
                    throw duplicateKey(key, at: keyOffset)
                }
            }

            skipWhitespace()
            guard i < end else { throw unexpectedEnd("expected ':' after object key") }
            guard p[i] == UInt8(ascii: ":") else { throw unexpectedByte("expected ':' after object key") }
            i += 1
            skipWhitespace()
            let value = try parseValue()
            if index != nil {
                index![key] = members.count - first
            } else if members.count - first == JSONObject.indexThreshold {
                // This member makes the object large: index all its keys from now on.
                var newIndex = [String: Int](minimumCapacity: 2 * JSONObject.indexThreshold)
                for k in first..<members.count { newIndex[members.base[k].key] = k - first }
                newIndex[key] = members.count - first
                index = newIndex
            }
            members.push(JSONObject.Entry(key: key, value: value))
            skipWhitespace()
            guard i < end else { throw unexpectedEnd("expected ',' or '}' after object member") }
            let byte = p[i]
            i += 1
            if byte == UInt8(ascii: ",") {
                skipWhitespace()
            } else if byte == UInt8(ascii: "}") {
                break
            } else {
                i -= 1
                throw unexpectedByte("expected ',' or '}' after object member")
            }
        }
        depth -= 1
        return .object(JSONObject(uniqueEntries: members.popArray(from: first), index: index))
    }

    private mutating func parseNumber() throws(JSONParseError) -> JSONNumber {
        let start = i
        i = try JSONNumber.scan(p, from: start, end: end)
        let literal = String(decoding: UnsafeBufferPointer(start: p + start, count: i - start), as: UTF8.self)
        return JSONNumber(validatedLiteral: literal)
    }

    /// Matches `true`, `false` or `null` at the cursor.
    private mutating func expectLiteral(_ word: StaticString) throws(JSONParseError) {
        let expected = word.utf8Start
        for k in 0..<word.utf8CodeUnitCount {
            guard i < end else { throw unexpectedEnd("expected '\(word)'") }
            guard p[i] == expected[k] else { throw unexpectedByte("expected '\(word)'") }
            i += 1
        }
    }

    // MARK: - Strings

    /// Parses the string whose opening quote is at the cursor, leaving the cursor after the closing quote.
    private mutating func parseString() throws(JSONParseError) -> String {
        let quote = i
        let start = i + 1
        var seenBits: UInt64 = 0
        var j = ByteScanning.firstSpecial(p, from: start, end: end, seenBits: &seenBits)
        if j < end, p[j] == UInt8(ascii: "\"") {
            // Fast path: no escapes, so the string is the bytes between the quotes. Pure ASCII needs no
            // validation; anything else is checked here, so the (repairing) String initializer never
            // has anything to repair.
            guard j - start <= maxStringBytes else { throw stringTooLong(at: quote) }
            if seenBits & ByteScanning.highBits != 0 {
                try checkUTF8(from: start, to: j)
            }
            i = j + 1
            return String(decoding: UnsafeBufferPointer(start: p + start, count: j - start), as: UTF8.self)
        }

        scratch.removeAll(keepingCapacity: true)
        var runStart = start
        while true {
            guard j < end else {
                try checkUTF8(from: start, to: j)
                i = j
                throw unexpectedEnd("unterminated string")
            }
            let byte = p[j]
            if byte == UInt8(ascii: "\"") {
                scratch.append(contentsOf: UnsafeBufferPointer(start: p + runStart, count: j - runStart))
                break
            }
            if byte == UInt8(ascii: "\\") {
                scratch.append(contentsOf: UnsafeBufferPointer(start: p + runStart, count: j - runStart))
                j = try decodeEscape(at: j, stringStart: start)
                runStart = j
                j = ByteScanning.firstSpecial(p, from: j, end: end, seenBits: &seenBits)
                continue
            }
            // A control character: report bad UTF-8 before it first, so errors come in byte order.
            try checkUTF8(from: start, to: j)
            throw JSONParseError(
                kind: .syntax, offset: j,
                detail: "unescaped control character \(hexCodePoint(UInt32(byte))) in string")
        }
        guard scratch.count <= maxStringBytes else { throw stringTooLong(at: quote) }
        // Escapes always produce whole sequences, so only the raw bytes can be ill-formed.
        if seenBits & ByteScanning.highBits != 0 {
            try checkUTF8(from: start, to: j)
        }
        i = j + 1
        return String(decoding: scratch, as: UTF8.self)
    }

    /// Decodes the escape whose backslash is at `k` into `scratch`, and returns the index after it.
    private mutating func decodeEscape(at k: Int, stringStart: Int) throws(JSONParseError) -> Int {
        guard k + 1 < end else {
            try checkUTF8(from: stringStart, to: k)
            i = end
            throw unexpectedEnd("unterminated escape sequence")
        }
        let simple: UInt8
        switch p[k + 1] {
        case UInt8(ascii: "\""): simple = UInt8(ascii: "\"")
        case UInt8(ascii: "\\"): simple = UInt8(ascii: "\\")
        case UInt8(ascii: "/"): simple = UInt8(ascii: "/")
        case UInt8(ascii: "b"): simple = 0x08
        case UInt8(ascii: "f"): simple = 0x0C
        case UInt8(ascii: "n"): simple = 0x0A
        case UInt8(ascii: "r"): simple = 0x0D
        case UInt8(ascii: "t"): simple = 0x09
        case UInt8(ascii: "u"):
            return try decodeUnicodeEscape(at: k, stringStart: stringStart)
        default:
            try checkUTF8(from: stringStart, to: k)
            throw JSONParseError(
                kind: .invalidEscape, offset: k,
                detail: "invalid escape sequence; only \\\" \\\\ \\/ \\b \\f \\n \\r \\t and \\uXXXX are allowed")
        }
        scratch.append(simple)
        return k + 2
    }

    /// Decodes `\uXXXX` (and a following low surrogate escape when the first is a high surrogate).
    private mutating func decodeUnicodeEscape(at k: Int, stringStart: Int) throws(JSONParseError) -> Int {
        try checkUTF8(from: stringStart, to: k)
        let first = try hex4(at: k + 2)
        var next = k + 6
        var scalar = first
        if (0xD800...0xDBFF).contains(first) {
            guard next < end else {
                i = end
                throw unexpectedEnd("unterminated string after a high surrogate escape")
            }
            guard p[next] == UInt8(ascii: "\\"), next + 1 < end, p[next + 1] == UInt8(ascii: "u") else {
                throw JSONParseError(
                    kind: .invalidEscape, offset: k,
                    detail: "lone surrogate \(hexCodePoint(first)): a high surrogate must be followed by a low one")
            }
            let second = try hex4(at: next + 2)
            guard (0xDC00...0xDFFF).contains(second) else {
                throw JSONParseError(
                    kind: .invalidEscape, offset: k,
                    detail: "lone surrogate \(hexCodePoint(first)): a high surrogate must be followed by a low one")
            }
            scalar = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
            next += 6
        } else if (0xDC00...0xDFFF).contains(first) {
            throw JSONParseError(
                kind: .invalidEscape, offset: k,
                detail: "lone surrogate \(hexCodePoint(first)): a low surrogate must follow a high one")
        }
        appendUTF8(scalar)
        return next
    }

    /// Reads four hex digits at `k`.
    private mutating func hex4(at k: Int) throws(JSONParseError) -> UInt32 {
        var value: UInt32 = 0
        for m in k..<(k + 4) {
            guard m < end else {
                i = end
                throw unexpectedEnd("unterminated \\u escape")
            }
            let byte = p[m]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default:
                throw JSONParseError(
                    kind: .invalidEscape, offset: k - 2, detail: "\\u must be followed by four hex digits")
            }
            value = value << 4 | UInt32(digit)
        }
        return value
    }

    private mutating func appendUTF8(_ scalar: UInt32) {
        switch scalar {
        case 0..<0x80:
            scratch.append(UInt8(scalar))
        case 0x80..<0x800:
            scratch.append(UInt8(0xC0 | scalar >> 6))
            scratch.append(UInt8(0x80 | scalar & 0x3F))
        case 0x800..<0x10000:
            scratch.append(UInt8(0xE0 | scalar >> 12))
            scratch.append(UInt8(0x80 | scalar >> 6 & 0x3F))
            scratch.append(UInt8(0x80 | scalar & 0x3F))
        default:
            scratch.append(UInt8(0xF0 | scalar >> 18))
            scratch.append(UInt8(0x80 | scalar >> 12 & 0x3F))
            scratch.append(UInt8(0x80 | scalar >> 6 & 0x3F))
            scratch.append(UInt8(0x80 | scalar & 0x3F))
        }
    }

    // MARK: - Whitespace and errors

    @inline(__always)
    private mutating func skipWhitespace() {
        while i < end {
            let byte = p[i]
            // Only space, tab, LF and CR are JSON whitespace; everything above space ends the run.
            guard byte <= 0x20,
                byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09
            else { return }
            i += 1
        }
    }

    private func checkUTF8(from start: Int, to stop: Int) throws(JSONParseError) {
        if let bad = UTF8Validation.firstInvalid(p, from: start, end: stop) {
            throw invalidUTF8(at: bad)
        }
    }

    private func invalidUTF8(at offset: Int) -> JSONParseError {
        JSONParseError(kind: .invalidUTF8, offset: offset, detail: "the input is not valid UTF-8")
    }

    private func unexpectedEnd(_ expectation: String) -> JSONParseError {
        JSONParseError(kind: .unexpectedEnd, offset: end, detail: "unexpected end of input; \(expectation)")
    }

    private func duplicateKey(_ key: String, at offset: Int) -> JSONParseError {
        JSONParseError(kind: .duplicateKey, offset: offset, detail: "duplicate key \(quotedForMessage(key)) in object")
    }

    private func stringTooLong(at offset: Int) -> JSONParseError {
        JSONParseError(
            kind: .syntax, offset: offset, detail: "string is longer than the limit of \(maxStringBytes) bytes")
    }

    /// The error for an unexpected byte at the cursor. Stray non-ASCII bytes are first checked for UTF-8
    /// validity, so bad encoding is reported as such wherever it occurs.
    private func unexpectedByte(_ expectation: String) -> JSONParseError {
        let byte = p[i]
        let found: String
        if byte >= 0x80 {
            guard let length = UTF8Validation.sequenceLength(p, at: i, end: end) else { return invalidUTF8(at: i) }
            let scalar = String(decoding: UnsafeBufferPointer(start: p + i, count: length), as: UTF8.self)
                .unicodeScalars.first!.value
            found = hexCodePoint(scalar)
        } else if byte >= 0x21, byte < 0x7F {
            found = "'\(Character(Unicode.Scalar(byte)))'"
        } else {
            found = hexCodePoint(UInt32(byte))
        }
        return JSONParseError(kind: .syntax, offset: i, detail: "\(expectation), found \(found)")
    }

    private func hexCodePoint(_ value: UInt32) -> String {
        let hex = String(value, radix: 16, uppercase: true)
        return "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }

    /// A key for an error message: JSON-quoted (so control characters cannot break log lines) and cut to a
    /// readable length.
    private func quotedForMessage(_ key: String) -> String {
        var shown = key
        if shown.count > 64 { shown = String(shown.prefix(64)) + "…" }
        var buffer: [UInt8] = []
        JSONEncoding.appendEscapedString(shown, to: &buffer)
        return String(decoding: buffer, as: UTF8.self)
    }
}
