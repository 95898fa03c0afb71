// SPDX-License-Identifier: Apache-2.0
private import CGD

/// Decodes PNG, JPEG, WebP and GIF with libgd and re-encodes them within the chat client's limits.
///
/// A source that decodes and already fits (longest edge ≤ ``maximumEdge`` and ≤ ``maximumBytes``) is kept
/// byte for byte, so nothing is recompressed needlessly. Otherwise it is scaled (bilinear) so its longest edge
/// is at most ``maximumEdge`` and encoded as JPEG (sources that were JPEG) or PNG (others, keeping
/// transparency); a PNG that is still too large becomes a JPEG flattened on white, and JPEG quality and then
/// size step down until the bytes fit ``maximumBytes``. An animated GIF keeps its first frame, as the gateway
/// does.
public struct ImageNormalizer: Sendable {
    /// The largest source file accepted (32 MiB).
    public var maximumSourceBytes = 32 * 1024 * 1024
    /// The longest edge after normalizing (1536 px).
    public var maximumEdge = 1536
    /// The largest encoded result (2 MiB).
    public var maximumBytes = 2 * 1024 * 1024

    public init() {}

    /// The format of `bytes` judged by magic numbers, as a MIME type, or nil when it is none of the four.
    public static func sniffMIMEType(_ bytes: [UInt8]) -> String? {
        if bytes.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return "image/png" }
        if bytes.starts(with: [0xFF, 0xD8, 0xFF]) { return "image/jpeg" }
        if bytes.starts(with: Array("GIF87a".utf8)) || bytes.starts(with: Array("GIF89a".utf8)) { return "image/gif" }
        if bytes.count >= 12, bytes.starts(with: Array("RIFF".utf8)), Array(bytes[8..<12]) == Array("WEBP".utf8) {
            return "image/webp"
        }
        return nil
    }

    /// Normalizes the bytes of an image file.
    ///
    /// - Throws: ``ImageCodecError`` for a file over 32 MiB, an unknown format, or bytes libgd cannot decode.
    public func normalize(_ source: [UInt8]) throws(ImageCodecError) -> NormalizedImage {
        guard source.count <= maximumSourceBytes else {
            throw ImageCodecError("the file is \(source.count / (1024 * 1024)) MiB; at most 32 MiB can be attached")
        }
        guard let mime = Self.sniffMIMEType(source) else {
            throw ImageCodecError("not a PNG, JPEG, WebP or GIF image")
        }
        guard let decoded = decode(source, mime: mime) else {
            throw ImageCodecError("the \(mime) data could not be decoded (damaged or unsupported variant)")
        }
        defer { gdImageDestroy(decoded) }
        let width = Int(afm_gd_width(decoded))
        let height = Int(afm_gd_height(decoded))
        guard width > 0, height > 0 else { throw ImageCodecError("the image has no pixels") }
        if max(width, height) <= maximumEdge, source.count <= maximumBytes {
            return NormalizedImage(bytes: source, mimeType: mime, width: width, height: height, isOriginal: true)
        }
        if afm_gd_is_true_color(decoded) == 0 { gdImagePaletteToTrueColor(decoded) }
        var edge = min(maximumEdge, max(width, height))
        while edge >= 16 {
            let scale = Double(edge) / Double(max(width, height))
            let targetWidth = max(1, Int((Double(width) * scale).rounded()))
            let targetHeight = max(1, Int((Double(height) * scale).rounded()))
            guard let scaled = resize(decoded, width: targetWidth, height: targetHeight) else {
                throw ImageCodecError("libgd could not scale the image")
            }
            defer { if scaled != decoded { gdImageDestroy(scaled) } }
            if mime != "image/jpeg", let png = encodePNG(scaled), png.count <= maximumBytes {
                return NormalizedImage(bytes: png, mimeType: "image/png", width: targetWidth, height: targetHeight, isOriginal: false)
            }
            for quality in [85, 70, 55] {
                if let jpeg = encodeJPEG(scaled, quality: Int32(quality)), jpeg.count <= maximumBytes {
                    return NormalizedImage(
                        bytes: jpeg, mimeType: "image/jpeg", width: targetWidth, height: targetHeight, isOriginal: false)
                }
            }
            edge = edge * 3 / 4
        }
        throw ImageCodecError("the image cannot be encoded within 2 MiB")
    }

    // MARK: - libgd

    fileprivate func decode(_ bytes: [UInt8], mime: String) -> gdImagePtr? {
        var copy = bytes
        let count = Int32(copy.count)
        return copy.withUnsafeMutableBytes { raw -> gdImagePtr? in
            switch mime {
            case "image/png": gdImageCreateFromPngPtr(count, raw.baseAddress)
            case "image/jpeg": gdImageCreateFromJpegPtr(count, raw.baseAddress)
            case "image/gif": gdImageCreateFromGifPtr(count, raw.baseAddress)
            case "image/webp": gdImageCreateFromWebpPtr(count, raw.baseAddress)
            default: nil
            }
        }
    }

    /// The scaled image (a new one), or `image` itself when the size already matches.
    private func resize(_ image: gdImagePtr, width: Int, height: Int) -> gdImagePtr? {
        if Int(afm_gd_width(image)) == width, Int(afm_gd_height(image)) == height { return image }
        gdImageSetInterpolationMethod(image, GD_BILINEAR_FIXED)
        return gdImageScale(image, UInt32(width), UInt32(height))
    }

    private func encodePNG(_ image: gdImagePtr) -> [UInt8]? {
        gdImageSaveAlpha(image, 1)
        var size: Int32 = 0
        guard let pointer = gdImagePngPtr(image, &size) else { return nil }
        defer { gdFree(pointer) }
        return Array(UnsafeRawBufferPointer(start: pointer, count: Int(size)))
    }

    /// JPEG has no alpha channel: the image is drawn over white first.
    private func encodeJPEG(_ image: gdImagePtr, quality: Int32) -> [UInt8]? {
        let width = afm_gd_width(image)
        let height = afm_gd_height(image)
        guard let flat = gdImageCreateTrueColor(width, height) else { return nil }
        defer { gdImageDestroy(flat) }
        gdImageFilledRectangle(flat, 0, 0, width - 1, height - 1, 0xFFFFFF)
        gdImageAlphaBlending(flat, 1)
        gdImageCopy(flat, image, 0, 0, 0, 0, width, height)
        var size: Int32 = 0
        guard let pointer = gdImageJpegPtr(flat, &size, quality) else { return nil }
        defer { gdFree(pointer) }
        return Array(UnsafeRawBufferPointer(start: pointer, count: Int(size)))
    }
}

extension ImageNormalizer {
    /// Decodes `bytes` fully to check them and returns the MIME type and size, without changing anything.
    public func inspect(_ bytes: [UInt8]) throws(ImageCodecError) -> (mimeType: String, width: Int, height: Int) {
        guard let mime = Self.sniffMIMEType(bytes) else { throw ImageCodecError("not a PNG, JPEG, WebP or GIF image") }
        guard let decoded = decode(bytes, mime: mime) else {
            throw ImageCodecError("the \(mime) data could not be decoded (damaged or unsupported variant)")
        }
        defer { gdImageDestroy(decoded) }
        return (mime, Int(afm_gd_width(decoded)), Int(afm_gd_height(decoded)))
    }
}
