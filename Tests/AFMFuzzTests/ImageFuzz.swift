// SPDX-License-Identifier: Apache-2.0
@testable import AFMImages

/// Image header inspection and base64 payloads.
enum ImageFuzz {
    /// Property: the bytes and the same bytes in a base64 data URL get the same verdict, and an accepted image
    /// has dimensions within the limits.
    static func header(_ bytes: [UInt8]) throws {
        let direct = Result { () throws(ImageError) -> ImageInfo in try ImageInspector.inspect(bytes: bytes) }
        let viaURL = Result { () throws(ImageError) -> ImageInfo in
            try ImageInspector.inspect(dataURL: "data:image/png;base64," + encode(bytes))
        }
        switch (direct, viaURL) {
        case (.success(let a), .success(let b)):
            try check(a == b, "data URL and bytes differ: \(a) vs \(b)")
            try check(
                (1...ImageInspector.maximumDimension).contains(a.width)
                    && (1...ImageInspector.maximumDimension).contains(a.height),
                "accepted dimensions out of range: \(a.width)×\(a.height)")
        case (.failure(let a), .failure(let b)):
            try check(a.code == b.code, "data URL and bytes fail differently: \(a) vs \(b)")
        default:
            throw PropertyViolation(description: "data URL and bytes disagree: \(direct) vs \(viaURL)")
        }
    }

    /// Properties: decoding arbitrary text never crashes and never exceeds the limit; any byte string, encoded
    /// (padded or not), decodes back to itself.
    static func base64(_ bytes: [UInt8]) throws {
        let limit = 1024
        if let decoded = try? bytes.withUnsafeBufferPointer({ try Base64Payload.decode($0, limit: limit) }) {
            try check(decoded.count <= limit, "decoded \(decoded.count) bytes over the limit \(limit)")
        }
        for padded in [true, false] {
            let text = Array(encode(bytes, padded: padded).utf8)
            let decoded = try text.withUnsafeBufferPointer { try Base64Payload.decode($0, limit: bytes.count) }
            try check(decoded == bytes, "base64 round trip changed \(bytes.count) bytes (padded: \(padded))")
        }
    }

    /// RFC 4648 base64, the reference the decoder is checked against.
    static func encode(_ bytes: [UInt8], padded: Bool = true) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var out: [UInt8] = []
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index..<min(index + 3, bytes.count)]
            var group: UInt32 = 0
            for (position, byte) in chunk.enumerated() { group |= UInt32(byte) << (16 - 8 * UInt32(position)) }
            for position in 0..<(chunk.count + 1) { out.append(alphabet[Int(group >> (18 - 6 * UInt32(position)) & 63)]) }
            if padded { out += Array(repeating: UInt8(ascii: "="), count: 3 - chunk.count) }
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }
}
