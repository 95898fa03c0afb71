// SPDX-License-Identifier: Apache-2.0

/// A strict decoder for the payload of a base64 `data:` URL.
///
/// The accepted language is RFC 4648 §4 base64: the standard alphabet (`A–Z a–z 0–9 + /`), with or without
/// the trailing `=` padding (clients differ, and padding carries no information). Anything else is refused:
/// whitespace and line breaks, the URL-safe alphabet (`-`, `_`), percent-escapes, `=` anywhere but at the end,
/// and a length that cannot come from any byte string. Unused low bits in the last character are ignored, as
/// mainstream decoders do; they change no image byte.
///
/// The decoded size follows from the length alone, so an oversized payload is refused before a single byte
/// is decoded or allocated.
enum Base64Payload {
    /// Decodes `text`, refusing payloads whose decoded size would exceed `limit` bytes.
    ///
    /// - Throws: `invalid_base64` or `image_too_large`.
    static func decode(_ text: UnsafeBufferPointer<UInt8>, limit: Int) throws(ImageError) -> [UInt8] {
        var end = text.count
        var padding = 0
        while padding < 2, end > 0, text[end - 1] == UInt8(ascii: "=") {
            end -= 1
            padding += 1
        }
        if padding > 0, text.count % 4 != 0 {
            throw .invalidBase64("base64 padding is wrong: a padded payload must be a multiple of 4 characters long")
        }
        let remainder = end % 4
        if remainder == 1 {
            throw .invalidBase64("base64 payload has an impossible length (\(end) characters before padding)")
        }
        let decodedCount = end / 4 * 3 + (remainder == 0 ? 0 : remainder - 1)
        if decodedCount > limit {
            throw ImageError(
                code: ImageError.Code.imageTooLarge,
                message: "image is \(decodedCount) bytes after base64 decoding; the limit is \(limit) bytes")
        }

        var output = [UInt8]()
        output.reserveCapacity(decodedCount)
        var accumulator: UInt32 = 0
        var bits = 0
        for index in 0..<end {
            let character = text[index]
            let value = table[Int(character)]
            guard value != invalid else {
                throw .invalidBase64("invalid base64 character \(describe(character)) at payload offset \(index)")
            }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                accumulator &= (1 << UInt32(bits)) - 1
            }
        }
        return output
    }

    private static let invalid: UInt8 = 0xFF

    /// Maps each byte to its 6-bit value, or ``invalid``.
    private static let table: [UInt8] = {
        var table = [UInt8](repeating: invalid, count: 256)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        for (value, character) in alphabet.enumerated() {
            table[Int(character)] = UInt8(value)
        }
        return table
    }()

    /// A readable name for an offending byte, so the message says what to fix.
    private static func describe(_ byte: UInt8) -> String {
        switch byte {
        case UInt8(ascii: " "): "' ' (whitespace is not allowed)"
        case UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t"): "0x\(hex(byte)) (whitespace is not allowed)"
        case UInt8(ascii: "="): "'=' (padding may only appear at the end)"
        case UInt8(ascii: "-"), UInt8(ascii: "_"):
            "'\(Character(Unicode.Scalar(byte)))' (the URL-safe alphabet is not accepted)"
        case UInt8(ascii: "%"): "'%' (percent-encoding is not accepted)"
        case 0x21...0x7E: "'\(Character(Unicode.Scalar(byte)))'"
        default: "0x\(hex(byte))"
        }
    }

    private static func hex(_ byte: UInt8) -> String {
        let digits = String(byte, radix: 16, uppercase: true)
        return digits.count == 1 ? "0" + digits : digits
    }
}
