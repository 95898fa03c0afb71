// SPDX-License-Identifier: Apache-2.0

/// Strict UTF-8 checks (Unicode Table 3-7: no overlong forms, no encoded surrogates, nothing above
/// U+10FFFF). The parser's fast path lets the standard library validate whole string runs; these
/// byte-level checks run only to find *where* a run went wrong, and to classify stray non-ASCII bytes
/// outside strings.
enum UTF8Validation {
    @inline(__always)
    static func isContinuation(_ byte: UInt8) -> Bool {
        byte & 0xC0 == 0x80
    }

    /// The length of the well-formed UTF-8 sequence starting at `k`, or `nil` if the bytes there are not
    /// one (including a sequence cut short by `end`).
    static func sequenceLength(_ p: UnsafePointer<UInt8>, at k: Int, end: Int) -> Int? {
        let b0 = p[k]
        if b0 < 0x80 { return 1 }
        if b0 < 0xC2 { return nil }  // continuation byte, or an overlong 2-byte lead (C0, C1)
        if b0 < 0xE0 {
            guard k + 1 < end, isContinuation(p[k + 1]) else { return nil }
            return 2
        }
        if b0 < 0xF0 {
            // E0 needs A0...BF next (else overlong); ED needs 80...9F (else a UTF-16 surrogate).
            let low: UInt8 = b0 == 0xE0 ? 0xA0 : 0x80
            let high: UInt8 = b0 == 0xED ? 0x9F : 0xBF
            guard k + 2 < end, (low...high).contains(p[k + 1]), isContinuation(p[k + 2]) else { return nil }
            return 3
        }
        if b0 < 0xF5 {
            // F0 needs 90...BF next (else overlong); F4 needs 80...8F (else above U+10FFFF).
            let low: UInt8 = b0 == 0xF0 ? 0x90 : 0x80
            let high: UInt8 = b0 == 0xF4 ? 0x8F : 0xBF
            guard k + 3 < end, (low...high).contains(p[k + 1]), isContinuation(p[k + 2]),
                isContinuation(p[k + 3])
            else { return nil }
            return 4
        }
        return nil  // F5...FF never occur in UTF-8
    }

    /// The offset of the first byte of the first ill-formed sequence in `p[start..<end]`, or `nil` if the
    /// range is well-formed UTF-8.
    static func firstInvalid(_ p: UnsafePointer<UInt8>, from start: Int, end: Int) -> Int? {
        let raw = UnsafeRawPointer(p)
        var k = start
        while k < end {
            // Mostly-ASCII text is the common case: skip it eight bytes at a time.
            while k &+ 8 <= end, raw.loadUnaligned(fromByteOffset: k, as: UInt64.self) & ByteScanning.highBits == 0 {
                k &+= 8
            }
            guard k < end else { break }
            if p[k] < 0x80 {
                k &+= 1
                continue
            }
            guard let length = sequenceLength(p, at: k, end: end) else { return k }
            k &+= length
        }
        return nil
    }
}
