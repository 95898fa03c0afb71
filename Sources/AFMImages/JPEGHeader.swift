// SPDX-License-Identifier: Apache-2.0

/// Reads a JPEG's dimensions from its first frame header (SOF0–SOF15).
///
/// A JPEG is a sequence of markers (`FF xx`). After SOI, the parser walks the marker segments: fill bytes
/// (extra `FF`s before a marker) are skipped, standalone markers (TEM, RST0–7, a repeated SOI) carry no
/// length, and every other segment starts with a big-endian length that includes itself. The first SOFn
/// — `C0`–`CF` except DHT (`C4`), JPG (`C8`) and DAC (`CC`), which share that range — holds
/// `precision (1) | height (2) | width (2)`. Reaching a scan (SOS) or the end (EOI) first, a byte that is
/// not a marker, or the end of the data all make the file invalid.
enum JPEGHeader {
    static let signature: [UInt8] = [0xFF, 0xD8, 0xFF]

    static func dimensions(_ header: HeaderBytes) throws(ImageError) -> (width: Int, height: Int) {
        var offset = 2  // just past SOI
        while true {
            guard let first = header.u8(offset) else { throw truncated }
            guard first == 0xFF else {
                throw .invalidImage(.jpeg, "expected a marker at offset \(offset), found 0x\(hex(first))")
            }
            while header.u8(offset) == 0xFF { offset += 1 }  // fill bytes
            guard let marker = header.u8(offset) else { throw truncated }
            offset += 1
            switch marker {
            case 0x01, 0xD0...0xD8:
                continue  // TEM, RSTn, SOI: no length, no payload
            case 0xD9:
                throw .invalidImage(.jpeg, "end of image before any frame header")
            case 0xDA:
                throw .invalidImage(.jpeg, "a scan starts before any frame header")
            case 0x00:
                throw .invalidImage(.jpeg, "a stuffed 0xFF00 outside entropy-coded data at offset \(offset - 2)")
            default:
                break
            }
            guard let length = header.be16(offset) else { throw truncated }
            guard length >= 2 else {
                throw .invalidImage(.jpeg, "segment 0xFF\(hex(marker)) has an impossible length \(length)")
            }
            if isFrameHeader(marker) {
                guard length >= 8 else {
                    throw .invalidImage(.jpeg, "the frame header is too short (\(length) bytes)")
                }
                guard let height = header.be16(offset + 3), let width = header.be16(offset + 5) else {
                    throw truncated
                }
                return (width, height)
            }
            offset += length
        }
    }

    /// SOF0–SOF15 except the three markers that share the range.
    static func isFrameHeader(_ marker: UInt8) -> Bool {
        (0xC0...0xCF).contains(marker) && marker != 0xC4 && marker != 0xC8 && marker != 0xCC
    }

    private static var truncated: ImageError {
        .invalidImage(.jpeg, "the data ends before the frame header")
    }

    private static func hex(_ byte: UInt8) -> String {
        let digits = String(byte, radix: 16, uppercase: true)
        return digits.count == 1 ? "0" + digits : digits
    }
}
