// SPDX-License-Identifier: Apache-2.0

/// Low-level JSON writing into byte buffers, for code that assembles JSON by hand (for example
/// server-sent event frames) without building a ``JSONValue`` first.
///
/// The escaping is minimal and deterministic: only `"`, `\` and control characters U+0000–U+001F are
/// escaped (as `\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, or `\u00XX` with lowercase hex). Non-ASCII
/// characters stay UTF-8 and `/` is not escaped, so the output is valid UTF-8 JSON and as short as
/// possible.
///
/// Encoding recurses once per nesting level of the value; parsed values are bounded by
/// ``JSONParser/Limits/maxDepth``.
public enum JSONEncoding: Sendable {
    /// Appends `s` as a quoted, escaped JSON string (including the surrounding quotes).
    public static func appendEscapedString(_ s: String, to buffer: inout [UInt8]) {
        withUTF8(of: s) { appendEscapedString(utf8: $0, to: &buffer) }
    }

    /// Appends `s` as a quoted, escaped JSON string (including the surrounding quotes).
    public static func appendEscapedString(_ s: Substring, to buffer: inout [UInt8]) {
        var s = s
        s.withUTF8 { appendEscapedString(utf8: $0, to: &buffer) }
    }

    /// Appends the UTF-8 text in `utf8` as a quoted, escaped JSON string. The bytes must be valid UTF-8
    /// (they are copied through unchanged apart from escapes).
    public static func appendEscapedString(utf8: UnsafeBufferPointer<UInt8>, to buffer: inout [UInt8]) {
        guard let p = utf8.baseAddress else {
            buffer.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: "\"")])
            return
        }
        if ByteScanning.firstSpecial(p, from: 0, end: utf8.count) == utf8.count {
            // Nothing to escape (the usual case): three bulk appends.
            buffer.reserveCapacity(buffer.count + utf8.count + 2)
            buffer.append(UInt8(ascii: "\""))
            buffer.append(contentsOf: utf8)
            buffer.append(UInt8(ascii: "\""))
            return
        }
        var writer = ByteWriter(capacity: utf8.count + 16)
        writeEscaped(p, count: utf8.count, to: &writer)
        writer.append(to: &buffer)
    }

    /// Appends the compact encoding of `value` (no whitespace) to `buffer`.
    public static func append(_ value: JSONValue, to buffer: inout [UInt8]) {
        // Scalars and empty containers straight into `buffer`: hand-written encoders pass many of them, and the
        // scratch writer below is an allocation.
        switch value {
        case .null: return buffer.append(literal: "null")
        case .bool(let flag): return buffer.append(literal: flag ? "true" : "false")
        case .number(let number): return buffer.append(contentsOf: number.literal.utf8)
        case .string(let string): return appendEscapedString(string, to: &buffer)
        case .array(let elements) where elements.isEmpty: return buffer.append(literal: "[]")
        case .object(let object) where object.isEmpty: return buffer.append(literal: "{}")
        default: break
        }
        var writer = ByteWriter(capacity: 512)
        write(value, to: &writer)
        writer.append(to: &buffer)
    }

    /// Appends a human-readable encoding of `value` to `buffer`: two-space indentation starting at
    /// `level`, one member or element per line, `": "` after keys, and `[]`/`{}` for empty containers.
    public static func appendPretty(_ value: JSONValue, level: Int = 0, to buffer: inout [UInt8]) {
        var writer = ByteWriter(capacity: 512)
        writePretty(value, level: level, to: &writer)
        writer.append(to: &buffer)
    }

    // MARK: - Internals

    /// The compact encoding as a new array (one exact-size copy out of the writer).
    static func encode(_ value: JSONValue) -> [UInt8] {
        var writer = ByteWriter(capacity: 512)
        write(value, to: &writer)
        return writer.makeArray()
    }

    static func write(_ value: JSONValue, to writer: inout ByteWriter) {
        switch value {
        case .null:
            writer.write("null")
        case .bool(let flag):
            writer.write(flag ? "true" : "false")
        case .number(let number):
            writer.write(utf8: number.literal)
        case .string(let string):
            writeEscaped(string, to: &writer)
        case .array(let elements):
            writer.write(UInt8(ascii: "["))
            // Borrow elements through the buffer pointer: no retain/release per element.
            elements.withUnsafeBufferPointer { elements in
                for i in elements.indices {
                    if i > 0 { writer.write(UInt8(ascii: ",")) }
                    write(elements[i], to: &writer)
                }
            }
            writer.write(UInt8(ascii: "]"))
        case .object(let object):
            writer.write(UInt8(ascii: "{"))
            object._entries.withUnsafeBufferPointer { entries in
                for i in entries.indices {
                    if i > 0 { writer.write(UInt8(ascii: ",")) }
                    writeEscaped(entries[i].key, to: &writer)
                    writer.write(UInt8(ascii: ":"))
                    write(entries[i].value, to: &writer)
                }
            }
            writer.write(UInt8(ascii: "}"))
        }
    }

    static func writePretty(_ value: JSONValue, level: Int, to writer: inout ByteWriter) {
        switch value {
        case .array(let elements) where !elements.isEmpty:
            writer.write(UInt8(ascii: "["))
            for (i, element) in elements.enumerated() {
                if i > 0 { writer.write(UInt8(ascii: ",")) }
                writeNewline(indent: level + 1, to: &writer)
                writePretty(element, level: level + 1, to: &writer)
            }
            writeNewline(indent: level, to: &writer)
            writer.write(UInt8(ascii: "]"))
        case .object(let object) where !object.isEmpty:
            writer.write(UInt8(ascii: "{"))
            for (i, entry) in object._entries.enumerated() {
                if i > 0 { writer.write(UInt8(ascii: ",")) }
                writeNewline(indent: level + 1, to: &writer)
                writeEscaped(entry.key, to: &writer)
                writer.write(": ")
                writePretty(entry.value, level: level + 1, to: &writer)
            }
            writeNewline(indent: level, to: &writer)
            writer.write(UInt8(ascii: "}"))
        default:
            write(value, to: &writer)
        }
    }

    private static func writeNewline(indent: Int, to writer: inout ByteWriter) {
        writer.reserve(1 + 2 * indent)
        writer.writeReserved(UInt8(ascii: "\n"))
        for _ in 0..<(2 * indent) { writer.writeReserved(UInt8(ascii: " ")) }
    }

    @inline(__always)
    private static func writeEscaped(_ string: String, to writer: inout ByteWriter) {
        withUTF8(of: string) { utf8 in
            if let p = utf8.baseAddress {
                writeEscaped(p, count: utf8.count, to: &writer)
            } else {
                writer.write("\"\"")
            }
        }
    }

    /// Calls `body` with the UTF-8 bytes of `string`, without copying native strings.
    @inline(__always)
    private static func withUTF8<R>(of string: String, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        if let result = string.utf8.withContiguousStorageIfAvailable(body) { return result }
        var copy = string
        return copy.withUTF8(body)
    }

    /// Writes `"…"` with escapes: plain runs are copied in bulk, special bytes are escaped one by one.
    private static func writeEscaped(_ p: UnsafePointer<UInt8>, count end: Int, to writer: inout ByteWriter) {
        writer.write(UInt8(ascii: "\""))
        var runStart = 0
        while true {
            let i = ByteScanning.firstSpecial(p, from: runStart, end: end)
            if i > runStart { writer.write(p + runStart, count: i - runStart) }
            if i == end { break }
            writeEscape(for: p[i], to: &writer)
            runStart = i + 1
        }
        writer.write(UInt8(ascii: "\""))
    }

    /// Writes the escape sequence for one special byte (see ``ByteScanning/isSpecial(_:)``).
    @inline(__always)
    private static func writeEscape(for byte: UInt8, to writer: inout ByteWriter) {
        writer.reserve(6)
        writer.writeReserved(UInt8(ascii: "\\"))
        switch byte {
        case UInt8(ascii: "\""): writer.writeReserved(UInt8(ascii: "\""))
        case UInt8(ascii: "\\"): writer.writeReserved(UInt8(ascii: "\\"))
        case 0x08: writer.writeReserved(UInt8(ascii: "b"))
        case 0x0C: writer.writeReserved(UInt8(ascii: "f"))
        case 0x0A: writer.writeReserved(UInt8(ascii: "n"))
        case 0x0D: writer.writeReserved(UInt8(ascii: "r"))
        case 0x09: writer.writeReserved(UInt8(ascii: "t"))
        default:
            writer.writeReserved(UInt8(ascii: "u"))
            writer.writeReserved(UInt8(ascii: "0"))
            writer.writeReserved(UInt8(ascii: "0"))
            writer.writeReserved(hexDigit(byte >> 4))
            writer.writeReserved(hexDigit(byte & 0xF))
        }
    }

    @inline(__always)
    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }
}
