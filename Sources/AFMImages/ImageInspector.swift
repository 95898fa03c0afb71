// SPDX-License-Identifier: Apache-2.0

/// Checks `input_image` data URLs: decodes the base64 payload under a size limit, recognises the format by
/// magic bytes and reads the width and height from the file header. Pixels are never decoded.
///
/// ```
/// data:<declared mime>[;params];base64,<payload>
///        │                               │
///        └ ignored (not trusted)          └ strict base64 ─► ≤ 8 MiB ─► magic bytes ─► header ─► 1…16384 px
/// ```
///
/// The checks run cheapest first, so a hostile request costs little: the size is computed from the payload
/// length before anything is decoded, and header parsers touch only the first bytes (a JPEG or GIF parser
/// may skip over segments to the frame header, but never loops without advancing).
public enum ImageInspector {
    /// The largest accepted decoded image, in bytes (8 MiB).
    public static let maximumDecodedBytes = 8 * 1024 * 1024
    /// The largest accepted width or height, in pixels.
    public static let maximumDimension = 16384
    /// The longest accepted header between `data:` and the comma; real media types are far shorter, and
    /// the bound keeps a missing comma from being searched for through a huge payload.
    public static let maximumHeaderLength = 256

    /// Checks a data URL of the form `data:<mime>;base64,<payload>` and describes the image in it.
    ///
    /// The scheme and the `base64` token are case-insensitive, and media-type parameters (`;charset=…`) are
    /// allowed before `;base64`. The declared media type may be anything, even empty: the format is decided
    /// by magic bytes, and ``ImageInfo/mimeType`` reports the real one.
    ///
    /// - Parameter dataURL: The `image_url` of an `input_image` part.
    /// - Returns: The format, dimensions and decoded bytes.
    /// - Throws: ``ImageError`` with code `invalid_image_url` (not a base64 data URL; remote URLs included),
    ///   `invalid_base64`, `image_too_large`, or any code of ``inspect(bytes:)``.
    public static func inspect(dataURL: String) throws(ImageError) -> ImageInfo {
        var url = dataURL
        // `withUTF8` rethrows untyped errors, so the typed error travels out in a `Result`.
        let decoded = url.withUTF8 { utf8 in
            Result { () throws(ImageError) -> [UInt8] in
                let payload = try payloadRange(of: utf8)
                return try Base64Payload.decode(
                    UnsafeBufferPointer(rebasing: utf8[payload]), limit: maximumDecodedBytes)
            }
        }
        return try inspect(bytes: decoded.get())
    }

    /// Describes an image file given as bytes.
    ///
    /// - Parameter bytes: A complete image file (only its header is read).
    /// - Returns: The format, dimensions and `bytes`.
    /// - Throws: ``ImageError`` with code `image_too_large`, `unsupported_image_format` (not PNG, JPEG, WebP
    ///   or GIF), `invalid_image` (a supported format with a truncated or broken header) or
    ///   `invalid_image_dimensions` (a side of 0 or more than ``maximumDimension`` pixels).
    public static func inspect(bytes: [UInt8]) throws(ImageError) -> ImageInfo {
        guard bytes.count <= maximumDecodedBytes else {
            throw ImageError(
                code: ImageError.Code.imageTooLarge,
                message: "image is \(bytes.count) bytes; the limit is \(maximumDecodedBytes) bytes")
        }
        let header = HeaderBytes(bytes: bytes)
        let format = try detectFormat(header)
        let size: (width: Int, height: Int)
        switch format {
        case .png: size = try PNGHeader.dimensions(header)
        case .jpeg: size = try JPEGHeader.dimensions(header)
        case .webp: size = try WebPHeader.dimensions(header)
        case .gif: size = try GIFHeader.dimensions(header)
        }
        let range = 1...maximumDimension
        guard range.contains(size.width), range.contains(size.height) else {
            throw ImageError(
                code: ImageError.Code.invalidImageDimensions,
                message: "\(format.rawValue.uppercased()) image is \(size.width)×\(size.height) pixels; "
                    + "width and height must each be between 1 and \(maximumDimension)")
        }
        return ImageInfo(format: format, width: size.width, height: size.height, bytes: bytes)
    }

    // MARK: - Data URL

    /// The byte range of the base64 payload, after checking the scheme and header.
    private static func payloadRange(of url: UnsafeBufferPointer<UInt8>) throws(ImageError) -> Range<Int> {
        let text = HeaderBytes(bytes: Array(url.prefix(5 + maximumHeaderLength + 1)))
        guard hasPrefix(text, "data:") else {
            if hasPrefix(text, "http://") || hasPrefix(text, "https://") {
                throw .invalidImageURL(
                    "remote image URLs are not supported; send the image inline as a base64 data URL "
                        + "(data:image/png;base64,…)")
            }
            throw .invalidImageURL(
                url.isEmpty
                    ? "image_url is empty; send a base64 data URL (data:image/png;base64,…)"
                    : "image_url is not a data URL; send a base64 data URL (data:image/png;base64,…)")
        }
        guard let comma = text.bytes.firstIndex(of: UInt8(ascii: ",")) else {
            throw .invalidImageURL(
                url.count > text.count
                    ? "the data URL header is longer than \(maximumHeaderLength) bytes or has no ','"
                    : "the data URL has no ',' between its header and its data")
        }
        let header = text.bytes[5..<comma]
        guard header.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw .invalidImageURL("the data URL header contains spaces, control or non-ASCII characters")
        }
        let lastParameter = header.split(separator: UInt8(ascii: ";"), omittingEmptySubsequences: false).last
        guard header.contains(UInt8(ascii: ";")), let lastParameter,
            lastParameter.count == 6, lastParameter.elementsEqual("base64".utf8, by: { $0 | 0x20 == $1 })
        else {
            throw .invalidImageURL("the data URL is not base64-encoded; use data:<mime type>;base64,<data>")
        }
        return (comma + 1)..<url.count
    }

    /// ASCII prefix test, ignoring case (URL schemes are case-insensitive).
    private static func hasPrefix(_ text: HeaderBytes, _ prefix: String) -> Bool {
        let expected = Array(prefix.utf8)
        guard text.has(expected.count, at: 0) else { return false }
        return zip(text.bytes, expected).allSatisfy { actual, wanted in
            actual == wanted || (wanted >= UInt8(ascii: "a") && wanted <= UInt8(ascii: "z") && actual | 0x20 == wanted)
        }
    }

    // MARK: - Format

    /// The format whose magic bytes `header` starts with.
    ///
    /// Data too short to hold a whole signature, but matching one as far as it goes, is a truncated image of
    /// that format (`invalid_image`), not an unsupported one.
    private static func detectFormat(_ header: HeaderBytes) throws(ImageError) -> ImageFormat {
        // `nil` in a pattern matches any byte (the RIFF size field).
        let riff: [UInt8?] = Array("RIFF".utf8) + [nil, nil, nil, nil] + Array("WEBP".utf8)
        let candidates: [(ImageFormat, [[UInt8?]])] = [
            (.png, [PNGHeader.signature]),
            (.jpeg, [JPEGHeader.signature]),
            (.gif, [Array("GIF87a".utf8), Array("GIF89a".utf8)]),
            (.webp, [riff]),
        ]
        guard !header.bytes.isEmpty else {
            throw ImageError(code: ImageError.Code.invalidImage, message: "the image is empty (0 bytes)")
        }
        for (format, signatures) in candidates {
            for signature in signatures {
                let compared = min(signature.count, header.count)
                let agrees = zip(header.bytes.prefix(compared), signature).allSatisfy { $1 == nil || $0 == $1 }
                guard agrees else { continue }
                if compared < signature.count {
                    throw .invalidImage(format, "the data ends inside the signature (\(header.count) bytes)")
                }
                return format
            }
        }
        throw ImageError(
            code: ImageError.Code.unsupportedImageFormat,
            message: "the image is not PNG, JPEG, WebP or GIF (checked by its first bytes, not the declared type)")
    }
}
