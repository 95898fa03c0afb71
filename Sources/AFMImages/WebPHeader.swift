// SPDX-License-Identifier: Apache-2.0

/// Reads a WebP's dimensions from its first chunk.
///
/// The file is `"RIFF" | size (4, LE) | "WEBP"` followed by chunks `fourcc | size (4, LE) | data`. The first
/// chunk decides the layout:
/// - `VP8 ` (lossy): a 3-byte frame tag whose low bit is 0 for a key frame, the start code `9D 01 2A`, then
///   14-bit width and height (the top two bits of each 16-bit field are scaling, not size);
/// - `VP8L` (lossless): the signature byte `0x2F`, then 14-bit width − 1 and height − 1 and a 3-bit version
///   that must be 0, packed little-endian;
/// - `VP8X` (extended, also animated): flags, 3 reserved bytes, then 24-bit canvas width − 1 and height − 1.
enum WebPHeader {
    static func dimensions(_ header: HeaderBytes) throws(ImageError) -> (width: Int, height: Int) {
        guard let chunkSize = header.le32(16) else {
            throw .invalidImage(.webp, "the data ends before the first chunk")
        }
        let data = 20
        if header.matches(ascii: "VP8 ", at: 12) {
            try require(10, chunkSize: chunkSize, in: header, name: "VP8 ")
            guard header.bytes[data] & 1 == 0 else {
                throw .invalidImage(.webp, "the VP8 frame is not a key frame")
            }
            guard header.matches([0x9D, 0x01, 0x2A], at: data + 3) else {
                throw .invalidImage(.webp, "the VP8 start code is missing")
            }
            // Inside the 10 bytes required above.
            return ((header.le16(data + 6) ?? 0) & 0x3FFF, (header.le16(data + 8) ?? 0) & 0x3FFF)
        }
        if header.matches(ascii: "VP8L", at: 12) {
            try require(5, chunkSize: chunkSize, in: header, name: "VP8L")
            guard header.bytes[data] == 0x2F else {
                throw .invalidImage(.webp, "the VP8L signature byte is not 0x2F")
            }
            let bits = header.le32(data + 1) ?? 0  // inside the 5 bytes required above
            guard bits >> 29 == 0 else {
                throw .invalidImage(.webp, "unknown VP8L version \(bits >> 29)")
            }
            return ((bits & 0x3FFF) + 1, (bits >> 14 & 0x3FFF) + 1)
        }
        if header.matches(ascii: "VP8X", at: 12) {
            try require(10, chunkSize: chunkSize, in: header, name: "VP8X")
            // Inside the 10 bytes required above.
            return ((header.le24(data + 4) ?? 0) + 1, (header.le24(data + 7) ?? 0) + 1)
        }
        throw .invalidImage(.webp, "the first chunk is not VP8, VP8L or VP8X")
    }

    /// Checks that the chunk declares and the data holds at least `count` bytes of chunk data.
    private static func require(
        _ count: Int, chunkSize: Int, in header: HeaderBytes, name: String
    ) throws(ImageError) {
        guard chunkSize >= count else {
            throw .invalidImage(.webp, "the \(name) chunk is too short (\(chunkSize) bytes)")
        }
        guard header.has(count, at: 20) else {
            throw .invalidImage(.webp, "the data ends inside the \(name) header")
        }
    }
}
