// SPDX-License-Identifier: Apache-2.0

extension [UInt8] {
    /// Appends a compile-time string's UTF-8 bytes with one copy (appending `String.utf8` goes through the generic
    /// sequence path; hand-written encoders append dozens of literals per document).
    @inlinable
    public mutating func append(literal: StaticString) {
        literal.withUTF8Buffer { append(contentsOf: $0) }
    }

    /// Appends the decimal digits of `value` (with a leading `-` when negative), as `String(value)` spells them,
    /// without creating the string.
    @inlinable
    public mutating func append(decimal value: Int) {
        if value < 0 {
            append(UInt8(ascii: "-"))
            // The magnitude of Int.min does not fit in Int: go through UInt.
            append(decimal: value.magnitude)
        } else {
            append(decimal: UInt(value))
        }
    }

    /// Appends the decimal digits of `value`.
    @inlinable
    public mutating func append(decimal value: UInt) {
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: UInt.max has 20 digits
        var count = 0
        var rest = value
        Swift.withUnsafeMutableBytes(of: &digits) { buffer in
            repeat {
                buffer[23 - count] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
                count += 1
            } while rest > 0
        }
        let used = count
        Swift.withUnsafeBytes(of: &digits) { buffer in append(contentsOf: buffer[(24 - used)...]) }
    }
}
