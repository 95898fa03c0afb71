// SPDX-License-Identifier: Apache-2.0
import Foundation

/// Tiny hand-built image files: just enough header for each format, built byte by byte.
enum ImageFixtures {
    // MARK: PNG

    /// A real, complete 1×1 RGBA PNG (signature, IHDR, IDAT, IEND), as commonly used in tests.
    static let onePixelPNGBase64 =
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

    /// A PNG signature and IHDR chunk (with a correct CRC unless `badCRC`), then an empty IEND.
    static func png(
        width: UInt32, height: UInt32, bitDepth: UInt8 = 8, colourType: UInt8 = 6, chunkType: String = "IHDR",
        badCRC: Bool = false
    ) -> [UInt8] {
        let data = be32(width) + be32(height) + [bitDepth, colourType, 0, 0, 0]
        let body = Array(chunkType.utf8) + data
        var crc = crc32(body)
        if badCRC { crc ^= 1 }
        let ihdr = be32(UInt32(data.count)) + body + be32(crc)
        let iend = be32(0) + Array("IEND".utf8) + be32(crc32(Array("IEND".utf8)))
        return [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + ihdr + iend
    }

    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = (crc >> 1) ^ (crc & 1 == 1 ? 0xEDB8_8320 : 0) }
        }
        return ~crc
    }

    // MARK: JPEG

    /// An APP0 (JFIF) segment.
    static let app0: [UInt8] = [0xFF, 0xE0, 0x00, 0x10] + Array("JFIF".utf8) + [0, 1, 1, 0, 0, 1, 0, 1, 0, 0]
    /// A (content-free) DHT segment: shares the SOF marker range but is not a frame header.
    static let dht: [UInt8] = [0xFF, 0xC4, 0x00, 0x05, 0x00, 0x01, 0x02]

    /// SOI, the given segments, a frame header `sof` (3 components), a minimal SOS and EOI.
    static func jpeg(width: UInt16, height: UInt16, sof: UInt8 = 0xC0, before: [UInt8] = app0) -> [UInt8] {
        let frame: [UInt8] =
            [0xFF, sof, 0x00, 17, 8] + be16(height) + be16(width) + [3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1]
        let scan: [UInt8] = [0xFF, 0xDA, 0x00, 0x08, 1, 1, 0, 0, 0x3F, 0, 0x12, 0x34]
        return [0xFF, 0xD8] + before + frame + scan + [0xFF, 0xD9]
    }

    // MARK: WebP

    static func riff(_ chunk: String, _ data: [UInt8]) -> [UInt8] {
        var body = Array("WEBP".utf8) + Array(chunk.utf8) + le32(UInt32(data.count)) + data
        if data.count % 2 == 1 { body.append(0) }
        return Array("RIFF".utf8) + le32(UInt32(body.count)) + body
    }

    /// A lossy key frame header: frame tag, start code, 14-bit dimensions (scale bits set, to be ignored).
    static func webpVP8(width: UInt16, height: UInt16, keyFrame: Bool = true, startCode: [UInt8] = [0x9D, 0x01, 0x2A])
        -> [UInt8]
    {
        let tag: [UInt8] = [keyFrame ? 0x50 : 0x51, 0x02, 0x00]
        return riff("VP8 ", tag + startCode + le16(width | 0x4000) + le16(height | 0x8000) + [0, 0])
    }

    /// A lossless header: signature 0x2F, then width−1 and height−1 in 14 bits each.
    static func webpVP8L(width: UInt32, height: UInt32, signature: UInt8 = 0x2F, version: UInt32 = 0) -> [UInt8] {
        let bits = (width - 1) | (height - 1) << 14 | 1 << 28 | version << 29
        return riff("VP8L", [signature] + le32(bits) + [0, 0, 0])
    }

    /// An extended header: flags, reserved, 24-bit canvas width−1 and height−1.
    static func webpVP8X(width: UInt32, height: UInt32) -> [UInt8] {
        riff("VP8X", [0x10, 0, 0, 0] + Array(le32(width - 1).prefix(3)) + Array(le32(height - 1).prefix(3)))
    }

    // MARK: GIF

    /// A GIF with a 2-entry global colour table, an optional graphic control extension and comment, and one
    /// image of `frame` size (or none).
    static func gif(
        version: String = "GIF89a", screen: (UInt16, UInt16), frame: (UInt16, UInt16)?, extensions: Bool = true
    ) -> [UInt8] {
        var bytes = Array(version.utf8) + le16(screen.0) + le16(screen.1) + [0x80, 0, 0]
        bytes += [0, 0, 0, 255, 255, 255]  // global colour table, 2 entries
        if extensions {
            bytes += [0x21, 0xF9, 4, 0x04, 10, 0, 0, 0]  // graphic control
            bytes += [0x21, 0xFE, 5] + Array("hello".utf8) + [3] + Array("abc".utf8) + [0]  // comment
        }
        if let frame {
            bytes += [0x2C, 0, 0, 0, 0] + le16(frame.0) + le16(frame.1) + [0]
            bytes += [2, 2, 0x44, 0x01, 0]  // LZW minimum code size, one sub-block, terminator
        }
        return bytes + [0x3B]
    }

    // MARK: Helpers

    static func dataURL(_ bytes: [UInt8], mime: String = "image/png") -> String {
        "data:\(mime);base64," + Data(bytes).base64EncodedString()
    }

    static func be16(_ v: UInt16) -> [UInt8] { [UInt8(v >> 8), UInt8(v & 0xFF)] }
    static func be32(_ v: UInt32) -> [UInt8] {
        [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)]
    }
    static func le16(_ v: UInt16) -> [UInt8] { be16(v).reversed() }
    static func le32(_ v: UInt32) -> [UInt8] { be32(v).reversed() }
}
