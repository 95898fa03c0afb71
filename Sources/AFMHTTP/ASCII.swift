// SPDX-License-Identifier: Apache-2.0

/// Byte-level character classes from RFC 9110/9112, used by the parser and the encoder.
///
/// Table lookups on `UInt8` instead of `Character` work: the parser runs per byte on every request.
enum ASCII {
    static let cr: UInt8 = 0x0D
    static let lf: UInt8 = 0x0A
    static let space: UInt8 = 0x20
    static let tab: UInt8 = 0x09
    static let colon: UInt8 = 0x3A
    static let semicolon: UInt8 = 0x3B
    static let comma: UInt8 = 0x2C
    static let question: UInt8 = 0x3F
    static let slash: UInt8 = 0x2F
    static let crlf: [UInt8] = [0x0D, 0x0A]

    /// `tchar` from RFC 9110 §5.6.2: the characters of a method or field name.
    static let tokenTable: [Bool] = (0..<256).map { byte in
        switch UInt8(byte) {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(UInt8(byte))
        }
    }

    @inline(__always)
    static func isToken(_ byte: UInt8) -> Bool { tokenTable[Int(byte)] }

    /// Field-value bytes: visible ASCII, space, tab and obs-text (0x80–0xFF); no other control characters.
    @inline(__always)
    static func isFieldValueByte(_ byte: UInt8) -> Bool {
        byte >= 0x20 ? byte != 0x7F : byte == tab
    }

    @inline(__always)
    static func isWhitespace(_ byte: UInt8) -> Bool { byte == space || byte == tab }

    @inline(__always)
    static func lowercased(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
    }

    /// Whether `bytes` equals the lower-case ASCII `lowercaseLiteral`, ignoring case.
    @inline(__always)
    static func equalsIgnoringCase(_ bytes: UnsafeBufferPointer<UInt8>, _ lowercaseLiteral: StaticString) -> Bool {
        guard bytes.count == lowercaseLiteral.utf8CodeUnitCount else { return false }
        let literal = lowercaseLiteral.utf8Start
        for index in 0..<bytes.count where lowercased(bytes[index]) != literal[index] { return false }
        return true
    }

    /// The value of a hexadecimal digit, or `nil`.
    @inline(__always)
    static func hexValue(_ byte: UInt8) -> Int? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): Int(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): Int(byte - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): Int(byte - UInt8(ascii: "A") + 10)
        default: nil
        }
    }

    /// Appends the decimal digits of a non-negative integer, without allocating.
    @inline(__always)
    static func appendDecimal(_ value: Int, to out: inout [UInt8]) {
        precondition(value >= 0, "negative length")
        var digits = 1
        var rest = value / 10
        while rest > 0 {
            digits += 1
            rest /= 10
        }
        let start = out.count
        out.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: digits))
        var remaining = value
        var index = start + digits - 1
        repeat {
            out[index] = UInt8(ascii: "0") + UInt8(remaining % 10)
            remaining /= 10
            index -= 1
        } while remaining > 0
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Appends the lower-case hexadecimal digits of a positive integer (chunk sizes).
    @inline(__always)
    static func appendHex(_ value: Int, to out: inout [UInt8]) {
        precondition(value > 0, "chunk sizes are positive")
        var shift = (Int.bitWidth - value.leadingZeroBitCount - 1) / 4 * 4
        while shift >= 0 {
            out.append(hexDigits[(value >> shift) & 0xF])
            shift -= 4
        }
    }
}
