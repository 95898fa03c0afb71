// SPDX-License-Identifier: Apache-2.0

/// The exact bytes of one top-level member's value in a JSON object document.
///
/// Why: the request document is read with `JSONSerialization`, whose dictionaries forget member order, and the
/// bodies are written with sorted keys. An output schema's property order is part of the contract (the model
/// writes members in schema order), so the schema goes upstream as the host wrote it, spliced in as raw text.
/// The document comes from the host and was already parsed successfully; this only has to find the span.
enum RawJSONMember {
    /// The raw text of top-level member `key`'s value, or nil when the document has no such member.
    static func value(of key: String, in document: [UInt8]) -> [UInt8]? {
        var index = 0
        let count = document.count
        func skipSpace() { while index < count, [0x20, 0x09, 0x0A, 0x0D].contains(document[index]) { index += 1 } }
        /// Skips a string starting at `index` (a quote); returns its raw bytes without the quotes.
        func string() -> ArraySlice<UInt8>? {
            guard index < count, document[index] == UInt8(ascii: "\"") else { return nil }
            let start = index + 1
            index += 1
            while index < count, document[index] != UInt8(ascii: "\"") {
                index += document[index] == UInt8(ascii: "\\") ? 2 : 1
            }
            guard index < count else { return nil }
            defer { index += 1 }
            return document[start..<index]
        }
        /// Skips one value starting at `index`, leaving `index` just after it (a scalar's span may keep trailing
        /// spaces, which are still JSON).
        func skipValue() -> Bool {
            var depth = 0
            while index < count {
                switch document[index] {
                case UInt8(ascii: "\""):
                    guard string() != nil else { return false }
                    if depth == 0 { return true }
                    continue
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    depth += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    if depth == 0 { return true }  // the enclosing object ends: a scalar value ended before it
                    depth -= 1
                    if depth == 0 {
                        index += 1
                        return true
                    }
                case UInt8(ascii: ","):
                    if depth == 0 { return true }
                default:
                    break
                }
                index += 1
            }
            return false
        }
        skipSpace()
        guard index < count, document[index] == UInt8(ascii: "{") else { return nil }
        index += 1
        let wanted = Array(key.utf8)
        while true {
            skipSpace()
            guard let name = string() else { return nil }
            skipSpace()
            guard index < count, document[index] == UInt8(ascii: ":") else { return nil }
            index += 1
            skipSpace()
            let start = index
            guard skipValue() else { return nil }
            // Member names the host writes have no escapes, so the raw bytes compare directly.
            if Array(name) == wanted { return Array(document[start..<index]) }
            skipSpace()
            guard index < count, document[index] == UInt8(ascii: ",") else { return nil }
            index += 1
        }
    }
}
