// SPDX-License-Identifier: Apache-2.0

/// Reads a GIF's dimensions: the first image's, or the logical screen's when the file has no image.
///
/// The issue asks for the first frame's dimensions of an animated GIF. The file is
/// `"GIF87a"|"GIF89a" | screen width (2, LE) | screen height (2, LE) | flags | background | aspect`, an
/// optional global colour table (`3 × 2^(n+1)` bytes when the flags' top bit is set), then blocks:
/// extensions (`21 label` followed by length-prefixed sub-blocks ending in a 0 length), image descriptors
/// (`2C | left | top | width | height | …`) and the trailer (`3B`). The parser skips extensions to the first
/// image descriptor. A file that ends before it is truncated (`invalid_image`); a well-formed file whose
/// trailer comes first has no frame, and its logical screen size is used.
enum GIFHeader {
    static func dimensions(_ header: HeaderBytes) throws(ImageError) -> (width: Int, height: Int) {
        guard let screenWidth = header.le16(6), let screenHeight = header.le16(8), let flags = header.u8(10),
            header.has(13, at: 0)
        else {
            throw .invalidImage(.gif, "the data ends inside the logical screen descriptor")
        }
        var offset = 13
        if flags & 0x80 != 0 {
            offset += 3 << (Int(flags & 0x07) + 1)
        }
        while true {
            guard let block = header.u8(offset) else {
                throw .invalidImage(.gif, "the data ends before the first image")
            }
            switch block {
            case 0x2C:
                guard let width = header.le16(offset + 5), let height = header.le16(offset + 7) else {
                    throw .invalidImage(.gif, "the data ends inside the first image descriptor")
                }
                return (width, height)
            case 0x21:
                offset += 2  // introducer and label
                while true {
                    guard let size = header.u8(offset) else {
                        throw .invalidImage(.gif, "the data ends inside an extension block")
                    }
                    offset += 1 + Int(size)
                    if size == 0 { break }
                }
            case 0x3B:
                return (screenWidth, screenHeight)
            default:
                throw .invalidImage(.gif, "unexpected block 0x\(String(block, radix: 16)) at offset \(offset)")
            }
        }
    }
}
