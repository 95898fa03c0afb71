// SPDX-License-Identifier: Apache-2.0

/// Word-at-a-time scanning for the bytes that end a plain run inside a JSON string.
///
/// The parser and the encoder stop at exactly the same bytes: `"`, `\` and the control characters
/// U+0000–U+001F. Everything else (including all non-ASCII UTF-8 bytes) is copied in bulk, so checking
/// eight bytes per step matters for long prompt strings.
enum ByteScanning {
    @usableFromInline static let ones: UInt64 = 0x0101_0101_0101_0101
    @usableFromInline static let highBits: UInt64 = 0x8080_8080_8080_8080

    /// Whether the byte ends a plain run.
    @inline(__always)
    static func isSpecial(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
    }

    /// Whether any of the eight bytes in `word` is special. Uses the classic "has zero byte" and
    /// "has byte less than n" bit tricks, which are exact as yes/no answers.
    @inline(__always)
    static func containsSpecial(_ word: UInt64) -> Bool {
        let quote = word ^ (ones &* 0x22)
        let backslash = word ^ (ones &* 0x5C)
        let hasQuote = (quote &- ones) & ~quote
        let hasBackslash = (backslash &- ones) & ~backslash
        let hasControl = (word &- ones &* 0x20) & ~word
        return (hasQuote | hasBackslash | hasControl) & highBits != 0
    }

    /// The index of the first special byte in `p[start..<end]`, or `end` if there is none.
    @inline(__always)
    static func firstSpecial(_ p: UnsafePointer<UInt8>, from start: Int, end: Int) -> Int {
        var ignored: UInt64 = 0
        return firstSpecial(p, from: start, end: end, seenBits: &ignored)
    }

    /// Like ``firstSpecial(_:from:end:)``, and also ORs every byte before the result into `seenBits`, so
    /// `seenBits & highBits == 0` afterwards means the run was pure ASCII and needs no UTF-8 validation.
    @inline(__always)
    static func firstSpecial(
        _ p: UnsafePointer<UInt8>, from start: Int, end: Int, seenBits: inout UInt64
    ) -> Int {
        var i = start
        let raw = UnsafeRawPointer(p)
        var seen: UInt64 = 0
        while i &+ 8 <= end {
            let word = raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            if containsSpecial(word) { break }
            seen |= word
            i &+= 8
        }
        while i < end {
            let byte = p[i]
            if isSpecial(byte) { break }
            seen |= UInt64(byte)
            i &+= 1
        }
        seenBits |= seen
        return i
    }
}
