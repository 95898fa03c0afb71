// SPDX-License-Identifier: Apache-2.0

/// Reads a PNG's dimensions from its `IHDR` chunk, which the PNG specification requires to come first.
///
/// Layout: the 8-byte signature, then `length (4, big-endian) = 13 | "IHDR" | width (4) | height (4) |
/// bit depth | colour type | compression | filter | interlace | CRC-32 (4)`. The chunk's CRC and field values
/// are checked too, since a decoder downstream would refuse the file on the same grounds.
enum PNGHeader {
    static let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    static func dimensions(_ header: HeaderBytes) throws(ImageError) -> (width: Int, height: Int) {
        guard header.has(33, at: 0) else {
            throw .invalidImage(.png, "the file ends inside the IHDR chunk (\(header.count) bytes)")
        }
        guard header.matches(ascii: "IHDR", at: 12) else {
            throw .invalidImage(.png, "the first chunk is not IHDR")
        }
        guard header.be32(8) == 13 else {
            throw .invalidImage(.png, "the IHDR chunk length is not 13")
        }
        let stored = UInt32(truncatingIfNeeded: header.be32(29) ?? 0)
        guard crc32(header.bytes[12..<29]) == stored else {
            throw .invalidImage(.png, "the IHDR chunk's CRC does not match")
        }
        let bitDepth = header.bytes[24]
        let colourType = header.bytes[25]
        let allowedDepths: [UInt8]
        switch colourType {
        case 0: allowedDepths = [1, 2, 4, 8, 16]
        case 3: allowedDepths = [1, 2, 4, 8]
        case 2, 4, 6: allowedDepths = [8, 16]
        default: throw .invalidImage(.png, "unknown colour type \(colourType)")
        }
        guard allowedDepths.contains(bitDepth) else {
            throw .invalidImage(.png, "bit depth \(bitDepth) is not allowed for colour type \(colourType)")
        }
        guard header.bytes[26] == 0, header.bytes[27] == 0, header.bytes[28] <= 1 else {
            throw .invalidImage(.png, "unknown compression, filter or interlace method")
        }
        // Both reads are inside the 33 bytes checked above.
        return (header.be32(16) ?? 0, header.be32(20) ?? 0)
    }

    /// CRC-32 (ISO 3309, as PNG uses it), bit by bit: it only ever runs over the 17 bytes of `IHDR`.
    static func crc32(_ bytes: some Sequence<UInt8>) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 {
                crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1
            }
        }
        return ~crc
    }
}
