// SPDX-License-Identifier: Apache-2.0

/// Bounds-checked reads of fixed-width integers from an image file's header.
///
/// Every read returns `nil` past the end instead of trapping, so a truncated upload becomes an
/// `invalid_image` error in the format parser rather than a crash.
struct HeaderBytes {
    let bytes: [UInt8]

    var count: Int { bytes.count }

    /// Whether `length` bytes starting at `offset` are available.
    func has(_ length: Int, at offset: Int) -> Bool {
        offset >= 0 && length >= 0 && offset <= bytes.count - length
    }

    func u8(_ offset: Int) -> UInt8? {
        has(1, at: offset) ? bytes[offset] : nil
    }

    func be16(_ offset: Int) -> Int? {
        guard has(2, at: offset) else { return nil }
        return Int(bytes[offset]) << 8 | Int(bytes[offset + 1])
    }

    func be32(_ offset: Int) -> Int? {
        guard has(4, at: offset) else { return nil }
        return bytes[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
    }

    func le16(_ offset: Int) -> Int? {
        guard has(2, at: offset) else { return nil }
        return Int(bytes[offset]) | Int(bytes[offset + 1]) << 8
    }

    func le24(_ offset: Int) -> Int? {
        guard has(3, at: offset) else { return nil }
        return Int(bytes[offset]) | Int(bytes[offset + 1]) << 8 | Int(bytes[offset + 2]) << 16
    }

    func le32(_ offset: Int) -> Int? {
        guard has(4, at: offset) else { return nil }
        return bytes[offset..<offset + 4].reversed().reduce(0) { $0 << 8 | Int($1) }
    }

    /// Whether the bytes at `offset` equal `expected` (false when they run past the end).
    func matches(_ expected: [UInt8], at offset: Int) -> Bool {
        has(expected.count, at: offset) && bytes[offset..<offset + expected.count].elementsEqual(expected)
    }

    /// Whether the bytes at `offset` spell the ASCII `text`.
    func matches(ascii text: String, at offset: Int) -> Bool {
        matches(Array(text.utf8), at: offset)
    }
}
