// SPDX-License-Identifier: Apache-2.0
import AFMJSON

/// Turns the beginning of a JSON text (a schema turn's answer as it streams) into a complete value: open
/// strings, arrays and objects are closed, and an unfinished member (a key without its value, half a literal)
/// is left out.
enum PartialJSON {
    /// The value the text so far describes, or nil when not even an empty container can be made of it.
    static func snapshot(_ text: String) -> JSONValue? {
        let bytes = Array(text.utf8)
        let scan = Scan(bytes)
        // The whole text, then the longest of: without the unfinished last member, up to the innermost open
        // container.
        let cuts = [scan.lastSeparator, scan.lastOpening.map { $0 + 1 }].compactMap { $0 }.sorted(by: >)
        for end in [bytes.count] + cuts {
            guard let completed = complete(Array(bytes[..<end])) else { continue }
            if let value = try? JSONParser.parse(completed) { return value }
        }
        return nil
    }

    /// The prefix with its open string and containers closed (trailing separators dropped).
    private static func complete(_ prefix: [UInt8]) -> [UInt8]? {
        let scan = Scan(prefix)
        var out = prefix
        if scan.inString {
            if scan.escaped { out.removeLast() }
            out.append(UInt8(ascii: "\""))
        } else {
            while let last = out.last, [0x20, 0x0A, 0x0D, 0x09, UInt8(ascii: ","), UInt8(ascii: ":")].contains(last) {
                out.removeLast()
            }
        }
        guard !scan.stack.isEmpty || !out.isEmpty else { return nil }
        for opener in scan.stack.reversed() { out.append(opener == UInt8(ascii: "{") ? UInt8(ascii: "}") : UInt8(ascii: "]")) }
        return out
    }

    /// A scan of JSON text that tracks open containers and strings.
    private struct Scan {
        let bytes: [UInt8]
        var index = 0
        var stack: [UInt8] = []
        var inString = false
        var escaped = false
        /// Index of the last `,` outside strings (the end of the last complete member).
        var lastSeparator: Int?
        /// Index of the last `{` or `[` still open.
        var lastOpening: Int?
        private var openings: [Int] = []

        /// Scans all of `bytes`.
        init(_ bytes: [UInt8]) {
            self.bytes = bytes
            while next() {}
        }

        /// Consumes one byte; false at the end.
        mutating func next() -> Bool {
            guard index < bytes.count else { return false }
            let byte = bytes[index]
            defer { index += 1 }
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
                return true
            }
            switch byte {
            case UInt8(ascii: "\""): inString = true
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                stack.append(byte)
                openings.append(index)
                lastOpening = index
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                if !stack.isEmpty { stack.removeLast() }
                if !openings.isEmpty { openings.removeLast() }
                lastOpening = openings.last
            case UInt8(ascii: ","): lastSeparator = index
            default: break
            }
            return true
        }
    }
}
